package root

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestCountLimits: a count flag past what it sizes is a usage error naming
// the flag and its limit, before any model is loaded or work is drawn
// (each of these used to grow memory until killed).
func TestCountLimits(t *testing.T) {
	huge := "1000000000000000000"
	evalArgs := []string{"eval", "--tasks", "copy", "--no-text", "--no-speed"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"eval -n", append(evalArgs, "-n", huge), "-n " + huge + ": at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval -n one over", append(evalArgs, "-n", strconv.Itoa(eval.MaxExamples+1)), "at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval --grid-depths", append(evalArgs, "--grid-depths", "1000000000"), "--grid-depths 1000000000: at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval --grid-n", append(evalArgs, "--grid-n", "1000000000"), "--grid-n 1000000000: at most " + strconv.Itoa(eval.MaxExamples)},
		{"eval grid product", append(evalArgs, "--grid-n", "1000", "--grid-depths", "1000"), "--grid-depths 1000 × --grid-n 1000: at most"},
		{"formats --head-dim huge", []string{"formats", "--head-dim", huge}, "--head-dim " + huge + ": must be 1 to " + strconv.Itoa(quant.MaxHeadDim)},
		{"formats --head-dim 20000", []string{"formats", "--head-dim", "20000"}, "--head-dim 20000: must be 1 to " + strconv.Itoa(quant.MaxHeadDim)},
		{"bench --num-prompts huge", []string{"bench", "--num-prompts", huge}, "--num-prompts " + huge + ": at most " + strconv.Itoa(bench.MaxPrompts)},
		{"bench --num-prompts 1e9", []string{"bench", "--num-prompts", "1000000000"}, "--num-prompts 1000000000: at most " + strconv.Itoa(bench.MaxPrompts)},
		{"bench --warmups", []string{"bench", "--warmups", huge}, "--warmups " + huge + ": at most " + strconv.Itoa(bench.MaxPrompts)},
		{"bench --depth-reps", []string{"bench", "--depth-reps", huge}, "--depth-reps " + huge + ": at most " + strconv.Itoa(bench.MaxPrompts)},
		{"bench --budget-seqs", []string{"bench", "--budget-seqs", huge, "--num-prompts", "1", "--depths", "none"}, "--budget-seqs " + huge + ": a KV budget past 2^63 bytes"},
		{"calibrate --samples", []string{"calibrate", "--samples", huge}, "--samples " + huge + ": at most " + strconv.Itoa(calibrate.MaxSamples(512))},
		{"calibrate --samples at --seq-len", []string{"calibrate", "--samples", "1000000", "--seq-len", "2048"}, "at most " + strconv.Itoa(calibrate.MaxSamples(2048)) + " sequences of --seq-len 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
			}
			if out != "" {
				t.Errorf("kvq %s printed %q before refusing", strings.Join(tc.args, " "), out)
			}
		})
	}
}

// TestSignalsWhileBuilding: at the largest counts the flags allow, the
// loops that draw examples, calibration samples and bench requests and
// the formats' rotations stop at SIGINT and SIGTERM within a second (they
// ran deaf to both until killed).
func TestSignalsWhileBuilding(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("no SIGINT to send to a child process on Windows")
	}
	if testing.Short() {
		t.Skip("runs long commands")
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"eval -n max", []string{"eval", "--tasks", "copy", "--no-text", "--no-speed", "-n", strconv.Itoa(eval.MaxExamples)}},
		{"formats --head-dim near max", []string{"formats", "--head-dim", "1000"}}, // not a power of two: dense rotations
		{"bench --num-prompts max", []string{"bench", "--num-prompts", strconv.Itoa(bench.MaxPrompts), "--dataset", "builtin", "--depths", "none", "--cache", "fp16"}},
		{"calibrate --samples max", []string{"calibrate", "--samples", strconv.Itoa(calibrate.MaxSamples(512)), "--compare", "none", "--out", t.TempDir()}},
	} {
		args, err := json.Marshal(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(tc.name+"/"+sig.String(), func(t *testing.T) {
				var stops []time.Duration
				for range 2 {
					stop := signalDuringPrefill(t, sig, string(args))
					if stop < time.Second {
						return
					}
					stops = append(stops, stop)
				}
				t.Errorf("kvq %s stopped %v after %v (twice over a second)", strings.Join(tc.args, " "), stops, sig)
			})
		}
	}
}

