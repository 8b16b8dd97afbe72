package train_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq-train/internal/train"
	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// probeRuns are the runs TestProbeRun knows: DefaultConfig and the
// experiments behind its choices (each pins every setting it relies on,
// so that later changes to DefaultConfig do not change them).
var probeRuns = map[string]func() train.Config{
	"default": train.DefaultConfig,
	// The 5-minute learning check: 120 steps of 8K tokens, 1K context.
	"short": func() train.Config {
		return probe(1024, 8192, 2e-3, 120, 10, 60, [6]float64{})
	},
	// 30 minutes: 380 steps of 16K tokens up to 2K context (6.2M tokens).
	"medium": func() train.Config {
		return probe(2048, 16384, 2e-3, 380, 25, 190, [6]float64{})
	},
	// Many small steps at short context (3.3M tokens).
	"small-batch": func() train.Config {
		return probe(512, 4096, 3e-3, 800, 30, 200, [6]float64{})
	},
	// The same with a copy-heavy task mix (4.1M tokens).
	"retrieval-mix": func() train.Config {
		return probe(512, 4096, 3e-3, 1000, 30, 200, [6]float64{1, 2, 2, 3, 1, 1})
	},
	// Copying alone, 3–5 words (1.6M tokens; KVQ_PROBE_STEPS=1200 for 4.9M).
	"copy-only": func() train.Config {
		return probe(257, 4096, 3e-3, 400, 30, 0, [6]float64{3: 1})
	},
	// copy-only with 4× the optimizer steps on 1/4 of the tokens each
	// (same data volume): do more updates form the copying heads sooner?
	"copy-only-small-steps": func() train.Config {
		return probe(257, 1024, 3e-3, 1600, 120, 0, [6]float64{3: 1})
	},
	// copy-only at LR 1e-2, and with a 3× larger init: does leaving the
	// uniform-attention plateau sooner speed copying up?
	"copy-only-lr1e-2": func() train.Config {
		return probe(257, 4096, 1e-2, 400, 30, 0, [6]float64{3: 1})
	},
	"copy-only-init0.06": func() train.Config {
		c := probe(257, 4096, 3e-3, 400, 30, 0, [6]float64{3: 1})
		c.InitStd = 0.06
		return c
	},
	// Copying alone at 1K context: copies of 3–40 words, as in the default
	// mix (4.9M tokens). Separates "long copies are not learned" from "the
	// mix dilutes copying".
	"copy-long": func() train.Config {
		return probe(1024, 4096, 3e-3, 1200, 30, 0, [6]float64{3: 1})
	},
}

func probe(ctxLen, tokens int, lr float64, steps, warmup, curriculum int, mix [6]float64) train.Config {
	c := train.DefaultConfig()
	c.Context, c.TokensPerStep, c.LR = ctxLen, tokens, lr
	c.Steps, c.Warmup, c.CurriculumStart, c.CurriculumSteps = steps, warmup, 256, curriculum
	c.TaskMix, c.CheckpointEvery = mix, 50
	c.InitStd = 0.02 // what these experiments ran with, before DefaultConfig moved to 0.06
	return c
}

