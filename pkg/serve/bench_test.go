package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// benchSpec is the default model of BenchmarkServeOverhead when
// KVQ_BENCH_GGUF names none: a random-weight F16 Llama of about 25M
// parameters, small enough that the fixed cost of a token (the engine's
// step, the stream, the HTTP response) is a visible share of its decode.
var benchSpec = modeltest.Spec{Arch: "llama", DType: "F16", Dim: 512, Hidden: 1408, Layers: 6, Heads: 8, KVHeads: 2, HeadDim: 64, Context: 1024, Seed: 3}

// benchModel loads KVQ_BENCH_GGUF, or writes and loads benchSpec.
func benchModel(b *testing.B) *runtime.Model {
	b.Helper()
	path := os.Getenv("KVQ_BENCH_GGUF")
	if path == "" || path == "tiny" {
		spec := benchSpec
		if path == "tiny" { // modeltest's default shape: almost all overhead
			spec = modeltest.Spec{Arch: "llama", DType: "F16", Seed: 3, Context: 1024}
		}
		path = filepath.Join(b.TempDir(), "bench.gguf")
		if err := modeltest.WriteGGUF(path, spec); err != nil {
			b.Fatal(err)
		}
	}
	m, err := runtime.Load(context.Background(), path, runtime.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkServeOverhead measures what a generated token costs at three
// layers, on one sequence, in interleaved rounds in one process:
//
//   - generate: runtime.Runner.Generate, kvq generate's decode loop (its
//     Decode time over the decode steps);
//   - engine: an engine.Engine request read with Stream.Next;
//   - serve: a streaming /v1/completions request over loopback, its
//     server-sent events read by the client as they arrive.
//
// Each generates KVQ_BENCH_TOKENS tokens (default 64, ignore_eos, greedy)
// after a prompt of KVQ_BENCH_PROMPT token ids (default 128), and its
// per-token time is the median interval between consecutive tokens as
// the consumer sees them (OnToken, Stream.Next, the client's SSE reads):
// the prefill is left out, and the median keeps a token slowed by another
// process on a shared machine from moving the round's figure. It also
// reports the CPU time the whole process (the client's reads included)
// spends per token at each layer, between the first token and the last:
// on a loaded machine, where the wall-clock figures move with the other
// processes, the CPU figures say what each layer adds. One benchmark iteration
// is one round of the three; it reports each layer's median ms per token
// and the medians of the per-round ratios engine/generate, serve/generate
// and serve/engine, of the wall-clock times and ("-cpu") of the CPU times. The model is KVQ_BENCH_GGUF, or benchSpec's:
//
//	go run ./scripts/benchmodel -shape 90m -o /tmp/bench-90m.gguf
//	KVQ_BENCH_GGUF=/tmp/bench-90m.gguf go test ./pkg/serve -run '^$' -bench ServeOverhead -benchtime 8x
func BenchmarkServeOverhead(b *testing.B) {
	m := benchModel(b)
	nPrompt, nGen := envInt(b, "KVQ_BENCH_PROMPT", 128), envInt(b, "KVQ_BENCH_TOKENS", 64)
	if nGen < 2 {
		b.Fatal("KVQ_BENCH_TOKENS: at least 2")
	}
	prompt := make([]int, nPrompt)
	for i := range prompt {
		prompt[i] = 3 + (i*7919)%(m.Vocab-3)
	}
	ctx := context.Background()

	// generate: a runner of its own, a cache of the request's size.
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	spec, err := quant.Formats().ParseSpec("fp16")
	if err != nil {
		b.Fatal(err)
	}
	l, err := kvcache.NewLayout(m.Geometry(), spec, 0)
	if err != nil {
		b.Fatal(err)
	}
	cache, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(nPrompt + nGen)})
	if err != nil {
		b.Fatal(err)
	}
	genCtx, genCancel := context.WithCancel(ctx) // as the CLI's signal context: a Done channel
	b.Cleanup(genCancel)
	generate := func() sample {
		_ = cache.Remove(0)
		if err := cache.AddSeq(0); err != nil {
			b.Fatal(err)
		}
		var at []time.Time
		var cpu [2]time.Duration
		out, _, err := r.Generate(genCtx, cache, 0, prompt, runtime.GenerateOptions{MaxTokens: nGen, OnToken: func(int) error {
			cpu[min(len(at), 1)] = processCPUTime()
			at = append(at, time.Now())
			return nil
		}})
		if err != nil || len(out) != nGen {
			b.Fatalf("generate: %d tokens, %v", len(out), err)
		}
		return sample{perToken(at), (cpu[1] - cpu[0]) / time.Duration(nGen-1)}
	}

	// engine and serve: one engine (fp16, as kvq serve's default) under a
	// server on a loopback port.
	e, err := engine.New(m, engine.Options{Caches: []quant.Spec{spec}})
	if err != nil {
		b.Fatal(err)
	}
	ectx, ecancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ectx) }()
	if err := e.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	s, err := serve.New(e, serve.Options{ModelName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sctx, scancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(sctx, ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	b.Cleanup(func() {
		client.CloseIdleConnections()
		scancel()
		<-served
		ecancel()
		<-ran
	})

	engineRun := func() sample {
		st, err := e.Submit(ctx, engine.Request{Prompt: prompt, MaxTokens: nGen, IgnoreEOS: true})
		if err != nil {
			b.Fatal(err)
		}
		var at []time.Time
		var cpu [2]time.Duration
		for {
			if _, err := st.Next(ctx); err != nil {
				break
			}
			cpu[min(len(at), 1)] = processCPUTime()
			at = append(at, time.Now())
		}
		if len(at) != nGen {
			b.Fatalf("engine: %d tokens, %v", len(at), st.Result().Err)
		}
		return sample{perToken(at), (cpu[1] - cpu[0]) / time.Duration(nGen-1)}
	}

	body, _ := json.Marshal(map[string]any{"model": "bench", "prompt": prompt, "max_tokens": nGen, "ignore_eos": true, "temperature": 0, "stream": true})
	url := "http://" + ln.Addr().String() + "/v1/completions"
	serveRun := func() sample {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("serve: status %d", resp.StatusCode)
		}
		var at []time.Time
		var cpu [2]time.Duration
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.HasPrefix(line, []byte("data: ")) || bytes.Equal(line, []byte("data: [DONE]")) {
				continue
			}
			cpu[min(len(at), 1)] = processCPUTime()
			at = append(at, time.Now())
		}
		if len(at) != nGen { // one event per token
			b.Fatalf("serve: %d events for %d tokens", len(at), nGen)
		}
		return sample{perToken(at), (cpu[1] - cpu[0]) / time.Duration(nGen-1)}
	}

	// KVQ_BENCH_ONLY=generate, engine or serve runs that layer alone (to
	// profile it); the ratios are then meaningless.
	only := os.Getenv("KVQ_BENCH_ONLY")
	// A warm-up round, then b.N measured ones.
	generate()
	engineRun()
	serveRun()
	var gen, eng, srv, engGen, srvGen, srvEng []float64
	var cpuGen, cpuEng, cpuSrv, cpuEngGen, cpuSrvGen []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The order rotates so that no layer always follows another.
		var g, en, sv sample
		for _, k := range [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}}[i%3] {
			if only != "" && only != [3]string{"generate", "engine", "serve"}[k] {
				continue
			}
			switch k {
			case 0:
				g = generate()
			case 1:
				en = engineRun()
			case 2:
				sv = serveRun()
			}
		}
		gen, eng, srv = append(gen, ms(g.wall)), append(eng, ms(en.wall)), append(srv, ms(sv.wall))
		engGen, srvGen, srvEng = append(engGen, ms(en.wall)/ms(g.wall)), append(srvGen, ms(sv.wall)/ms(g.wall)), append(srvEng, ms(sv.wall)/ms(en.wall))
		cpuGen, cpuEng, cpuSrv = append(cpuGen, ms(g.cpu)), append(cpuEng, ms(en.cpu)), append(cpuSrv, ms(sv.cpu))
		cpuEngGen, cpuSrvGen = append(cpuEngGen, ms(en.cpu)/ms(g.cpu)), append(cpuSrvGen, ms(sv.cpu)/ms(g.cpu))
	}
	b.StopTimer()
	b.ReportMetric(median(gen), "generate-ms/tok")
	b.ReportMetric(median(eng), "engine-ms/tok")
	b.ReportMetric(median(srv), "serve-ms/tok")
	b.ReportMetric(median(engGen), "engine/generate")
	b.ReportMetric(median(srvGen), "serve/generate")
	b.ReportMetric(median(srvEng), "serve/engine")
	b.ReportMetric(median(cpuGen), "generate-cpu-ms/tok")
	b.ReportMetric(median(cpuEng), "engine-cpu-ms/tok")
	b.ReportMetric(median(cpuSrv), "serve-cpu-ms/tok")
	b.ReportMetric(median(cpuEngGen), "engine/generate-cpu")
	b.ReportMetric(median(cpuSrvGen), "serve/generate-cpu")
	if testing.Verbose() {
		b.Logf("rounds: serve/generate %s; engine/generate %s; CPU serve/generate %s; CPU engine/generate %s",
			fmtAll(srvGen), fmtAll(engGen), fmtAll(cpuSrvGen), fmtAll(cpuEngGen))
	}
}

// sample is a layer's per-token figures in one round: the median
// interval between tokens, and the process's CPU time from the first
// token to the last over the tokens between (every goroutine's: the
// engine's, the server's, the client's).
type sample struct{ wall, cpu time.Duration }

// perToken is the median interval between consecutive tokens' arrival
// times: the median, not the mean, so that a token delayed by another
// process on a shared machine does not move a round's figure.
func perToken(at []time.Time) time.Duration {
	d := make([]float64, 0, len(at))
	for i := 1; i < len(at); i++ {
		d = append(d, float64(at[i].Sub(at[i-1])))
	}
	return time.Duration(median(d))
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtAll(x []float64) string {
	parts := make([]string, len(x))
	for i, v := range x {
		parts[i] = fmt.Sprintf("%.3f", v)
	}
	return strings.Join(parts, " ")
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