// TestMessagesRoundTwo: each message names what the user got wrong, on one
// line, with the exit code of a usage error.
func TestMessagesRoundTwo(t *testing.T) {
	dir := t.TempDir()
	twoBytes := filepath.Join(dir, "two.gguf")
	if err := os.WriteFile(twoBytes, []byte("GG"), 0o644); err != nil {
		t.Fatal(err)
	}
	hd0 := filepath.Join(dir, "hd0")
	if err := os.Mkdir(hd0, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,"head_dim":0,"max_position_embeddings":8192,"vocab_size":32000}`
	if err := os.WriteFile(filepath.Join(hd0, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string // the whole of stderr
		want   string // or a part of it
	}{
		{"unknown command", []string{"evl"}, "kvq: unknown command \"evl\" for \"kvq\"; did you mean eval?\nRun 'kvq --help' for usage.\n", ""},
		{"unknown help topic", []string{"help", "nope"}, "kvq: unknown help topic \"nope\"\nRun 'kvq help --help' for usage.\n", ""},
		{"unknown help subtopic", []string{"help", "probe", "evl"}, "", `unknown help topic "probe evl"; did you mean eval?`},
		{"2-byte gguf", []string{"estimate", "--model", twoBytes, "--gpu", "h100"}, "", "gguf: truncated"},
		{"head_dim 0", []string{"estimate", "--model", hd0, "--gpu", "h100"}, "", "bad model config: head_dim is 0"},
		{"serve --max-body 0", []string{"serve", "--max-body", "0"}, "", `--max-body "0": not a size: add a unit`},
		{"estimate --gpu-mem 80", []string{"estimate", "--model", "llama-3.1-8b", "--gpu-mem", "80"}, "", `--gpu-mem "80": not a size: add a unit`},
		{"bench --range-ratio", []string{"bench", "--range-ratio", "1"}, "", "--range-ratio 1: must be in [0, 1)"},
		{"bench --burstiness", []string{"bench", "--burstiness", "0"}, "", "--burstiness 0: must be > 0"},
		{"bench --slo-percentile", []string{"bench", "--slo-percentile", "101"}, "", "--slo-percentile 101: must be in (0, 100]"},
		{"bench --warmups", []string{"bench", "--warmups", "-1"}, "", "--warmups -1: must be ≥ 0"},
		{"spec as typed", []string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--cache", "INT4,L99=FP16"}, "", `bad cache spec "INT4,L99=FP16"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != 2 {
				t.Errorf("kvq %s: exit %d, want 2 (stderr %q)", strings.Join(tc.args, " "), code, stderr)
			}
			if tc.stderr != "" && stderr != tc.stderr || !strings.Contains(stderr, tc.want) {
				t.Errorf("kvq %s: stderr %q, want %q", strings.Join(tc.args, " "), stderr, tc.stderr+tc.want)
			}
			if strings.Contains(stderr, "estimate: bad size") || strings.Contains(stderr, "not a JSON object") {
				t.Errorf("kvq %s: stderr %q names the wrong thing", strings.Join(tc.args, " "), stderr)
			}
		})
	}
}

