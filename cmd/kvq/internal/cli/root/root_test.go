package root

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/datasets/models"
	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, Version: "test"}
	code = Run(context.Background(), f, args)
	return code, out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string // substring of stderr
	}{
		{"help", []string{"--help"}, 0, ""},
		{"version", []string{"version"}, 0, ""},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"unknown flag", []string{"generate", "--bogus"}, 2, "unknown flag"},
		{"bad temperature", []string{"generate", "--model", "x", "--temperature", "-1"}, 2, "--temperature"},
		{"bad top-p", []string{"generate", "--model", "x", "--top-p", "0"}, 2, "--top-p"},
		{"bad cache", []string{"generate", "--model", "x", "--cache", "int3"}, 2, `unknown format "int3"`},
		{"missing model file", []string{"generate", "--model", "/nonexistent/m.gguf"}, 2, "/nonexistent/m.gguf"},
		{"bad int flag", []string{"generate", "--model", "x", "--max-tokens", "lots"}, 2, "invalid argument"},
		{"calibrate bad strategy", []string{"calibrate", "--strategy", "magic"}, 2, `unknown strategy "magic"`},
		{"calibrate bad observer", []string{"calibrate", "--compare", "dataset:ema"}, 2, `"ema"`},
		{"calibrate bad granularity", []string{"calibrate", "--granularity", "channel"}, 2, "--granularity"},
		{"calibrate bad dtype", []string{"calibrate", "--dtype", "int8"}, 2, "--dtype"},
		{"calibrate best without compare", []string{"calibrate", "--strategy", "best", "--compare", "none"}, 2, "--strategy best needs --compare"},
		{"calibrate missing data", []string{"calibrate", "--data", "/nonexistent/c.jsonl"}, 2, "/nonexistent/c.jsonl"},
		{"calibrate bad codebook", []string{"calibrate", "--codebook", "int4"}, 2, "--codebook"},
		{"calibrate stats bad percentile", []string{"calibrate", "stats", "--percentiles", "101"}, 2, "--percentiles"},
		{"calibrate audit missing scales", []string{"calibrate", "audit", "--scales", "/nonexistent/s.json"}, 2, "/nonexistent/s.json"},
		{"eval unknown suite", []string{"eval", "--tasks", "copy,nope"}, 2, "nope"},
		{"eval missing tasks file", []string{"eval", "--tasks", "/nonexistent/t.jsonl"}, 2, "/nonexistent/t.jsonl"},
		{"eval bad protocol", []string{"eval", "--protocol", "hf"}, 2, "--protocol"},
		{"eval bad k-order", []string{"eval", "--k-order", "hf"}, 2, "--k-order"},
		{"eval exact with llama.cpp", []string{"eval", "--prefill", "exact", "--protocol", "llama.cpp"}, 2, "--prefill exact"},
		{"eval bad gate", []string{"eval", "--max-drop", "copy"}, 2, "--max-drop"},
		{"eval force without out", []string{"eval", "--force"}, 2, "--force"},
		{"eval missing text", []string{"eval", "--text", "/nonexistent/wiki.txt"}, 2, "/nonexistent/wiki.txt"},
		{"bench bad cache", []string{"bench", "--cache", "fp16,int3"}, 2, "int3"},
		{"bench bad dataset", []string{"bench", "--dataset", "sonnet"}, 2, "--dataset"},
		{"bench file without path", []string{"bench", "--dataset", "file"}, 2, "--dataset-path"},
		{"bench two sweeps", []string{"bench", "--request-rate", "1,2", "--max-concurrency", "1,2"}, 2, "sweep one"},
		{"bench bad goodput", []string{"bench", "--goodput", "ttft=5"}, 2, "--goodput"},
		{"bench bad budget", []string{"bench", "--kv-budget", "lots"}, 2, "--kv-budget"},
		{"bench bad endpoint", []string{"bench", "--endpoint", "vllm:8000"}, 2, "--endpoint"},
		{"plan bad engine", []string{"plan", "--engine", "tgi"}, 2, "--engine"},
		{"plan missing trace", []string{"plan", "--trace", "/nonexistent/t.jsonl"}, 2, "/nonexistent/t.jsonl"},
		{"plan bad gpu", []string{"plan", "--gpu", "h1000"}, 2, "--gpu"},
		{"canary without baseline", []string{"canary", "watch", "--candidate", "http://b"}, 2, "baseline"},
		{"canary bad gate", []string{"canary", "watch", "--baseline", "http://a", "--candidate", "http://b", "--gate", "ttft=2"}, 2, "ttft"},
		{"canary missing policy", []string{"canary", "watch", "--baseline", "http://a", "--candidate", "http://b", "--policy", "/nonexistent/p.yaml"}, 2, "/nonexistent/p.yaml"},
		{"canary missing tasks", []string{"canary", "watch", "--baseline", "http://a", "--candidate", "http://b", "--tasks", "/nonexistent/t.jsonl"}, 2, "/nonexistent/t.jsonl"},
		{"canary unreachable", []string{"canary", "watch", "--baseline", "http://127.0.0.1:1", "--candidate", "http://127.0.0.1:1"}, 1, "scrape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("kvq %v exit code = %d, want %d (stderr %q)", tc.args, code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.err) {
				t.Errorf("kvq %v stderr = %q, want it to mention %q", tc.args, stderr, tc.err)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, stderr := run(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "generate") && !strings.Contains(out, "kvq") {
			t.Errorf("completion %s: code %d, %d bytes, stderr %q", shell, code, len(out), stderr)
		}
	}
	// Dynamic completion of --cache values.
	code, out, _ := run(t, "__complete", "generate", "--cache", "")
	if code != 0 || !strings.Contains(out, "fp16") || !strings.Contains(out, "bf16") {
		t.Errorf("__complete generate --cache: code %d, out %q", code, out)
	}
}

