package runtime_test

import (
	"bufio"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime"
)

// llamaCppGolden is one llama.cpp run of testdata/llamacpp/NAME.txt: the
// top logits of prompt positions (every one, or the last) and of every
// greedy step, and the greedy tokens. Each file's header says how
// llama.cpp ran and what its rows hold:
//
//	prompt POS ID:LOGIT ...   the top logits at prompt position POS
//	gen POS ID:LOGIT ...      the top logits after the greedy token at POS
//	greedy ID ...             the greedy tokens
//
// The tests that read them: TestLlamaCppGolden (OLMo 2, Phi-3 variants),
// TestGemmaMatchesLlamaCpp, TestMoEGoldenLlamaCpp (Mixtral, Qwen3-MoE)
// and TestGPTOSSGoldenLlamaCpp.
type llamaCppGolden struct {
	prompt, gen [][]idLogit
	greedy      []int
}

type idLogit struct {
	id    int
	logit float64
}

func readGolden(t *testing.T, name string) llamaCppGolden {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "llamacpp", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var g llamaCppGolden
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		switch fs[0] {
		case "prompt", "gen":
			var row []idLogit
			for _, kv := range fs[2:] {
				id, l, _ := strings.Cut(kv, ":")
				i, err1 := strconv.Atoi(id)
				v, err2 := strconv.ParseFloat(l, 64)
				if err := errors.Join(err1, err2); err != nil {
					t.Fatalf("%s: %q: %v", name, sc.Text(), err)
				}
				row = append(row, idLogit{i, v})
			}
			if fs[0] == "prompt" {
				g.prompt = append(g.prompt, row)
			} else {
				g.gen = append(g.gen, row)
			}
		case "greedy":
			for _, s := range fs[1:] {
				i, err := strconv.Atoi(s)
				if err != nil {
					t.Fatal(err)
				}
				g.greedy = append(g.greedy, i)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// lastAndSteps returns the rows of the MoE and GPT-OSS files (the
// prompt's last position, then 8 greedy steps, top 5 each), failing unless
// the file holds just those and a greedy token for each.
func (g llamaCppGolden) lastAndSteps(t *testing.T, name string) [][]idLogit {
	t.Helper()
	rows := append(slices.Clip(g.prompt), g.gen...)
	if len(g.prompt) != 1 || len(rows) != 9 || len(g.greedy) != len(rows) || slices.ContainsFunc(rows, func(r []idLogit) bool { return len(r) != 5 }) {
		t.Fatalf("%s: %d prompt rows, %d steps, %d greedy tokens; want 1, 8 and 9, top 5 each", name, len(g.prompt), len(g.gen), len(g.greedy))
	}
	return rows
}

// checkGreedySteps runs prompt on m through an fp32 cache, then feeds the
// argmax back one token at a time, a step per row of top: every logit of
// top[step] within tol of llama.cpp's, and the argmax of every step equal
// to greedy.
func checkGreedySteps(t *testing.T, m *runtime.Model, prompt []int, top [][]idLogit, greedy []int, tol float64) {
	t.Helper()
	checkGreedyStepsOn(t, newRunner(t, m), prompt, top, greedy, tol)
}

// checkGreedyStepsOn is checkGreedySteps on the runner r.
func checkGreedyStepsOn(t *testing.T, r *runtime.Runner, prompt []int, top [][]idLogit, greedy []int, tol float64) {
	t.Helper()
	c := newCache(t, r, "fp32", 8)
	_ = c.AddSeq(0)
	toks := prompt
	var got []int
	var worst float64
	for step := range top {
		lg := forward(t, r, c, runtime.Entry{Seq: 0, Tokens: toks, Logits: runtime.LastLogits})[0]
		ids := make([]int, len(lg))
		for i := range ids {
			ids[i] = i
		}
		sort.SliceStable(ids, func(a, b int) bool { return lg[ids[a]] > lg[ids[b]] })
		for j, want := range top[step] {
			d := math.Abs(float64(lg[want.id]) - want.logit)
			worst = math.Max(worst, d)
			if d > tol {
				t.Errorf("step %d: logit of token %d (llama.cpp's #%d) = %.6f, llama.cpp %.6f", step, want.id, j+1, lg[want.id], want.logit)
			}
		}
		got = append(got, ids[0])
		toks = []int{ids[0]}
	}
	t.Logf("largest |kvq − llama.cpp| of a top-5 logit: %.2g", worst)
	if !slices.Equal(got, greedy) {
		t.Errorf("greedy tokens %v, llama.cpp %v", got, greedy)
	}
}