// TestProbeRun is a real training run followed by a greedy-decoding
// evaluation on eval-split examples. It is skipped unless KVQ_PROBE names
// one of probeRuns ("short" is the ~5-minute learning check, "default" is
// DefaultConfig). KVQ_PROBE_STEPS overrides the number of steps (the
// warm-up and curriculum scale with it); KVQ_PROBE_DIR keeps the training
// directory (so that an interrupted run resumes); KVQ_PROBE_EVAL sets the
// examples per task (default 20). Prompts are kept within 1K tokens, the
// context of the acceptance targets, and within the training context.
// KVQ_PROBE_EVAL_ONLY=dir evaluates an exported model directory instead
// (KVQ_PROBE_EVAL_CONTEXT: its prompt budget, default 512). Run it with
// -timeout 0.
func TestProbeRun(t *testing.T) {
	n := 20
	if s := os.Getenv("KVQ_PROBE_EVAL"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if d := os.Getenv("KVQ_PROBE_EVAL_ONLY"); d != "" {
		ctxLen, _ := strconv.Atoi(os.Getenv("KVQ_PROBE_EVAL_CONTEXT"))
		evalProbe(t, d, n, cmp.Or(ctxLen, 512))
		return
	}
	which := os.Getenv("KVQ_PROBE")
	if which == "" {
		t.Skip("set KVQ_PROBE=short (or another probeRuns name) to train and evaluate a probe model")
	}
	mk, ok := probeRuns[which]
	if !ok {
		t.Fatalf("KVQ_PROBE=%q is not one of the probe runs", which)
	}
	cfg := mk()
	if s := os.Getenv("KVQ_PROBE_STEPS"); s != "" {
		steps, err := strconv.Atoi(s)
		if err != nil || steps <= 0 {
			t.Fatalf("KVQ_PROBE_STEPS=%q", s)
		}
		cfg.Warmup = max(1, cfg.Warmup*steps/cfg.Steps)
		cfg.CurriculumSteps = cfg.CurriculumSteps * steps / cfg.Steps
		cfg.Steps = steps
	}
	dir := os.Getenv("KVQ_PROBE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	t0 := time.Now()
	err := train.Train(context.Background(), cfg, dir, func(s train.Step) {
		if s.Step%10 == 0 || s.Step == s.Steps || s.Step <= 3 {
			t.Logf("step %4d/%d  loss %.4f  |g| %.3f  lr %.2e  seq %4d  %5.0f tok/s  (%v)",
				s.Step, s.Steps, s.Loss, s.GradNorm, s.LR, s.SeqBytes, s.TokensPerSec, time.Since(t0).Round(time.Second))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	evalProbe(t, filepath.Join(dir, train.ModelDir), n, min(cfg.Context, 1024))
}

type taskScore struct {
	name          string
	ok, n         int
	tfOK, tfN     int // teacher-forced answer bytes predicted right
	valid         int // json: parses
	falseRefusals int // safety: benign requests refused
	benign        int
}

// evalProbe decodes greedily (fp16 KV cache) n eval examples per task
// whose prompts fit in maxTokens and reports exact-match accuracy.
func evalProbe(t *testing.T, dir string, n, maxTokens int) {
	ctx := context.Background()
	m, err := runtime.Load(ctx, dir, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	spec, err := quant.Formats().ParseSpec("fp16")
	if err != nil {
		t.Fatal(err)
	}
	layout, err := kvcache.NewLayout(m.Geometry(), spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	generate := func(e datasets.Example) string {
		ids := m.Tokenizer.Encode(e.Prompt, true)
		c, err := r.NewCache(layout, kvcache.Options{Blocks: layout.BlocksFor(len(ids) + len(e.Answer) + 16)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddSeq(0); err != nil {
			t.Fatal(err)
		}
		out, _, err := r.Generate(ctx, c, 0, ids, runtime.GenerateOptions{MaxTokens: len(e.Answer) + 8, StopAtEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		// The answer is one line, as kvq probe eval reads it.
		text := m.Tokenizer.Decode(out)
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[:i+1]
		}
		return text
	}
	g := datasets.New(datasets.Eval, 7)
	room := maxTokens - 210 // prompt scaffolding around the filler, and the answer
	examples := map[string]func(i int) datasets.Example{
		datasets.TaskPasskey: func(i int) datasets.Example {
			return g.Passkey(room*(1+i%4)/4, float64(i%5)/4)
		},
		datasets.TaskMultiKey: func(i int) datasets.Example { return g.MultiKey(2 + i%min(19, room/25)) },
		datasets.TaskCopy:     func(i int) datasets.Example { return g.Copy(3 + i%18) },
		datasets.TaskJSON:     func(int) datasets.Example { return g.JSONRecord() },
		datasets.TaskSafety: func(i int) datasets.Example {
			return g.Safety(i%2 == 0, 2+i%8, room*(i%4)/4)
		},
	}
	// teacherForced counts the answer bytes whose greedy prediction is
	// right when the model reads the true text: more sensitive than exact
	// match to a partially learned skill.
	teacherForced := func(e datasets.Example) (ok, n int) {
		ids := m.Tokenizer.Encode(e.Text(), true)
		c, err := r.NewCache(layout, kvcache.Options{Blocks: layout.BlocksFor(len(ids) + 16)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddSeq(0); err != nil {
			t.Fatal(err)
		}
		out, err := r.Forward(ctx, []runtime.Entry{{Cache: c, Seq: 0, Tokens: ids, Logits: runtime.AllLogits}})
		if err != nil {
			t.Fatal(err)
		}
		V := m.Vocab
		for i := len(e.Prompt); i < len(e.Text()); i++ {
			// ids[i] predicts text byte i (ids[0] is BOS).
			z := out[0][i*V : (i+1)*V]
			best := 0
			for j, v := range z {
				if v > z[best] {
					best = j
				}
			}
			if best == int(e.Text()[i]) {
				ok++
			}
			n++
		}
		return ok, n
	}
	var scores []*taskScore
	for _, task := range []string{datasets.TaskPasskey, datasets.TaskMultiKey, datasets.TaskCopy, datasets.TaskJSON, datasets.TaskSafety} {
		s := &taskScore{name: task}
		for i := 0; i < n; i++ {
			e := examples[task](i)
			got := generate(e)
			if got == e.Answer {
				s.ok++
			}
			ok, n := teacherForced(e)
			s.tfOK += ok
			s.tfN += n
			s.n++
			switch task {
			case datasets.TaskJSON:
				if json.Valid([]byte(strings.TrimSpace(got))) {
					s.valid++
				}
			case datasets.TaskSafety:
				if e.Meta["forbidden"] == "false" {
					s.benign++
					if strings.Contains(got, datasets.RefusalText) {
						s.falseRefusals++
					}
				}
			}
			if i < 2 {
				t.Logf("%s example %d: want %q, got %q", task, i, e.Answer, got)
			}
		}
		scores = append(scores, s)
	}
	for _, s := range scores {
		line := fmt.Sprintf("%-8s exact %2d/%d (%3.0f%%)  teacher-forced answer bytes %3.0f%%", s.name, s.ok, s.n,
			100*float64(s.ok)/float64(s.n), 100*float64(s.tfOK)/float64(s.tfN))
		switch s.name {
		case datasets.TaskJSON:
			line += fmt.Sprintf("  valid %d/%d", s.valid, s.n)
		case datasets.TaskSafety:
			line += fmt.Sprintf("  false refusals %d/%d", s.falseRefusals, s.benign)
		}
		t.Log(line)
	}
}