func TestGenerateStories260K(t *testing.T) {
	bin, _, gguf := testutil.Stories260K(t)
	for _, model := range []string{gguf, bin} {
		t.Run(filepath.Base(model), func(t *testing.T) {
			code, out, stderr := run(t, "generate", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "20")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if want := ", there was a little girl named Lily. She loved to play outsid"; !strings.HasPrefix(out, want) {
				t.Errorf("stdout = %q, want prefix %q", out, want)
			}
			for _, field := range []string{"prompt tokens 5", "generated 20", "prefill", "decode", "tok/s", "KV 20480 bytes allocated (fp16, 2 blocks of 16 tokens)"} {
				if !strings.Contains(stderr, field) {
					t.Errorf("stats line %q lacks %q", stderr, field)
				}
			}
		})
	}
}

func TestHFDirectoryCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny-qwen3")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "qwen3", DType: "BF16", Seed: 3}, modeltest.HFOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "inspect", "--model", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("inspect JSON: %v\n%s", err, out)
	}
	for k, want := range map[string]any{"architecture": "qwen3", "format": "safetensors", "layers": 2.0, "kv_heads": 2.0, "head_dim": 16.0, "tokenizer": "gpt2", "chat_template": true} {
		if info[k] != want {
			t.Errorf("inspect %s = %v, want %v", k, info[k], want)
		}
	}
	if dt, _ := info["dtypes"].([]any); len(dt) != 1 || dt[0] != "BF16" {
		t.Errorf("dtypes = %v, want [BF16]", info["dtypes"])
	}
	code, out, stderr = run(t, "generate", "--model", dir, "--prompt", "the", "--max-tokens", "5", "--chat", "--system", "be brief")
	if code != 0 || !strings.Contains(stderr, "prompt tokens") {
		t.Fatalf("generate --chat: exit %d, out %q, stderr %q", code, out, stderr)
	}
	code, _, stderr = run(t, "generate", "--model", dir, "--prompt", "the", "--system", "x")
	if code != 2 || !strings.Contains(stderr, "--system needs --chat") {
		t.Errorf("--system without --chat: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, "inspect", "--model", filepath.Join(dir, "nope"))
	if code != 2 || !strings.Contains(stderr, "nope") {
		t.Errorf("inspect missing model: exit %d, stderr %q", code, stderr)
	}
}

// tinyEval is the arguments of a small kvq eval run on a tiny random model.
func tinyEval(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 4, Context: 2048}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	return []string{"--model", dir, "-n", "2", "--contexts", "256", "--grid-contexts", "128,256", "--grid-depths", "2", "--grid-n", "1",
		"--ctx", "128", "--chunks", "2", "--no-speed", "--cache", "fp32,int2"}
}