// zeroContext writes a tiny GGUF whose llama.context_length is 0.
func zeroContext(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ctx0.gguf")
	const mark = 12345
	if err := modeltest.WriteGGUF(p, modeltest.Spec{Context: mark, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("llama.context_length")
	val := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 4), mark) // type uint32, value
	i := bytes.Index(b, append(key, val...))
	if i < 0 {
		t.Fatal("no llama.context_length in the GGUF")
	}
	binary.LittleEndian.PutUint32(b[i+len(key)+4:], 0)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSilentAccepts: inputs that were accepted and did something the user
// did not ask for are usage errors naming the file or flag.
func TestSilentAccepts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	emptyGates := write("empty.yaml", "gates: []\n")
	nanGates := write("nan.yaml", "- metric: kld\n  max: .nan\n")
	evalArgs := []string{"eval", "--tasks", "copy", "-n", "1", "--no-text", "--no-speed"}
	hugeTokens := write("huge.jsonl", `{"prompt": "the", "reference": "cat", "metric": "exact", "max_tokens": 1000000000000}`+"\n")
	pastContext := write("past.jsonl", `{"prompt": "the", "reference": "cat", "metric": "exact", "max_tokens": 600}`+"\n")
	tiny := tinyHF(t, 512)
	binary := write("weights.txt", "GGUF\x03\x00\x00\x00binary")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"gguf context_length 0", []string{"generate", "--model", zeroContext(t), "--prompt", "the", "-n", "4"}, "llama.context_length is 0"},
		{"empty gates", append(evalArgs, "--gates", emptyGates), "gates file " + emptyGates + " has no gates"},
		{"NaN gate", append(evalArgs, "--gates", nanGates), "gates file " + nanGates + ", gate 1: a value is not a finite number"},
		{"negative flips", append(evalArgs, "--max-flips", "copy=-1"), "--max-flips: eval: bad options: gate flips: a bound of -1 flips"},
		{"task max_tokens 1e12", []string{"eval", "--model", tiny, "--tasks", hugeTokens, "--no-text", "--no-speed"}, hugeTokens + ":1: max_tokens 1000000000000 (valid: 0"},
		{"task max_tokens past the context", []string{"eval", "--model", tiny, "--tasks", pastContext, "--no-text", "--no-speed"}, "max_tokens 600 plus its"},
		{"plan --input-len", []string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1000000000000000000"}, "--input-len 1000000000000000000 plus --output-len 0: more than the model's maximum of 131072 tokens"},
		{"plan --tp", []string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "64"}, "--tp 64: more than the model's 32 attention heads"},
		{"estimate --tp", []string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1000000000000000000"}, "--tp 1000000000000000000: more than the model's 32 attention heads"},
		{"estimate --gpus", []string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "64"}, "--gpus 64: a tensor-parallel size of 64, more than the model's 32 attention heads"},
		{"estimate --pp", []string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--pp", "33"}, "--pp 33: more than the model's 32 layers"},
		{"calibrate --data binary", []string{"calibrate", "--data", binary, "--compare", "none", "--out", filepath.Join(dir, "cal")}, binary + ": not a text file (a NUL byte at offset 5)"},
		{"k twice in one spec", []string{"generate", "--cache", "k=int4,k=int8", "--prompt", "the"}, `bad cache spec "k=int4,k=int8": k= given twice`},
		{"v twice in a list's spec", []string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--cache", "fp16,int4,v=int8,v=q4_0"}, `bad cache spec "int4,v=int8,v=q4_0": v= given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
			}
			if out != "" {
				t.Errorf("kvq %s printed %q", strings.Join(tc.args, " "), out)
			}
		})
	}
}

// TestCalibrateOutIgnored: kvq calibrate's default --out, written in the
// current directory, is ignored by the repository's .gitignore, and the
// help says where it goes.
func TestCalibrateOutIgnored(t *testing.T) {
	cal, _, err := NewCmd(testFactory()).Find([]string{"calibrate"})
	if err != nil {
		t.Fatal(err)
	}
	out := cal.Flags().Lookup("out").DefValue
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := false
	for _, l := range strings.Split(string(b), "\n") {
		ignored = ignored || strings.Trim(strings.TrimSpace(l), "/") == out
	}
	if !ignored {
		t.Errorf(".gitignore does not ignore kvq calibrate's default --out %q", out)
	}
	if !strings.Contains(cal.Long, "./"+out) {
		t.Errorf("kvq calibrate's help does not say its default --out is ./%s", out)
	}
}

// TestCalibrateShortDataWarns: --data giving fewer samples than --samples
// (a 3-token file) calibrates with a warning saying how little data there
// was (it said nothing).
func TestCalibrateShortDataWarns(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.txt")
	if err := os.WriteFile(short, []byte("a b"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "calibrate", "--data", short, "--compare", "none", "--out", filepath.Join(dir, "cal"), "-o", "json")
	if code != 0 || !strings.Contains(stderr, "kvq: warning: --data gives 1 sample(s)") || !strings.Contains(stderr, "fewer than --samples 32") {
		t.Errorf("kvq calibrate --data (3 tokens): exit %d, stderr %q; want exit 0 and a warning", code, stderr)
	}
}

// TestSpecBlockWarning: a group longer than the model's head size is cut to
// the row, and kvq says so (stories260K's head size is 8).
func TestSpecBlockWarning(t *testing.T) {
	_, _, gguf := testutil.Stories260K(t)
	for _, c := range []struct {
		cache string
		warn  bool
	}{{"int4:g32", true}, {"int4:g8", false}} {
		code, _, stderr := run(t, "generate", "--model", gguf, "--cache", c.cache, "--prompt", "Once", "--max-tokens", "2")
		got := strings.Contains(stderr, "warning: --cache "+c.cache+": groups of 32 values, but the model's head size is 8")
		if code != 0 || got != c.warn {
			t.Errorf("generate --cache %s: exit %d, warned %v (want %v): %q", c.cache, code, got, c.warn, stderr)
		}
	}
}