// TestEval runs kvq eval (and its alias kvq probe eval) as a user would:
// the table, JSON with the documented schema, log samples that agree with
// the table, a gate that fails on purpose (exit 3, named on stderr, a JUnit
// failure), and unwritable outputs refused before any work.
func TestEval(t *testing.T) {
	args := tinyEval(t)
	code, out, stderr := run(t, append([]string{"eval"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Caches", "Distribution against fp32", "passkey 256", "long-context passkey", "int2", "Recommendation"} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}
	logPath := filepath.Join(t.TempDir(), "samples.jsonl")
	code, out, stderr = run(t, append([]string{"probe", "eval", "--output", "json", "--log-samples", logPath}, args...)...)
	if code != 0 {
		t.Fatalf("probe eval --output json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Schema string `json:"schema"`
		Caches []struct {
			Spec          string  `json:"spec"`
			BytesPerToken float64 `json:"bytes_per_token"`
		} `json:"caches"`
		Text struct {
			Caches []struct {
				Cache string `json:"cache"`
				KLD   struct {
					Mean float64 `json:"mean"`
				} `json:"kld"`
			} `json:"caches"`
		} `json:"text"`
		Suites []struct {
			Suite  string `json:"suite"`
			Caches []struct {
				Cache string  `json:"cache"`
				Score float64 `json:"score"`
			} `json:"caches"`
		} `json:"suites"`
		Verdicts []struct {
			Cache string `json:"cache"`
			Pass  bool   `json:"pass"`
		} `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if rep.Schema != "kvq.eval/v1" || len(rep.Caches) != 2 || rep.Caches[1].BytesPerToken >= rep.Caches[0].BytesPerToken ||
		len(rep.Text.Caches) != 2 || !(rep.Text.Caches[1].KLD.Mean > 0) || len(rep.Suites) < 9 || len(rep.Verdicts) != 1 {
		t.Errorf("report %+v", rep)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	pass := map[string]float64{}
	n := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var s struct {
			Suite, Cache, Metric string
			Pass                 bool
		}
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("sample line %q: %v", l, err)
		}
		key := s.Suite + "/" + s.Metric + "/" + s.Cache
		n[key]++
		if s.Pass {
			pass[key]++
		}
	}
	for _, row := range rep.Suites {
		for _, c := range row.Caches {
			var hits, total float64
			for k, v := range n {
				if strings.HasSuffix(k, "/"+c.Cache) && (strings.HasPrefix(k, row.Suite+"/") || row.Suite == "json exact" && strings.HasPrefix(k, "json/json-exact/") || row.Suite == "json valid" && strings.HasPrefix(k, "json/json-valid/")) {
					hits, total = hits+pass[k], total+v
				}
			}
			if total > 0 && 100*hits/total != c.Score && !strings.HasPrefix(row.Suite, "citation") && row.Suite != "tool call" {
				t.Errorf("%s %s: samples give %.0f%%, report %.0f%%", row.Suite, c.Cache, 100*hits/total, c.Score)
			}
		}
	}
	// A gate that fails on purpose.
	junit := filepath.Join(t.TempDir(), "gates.xml")
	code, _, stderr = run(t, append([]string{"eval", "--max-kld", "0.000001", "--junit", junit, "--tasks", "copy"}, args...)...)
	if code != 3 || !strings.Contains(stderr, "gate failed: kld <= 1e-06 @ int2") {
		t.Errorf("failing gate: exit %d, stderr %q", code, stderr)
	}
	x, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(x), "<failure") || !strings.Contains(string(x), `failures="1"`) {
		t.Errorf("junit: %v\n%s", err, x)
	}
	// The HTML report and the plots.
	html, plots := filepath.Join(t.TempDir(), "r.html"), filepath.Join(t.TempDir(), "plots")
	if code, _, stderr = run(t, append([]string{"eval", "--report", html, "--plot", plots}, args...)...); code != 0 {
		t.Fatalf("--report: exit %d: %s", code, stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "<svg") || !strings.Contains(string(page), "Passkey accuracy, int2 minus fp32") || strings.Contains(string(page), "http:") || strings.Contains(string(page), "https:") {
		t.Errorf("report: %v, %d bytes, want inline SVG heatmaps and no links", err, len(page))
	}
	for _, f := range []string{"long-context-fp32.svg", "long-context-diff-int2.png", "kld-by-position.svg", "quality-vs-bits.png", "kld-vs-bits.svg"} {
		if st, err := os.Stat(filepath.Join(plots, f)); err != nil || st.Size() == 0 {
			t.Errorf("--plot: %s: %v", f, err)
		}
	}
	for _, bad := range [][]string{{"--junit", filepath.Join(t.TempDir(), "no", "dir", "g.xml")}, {"--log-samples", filepath.Join(t.TempDir(), "no", "dir", "s.jsonl")}, {"--report", filepath.Join(t.TempDir(), "no", "dir", "r.html")}} {
		code, _, stderr = run(t, append(append([]string{"eval"}, bad...), args...)...)
		if code != 2 || !strings.Contains(stderr, bad[0]) {
			t.Errorf("unwritable %s: exit %d, %q", bad[0], code, stderr)
		}
	}
}

// TestEvalTasksFile: a user's tasks file runs with its metrics; a
// malformed line is an error naming the file and line, and nothing runs.
func TestEvalTasksFile(t *testing.T) {
	args := tinyEval(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "replay.jsonl")
	lines := []string{
		`{"id": "a", "prompt": "Say hi: ", "reference": "hi", "metric": "contains", "max_tokens": 4}`,
		`{"prompt": "Data: ", "reference": {"a": 1}, "metric": ["json-exact", "json-valid"], "max_tokens": 4}`,
		`{"prompt": "Call: ", "reference": {"name": "f", "arguments": {}}, "metric": "tool-call", "max_tokens": 4, "suite": "tools"}`,
	}
	if err := os.WriteFile(good, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, append([]string{"eval", "--tasks", good, "--no-text"}, args...)...)
	if code != 0 || !strings.Contains(out, "replay") || !strings.Contains(out, "tools") {
		t.Fatalf("tasks file: exit %d, %s\n%s", code, stderr, out)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(lines[0]+"\n"+`{"prompt": "x", "metric": "exactly"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, append([]string{"eval", "--tasks", bad}, args...)...)
	if code != 2 || !strings.Contains(stderr, bad+":2") || !strings.Contains(stderr, "exactly") {
		t.Errorf("malformed line: exit %d, %q", code, stderr)
	}
}

// TestEvalResume interrupts nothing but runs twice into one --out: the
// second run says it resumes and prints the same report; another
// configuration there is refused unless --force.
func TestEvalResume(t *testing.T) {
	args := append(tinyEval(t), "--tasks", "copy,json")
	out := filepath.Join(t.TempDir(), "run")
	code, first, stderr := run(t, append([]string{"eval", "--out", out, "--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, second, stderr := run(t, append([]string{"eval", "--out", out, "--output", "json"}, args...)...)
	if code != 0 || !strings.Contains(stderr, "resuming from") {
		t.Fatalf("second run: exit %d, %q", code, stderr)
	}
	if first != second {
		t.Errorf("resumed report differs")
	}
	code, _, stderr = run(t, append(append([]string{"eval", "--out", out}, args...), "-n", "3")...)
	if code != 2 || !strings.Contains(stderr, "another configuration") {
		t.Errorf("another configuration: exit %d, %q", code, stderr)
	}
	if code, _, stderr = run(t, append(append([]string{"eval", "--out", out, "--force"}, args...), "-n", "3")...); code != 0 {
		t.Errorf("--force: exit %d, %q", code, stderr)
	}
}

// TestDefaultModel: commands that take --model use the built-in probe model
// when it is omitted (and say so), or explain that the build has none.
func TestDefaultModel(t *testing.T) {
	_, ok := models.ProbeModel()
	for _, args := range [][]string{{"generate", "--prompt", "The", "--max-tokens", "3"}, {"inspect"}} {
		code, _, stderr := run(t, args...)
		if ok && (code != 0 || !strings.Contains(stderr, "built-in kvq-probe")) {
			t.Errorf("kvq %v with the built-in model: exit %d, stderr %q", args, code, stderr)
		}
		if !ok && (code != 2 || !strings.Contains(stderr, "no --model given")) {
			t.Errorf("kvq %v without a built-in model: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestCalibrate runs kvq calibrate as a user would on a tiny model: JSON
// output with every export written and loadable (kvq eval runs the kvq
// file), --out refused without --force, --write-checkpoint followed by a
// clean audit, a planted bad scales file failing the audit with exit 3, a
// malformed scales file naming itself, and Ctrl-C writing nothing.
func TestCalibrate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "BF16", Seed: 4, Context: 512}, modeltest.HFOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	out := filepath.Join(work, "scales")
	data := filepath.Join(work, "calib.jsonl")
	os.WriteFile(data, []byte(`{"text": "the quick brown fox jumps over the lazy dog, again and again and again"}
{"messages": [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi, how can I help?"}]}
`), 0o644)
	base := []string{"--model", dir, "--samples", "4", "--seq-len", "64", "--ctx", "64", "--chunks", "2"}
	args := append([]string{"calibrate", "--out", out, "--compare", "default,warmup,dataset:head,dataset:mse", "--strategy", "best",
		"--codebook", "kvquant4", "--stats", filepath.Join(work, "stats.json"), "--plot", filepath.Join(work, "plots"), "-o", "json"}, base...)
	code, stdout, stderr := run(t, args...)
	if code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
	var res struct {
		Schema, Strategy string
		Data             struct{ SHA256 string }
		Files            []string
		Compare          struct {
			Results []struct {
				Name string
				KLD  float64
			}
			Recommendation struct{ Best string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("JSON: %v\n%s", err, stdout)
	}
	if res.Schema != "kvq.calibrate/v1" || len(res.Compare.Results) != 4 || res.Strategy != res.Compare.Recommendation.Best || len(res.Data.SHA256) != 64 {
		t.Errorf("result: %+v", res)
	}
	for _, f := range res.Files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("listed file: %v", err)
		}
	}
	for _, want := range []string{"kv_scales.json", "kv_scales.safetensors", "kv_cache_scheme.json", "kv_cache_scales_sglang.json", "codebook-kvquant4.json"} {
		b, err := os.ReadFile(filepath.Join(out, want))
		if err != nil {
			t.Errorf("export %s: %v", want, err)
		} else if !bytes.Contains(b, []byte(res.Data.SHA256)) {
			t.Errorf("export %s does not carry the data's hash", want)
		}
	}
	for _, want := range []string{"absmax-by-layer.svg", "k-channel-absmax.png", "v-channel-absmax.svg"} {
		if _, err := os.Stat(filepath.Join(work, "plots", want)); err != nil {
			t.Errorf("plot %s: %v", want, err)
		}
	}
	// The exports run in kvq eval, alone, for K only and in one layer.
	kvqFile := filepath.Join(out, "kv_scales.json")
	code, _, stderr = run(t, "eval", "--model", dir, "--tasks", "none", "--no-speed", "--ctx", "64", "--chunks", "1",
		"--cache", "fp16,fp8:scales@"+kvqFile+",kvquant4:codebook@"+filepath.Join(out, "codebook-kvquant4.json")+
			",k=fp8:scales@"+kvqFile+",v=int8,fp16,L1=fp8:scales@"+kvqFile)
	if code != 0 {
		t.Errorf("eval with the exports: exit %d: %s", code, stderr)
	}
	// A second run would overwrite: refused before any work, unless --force.
	code, _, stderr = run(t, append([]string{"calibrate", "--out", out, "--compare", "none"}, base...)...)
	if code != 2 || !strings.Contains(stderr, "--force") {
		t.Errorf("overwrite without --force: exit %d, %q", code, stderr)
	}
	code, stdout, stderr = run(t, append([]string{"calibrate", "--out", out, "--force", "--compare", "none", "--data", data, "--strategy", "dataset:static_minmax", "--write-checkpoint"}, base...)...)
	if code != 0 || !strings.Contains(stdout, "LAYER") {
		t.Fatalf("--force --write-checkpoint: exit %d, %q", code, stderr)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if !strings.Contains(string(cfg), "kv_cache_scheme") {
		t.Errorf("config.json lacks the kv_cache_scheme: %s", cfg)
	}
	// Audited on the same data, static min-max scales clip nothing.
	code, stdout, stderr = run(t, append([]string{"calibrate", "audit", "-o", "json", "--data", data}, base...)...)
	if code != 0 {
		t.Fatalf("audit of calibrated scales: exit %d: %s\n%s", code, stderr, stdout)
	}
	var audit struct {
		Errors int
		Layers []struct {
			KFrom string `json:"k_from"`
		}
		Effect struct{ Results []struct{ Name string } }
	}
	if err := json.Unmarshal([]byte(stdout), &audit); err != nil {
		t.Fatal(err)
	}
	if audit.Errors != 0 || len(audit.Layers) != 2 || !strings.Contains(audit.Layers[0].KFrom, "kv_scales.safetensors") || len(audit.Effect.Results) != 3 {
		t.Errorf("audit: %+v", audit)
	}
	bad := filepath.Join(work, "bad.json")
	os.WriteFile(bad, []byte(`{"k_scale": {"0": 0, "1": 1e-6}, "v_scale": {"0": 0.01}}`), 0o644)
	code, stdout, stderr = run(t, append([]string{"calibrate", "audit", "--scales", bad}, base...)...)
	if code != 3 || !strings.Contains(stderr, "k_scale is 0") || !strings.Contains(stderr, "clips") || !strings.Contains(stdout, "cannot run") {
		t.Errorf("planted bad scales: exit %d\nstderr %s\nstdout %s", code, stderr, stdout)
	}
	os.WriteFile(bad, []byte(`{"k_scale": {"0": 1, "1": 1, "5": 1}}`), 0o644)
	code, _, stderr = run(t, append([]string{"calibrate", "audit", "--scales", bad, "--no-measure"}, base...)...)
	if code != 2 || !strings.Contains(stderr, "bad.json") || !strings.Contains(stderr, "layer 5") {
		t.Errorf("scales for another model: exit %d, %q", code, stderr)
	}
	// Ctrl-C before the end writes nothing.
	fresh := filepath.Join(work, "cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &o, ErrOut: &e}, Version: "test"}
	if code := Run(ctx, f, append([]string{"calibrate", "--out", fresh}, base...)); code != cmdutil.ExitCancelled {
		t.Errorf("cancelled: exit %d, %s", code, e.String())
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a cancelled run created %s", fresh)
	}
	code, stdout, stderr = run(t, append([]string{"calibrate", "stats", "-o", "json"}, base[:6]...)...)
	if code != 0 || !strings.Contains(stdout, "kvq.calibrate.stats/v1") || !strings.Contains(stdout, "k_pre_rope") {
		t.Errorf("stats: exit %d, %s", code, stderr)
	}
	// A GGUF model calibrates too (scales ship in F32); it carries no
	// scales of its own to audit.
	gg := filepath.Join(work, "tiny.gguf")
	if err := modeltest.WriteGGUF(gg, modeltest.Spec{Arch: "llama", Seed: 4, Context: 512}); err != nil {
		t.Fatal(err)
	}
	ggArgs := []string{"--model", gg, "--samples", "2", "--seq-len", "32", "--ctx", "64", "--chunks", "1"}
	code, _, stderr = run(t, append([]string{"calibrate", "--out", filepath.Join(work, "gguf"), "--compare", "default,dataset"}, ggArgs...)...)
	if code != 0 {
		t.Errorf("calibrate a GGUF model: exit %d: %s", code, stderr)
	}
	code, _, stderr = run(t, append([]string{"calibrate", "audit"}, ggArgs...)...)
	if code != 2 || !strings.Contains(stderr, "--scales") {
		t.Errorf("audit a GGUF model: exit %d, %q", code, stderr)
	}
}

// TestBench runs kvq bench in-process on a tiny model: JSON with the
// documented schema and every request's record, a concurrency sweep with
// SLO capacity, a smaller cache running more sequences in the same budget,
// the decode sweep and the plots.
func TestBench(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	plots := filepath.Join(t.TempDir(), "plots")
	code, out, stderr := run(t, "bench", "--model", dir, "--cache", "fp16,int4", "--num-prompts", "12", "--input-len", "48", "--output-len", "12",
		"--max-concurrency", "2,12", "--goodput", "ttft:60s,tpot:60s", "--budget-seqs", "3", "--depths", "0,64,1000", "--depth-tokens", "4", "--depth-reps", "1",
		"--warmups", "1", "--plot", plots, "-o", "json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	var rep struct {
		Schema string
		Mode   string
		Budget int64 `json:"kv_budget_bytes"`
		Caches []struct {
			Cache    string
			Capacity int
			Points   []struct {
				Summary map[string]any
				Engine  struct {
					RunningPeak int `json:"running_peak"`
				}
				Result struct {
					Records []map[string]any
				}
			}
			Sweep  struct{ Found bool } `json:"capacity_sweep"`
			Decode []struct {
				Depth   int    `json:"n_depth"`
				Skipped string `json:"skipped"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if rep.Schema != "kvq.bench/v1" || rep.Mode != "in-process" || rep.Budget <= 0 || len(rep.Caches) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	for _, c := range rep.Caches {
		if len(c.Points) != 2 || len(c.Points[1].Result.Records) != 12 || c.Points[1].Summary["completed"] != 12.0 || !c.Sweep.Found {
			t.Errorf("%s: %d points, %+v", c.Cache, len(c.Points), c.Sweep)
		}
		if _, ok := c.Points[1].Summary["p99_ttft_ms"]; !ok {
			t.Errorf("%s: summary lacks vLLM's keys: %v", c.Cache, c.Points[1].Summary)
		}
		if len(c.Decode) != 3 || c.Decode[2].Skipped == "" || c.Decode[0].Skipped != "" {
			t.Errorf("%s decode sweep: %+v", c.Cache, c.Decode)
		}
	}
	fp16, int4 := rep.Caches[0].Points[1].Engine.RunningPeak, rep.Caches[1].Points[1].Engine.RunningPeak
	if !(fp16 >= 3 && fp16 < 12 && int4 > fp16) {
		t.Errorf("running peaks in one budget: fp16 %d, int4 %d", fp16, int4)
	}
	for _, f := range []string{"ttft-cdf.svg", "tpot-cdf.png", "throughput-vs-load.svg", "decode-vs-depth.png"} {
		if _, err := os.Stat(filepath.Join(plots, f)); err != nil {
			t.Errorf("plot %s: %v", f, err)
		}
	}
	code, out, stderr = run(t, "bench", "--model", dir, "--cache", "fp16", "--num-prompts", "3", "--input-len", "400", "--output-len", "200", "--depths", "none")
	if code != 2 || !strings.Contains(stderr, "context of 512") {
		t.Errorf("requests past the context: exit %d, %q", code, stderr)
	}
}

// TestPlan runs kvq plan as a team would: a preset on an H100 with
// traffic lengths; a live endpoint whose metrics say KV-bound; and --from
// a directory of real calibrate, bench and eval outputs of a tiny model,
// whose items the plan then marks as settled.
func TestPlan(t *testing.T) {
	code, out, stderr := run(t, "plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "8000", "--output-len", "500", "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	var p struct {
		Schema     string
		Candidates []struct {
			Format struct {
				Name  string
				Class int
			}
			GPU      struct{ Status string }
			Capacity struct {
				TrafficConcurrency float64 `json:"traffic_concurrency"`
			}
		}
		Checklist []struct {
			Step          int
			Status, Title string
		}
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Schema != "kvq.plan/v1" || len(p.Candidates) < 5 || p.Candidates[0].Format.Class != 1 || p.Candidates[0].GPU.Status != "yes" || p.Candidates[0].Capacity.TrafficConcurrency < 100 {
		t.Errorf("plan: %+v", p)
	}
	// A live endpoint serving a KV-bound scrape.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "vllm-kvbound-0.txt"
		if n.Add(1) > 1 {
			name = "vllm-kvbound-1.txt"
		}
		b, _ := os.ReadFile(filepath.Join("..", "..", "..", "..", "..", "pkg", "plan", "testdata", name))
		w.Write(b)
	}))
	defer srv.Close()
	gates := filepath.Join(t.TempDir(), "gates.yaml")
	code, out, stderr = run(t, "plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--endpoint", srv.URL, "--scrape", "20ms", "--interval", "10ms", "--gates-out", gates, "-o", "markdown")
	if code != 0 || !strings.Contains(out, "KV-BOUND") || !strings.Contains(out, "preempted") {
		t.Errorf("plan --endpoint: exit %d, %s\n%s", code, stderr, out)
	}
	if _, err := os.Stat(gates); err != nil {
		t.Errorf("--gates-out: %v", err)
	}
	// --from: real outputs of a tiny model.
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	res := t.TempDir()
	for name, args := range map[string][]string{
		"cal.json":   {"calibrate", "--model", dir, "--samples", "2", "--seq-len", "32", "--ctx", "64", "--chunks", "1", "--compare", "default,dataset", "--out", filepath.Join(res, "scales"), "-o", "json"},
		"bench.json": {"bench", "--model", dir, "--cache", "fp16,fp8", "--num-prompts", "4", "--input-len", "16", "--output-len", "4", "--depths", "none", "-o", "json"},
		"eval.json":  {"eval", "--model", dir, "--cache", "fp16,fp8", "--tasks", "none", "--no-speed", "--ctx", "64", "--chunks", "1", "-o", "json"},
	} {
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		os.WriteFile(filepath.Join(res, name), []byte(out), 0o644)
	}
	code, out, stderr = run(t, "plan", "--model", dir, "--from", res, "-o", "json")
	if code != 0 {
		t.Fatalf("plan --from: exit %d: %s", code, stderr)
	}
	var q struct {
		Checklist []struct {
			Step                  int
			Status, Title, Detail string
		}
		Measured []string `json:"measured_from"`
	}
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, it := range q.Checklist {
		status[it.Title] = it.Status
	}
	if status["Calibrate scales on real samples"] != "measured" || status["Measure capacity and latency at the service's load"] != "measured" ||
		(status["Offline regression against fp16 (quality, tasks, safety, speed)"] != "passed" && status["Offline regression against fp16 (quality, tasks, safety, speed)"] != "failed") || len(q.Measured) != 3 {
		t.Errorf("plan --from statuses %v, measured %v", status, q.Measured)
	}
}
