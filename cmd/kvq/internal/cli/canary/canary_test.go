package canary

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/canary"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// startServe runs kvq serve's engine and server for the built-in model
// with one cache on a loopback port until the test ends, and returns its
// URL.
func startServe(t *testing.T, cache string) string {
	t.Helper()
	return startServeWith(t, cache, serve.Options{})
}

// startServeWith is startServe with caches (comma-separated, the first
// the fallback) and the server's options (its model name is kvq-probe).
func startServeWith(t *testing.T, caches string, opts serve.Options) string {
	t.Helper()
	path, err := cmdutil.ResolveModel("", io.Discard)
	if err != nil {
		t.Skip("no built-in model:", err)
	}
	m, err := runtime.Load(context.Background(), path, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	var specs []quant.Spec
	for _, c := range strings.Split(caches, ",") {
		spec, err := quant.Formats().ParseSpec(c)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
	}
	e, err := engine.New(m, engine.Options{Caches: specs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- e.Run(ctx) }()
	if err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	opts.ModelName, opts.ShutdownGrace = "kvq-probe", time.Second
	s, err := serve.New(e, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
	return "http://" + ln.Addr().String()
}

// runWatch runs kvq canary watch with JSON output and returns its
// reports and error.
func runWatch(t *testing.T, args ...string) ([]canary.Report, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCmd(&cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &errOut}})
	cmd.SetArgs(append([]string{"watch", "--output", "json"}, args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	var reps []canary.Report
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if err := eval.ValidateJSONSchema(canary.JSONSchema, sc.Bytes()); err != nil {
			t.Errorf("a line does not match the schema: %v\n%s", err, sc.Bytes())
		}
		var r canary.Report
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		reps = append(reps, r)
	}
	if len(reps) == 0 || reps[len(reps)-1].Kind != "final" {
		t.Fatalf("no final report; stderr:\n%s", errOut.String())
	}
	return reps, err
}

// fast are the flags of a short watch: 1 s windows, a small probe set
// sent as fast as 4 requests in flight allow, ending at the first promote
// or rollback (a few seconds; the bound is for a loaded machine). Two
// engines on a loaded machine differ in latency on their own (an ITL p95
// of 0.305 s against 0.071 s, 4.3×, has been seen with two test binaries
// running at once), so a latency gate fails only 1 s above the baseline:
// the noise must not end a watch before the gate a test is about.
var fast = []string{"--duration", "60s", "--stop-early", "--window", "1s", "--probe-n", "3", "--probe-rpm", "6000", "--min-windows", "2",
	"--min-samples", "12", "--min-requests", "2", "--gate", "ttft-p95=3", "--gate", "itl-p95=3", "--latency-floor", "1s"}

// quality are fast's flags for watches that judge quality: latency gates
// only beyond 30 s, so that a loaded test machine's latency noise cannot
// decide them (TestWatchFaults checks the latency gates).
var quality = append(append([]string(nil), fast...), "--latency-floor", "30s")

// TestWatchBuiltinModel watches two kvq serve engines on the built-in
// model: fp16 against fp16 ends in promote (exit 0), fp16 against int2 in
// rollback on quality (exit 3) with the flips named.
func TestWatchBuiltinModel(t *testing.T) {
	skipPureGo(t)
	if testing.Short() {
		t.Skip("starts three engines")
	}
	base := startServe(t, "fp16")
	t.Run("fp16", func(t *testing.T) {
		reps, err := runWatch(t, append([]string{"--baseline", base, "--candidate", startServe(t, "fp16")}, quality...)...)
		final := reps[len(reps)-1]
		if err != nil || final.Result.Verdict != canary.Promote {
			t.Fatalf("err %v, verdict %s %q, want promote", err, final.Result.Verdict, final.Result.Reasons)
		}
		if final.Probe == nil || final.Probe.Items < 12 || final.Probe.Regressed != 0 || final.Probe.ExactDrift != 0 {
			t.Errorf("probe %+v, want ≥ 12 items, identical outputs", final.Probe)
		}
		if final.Total.Candidate.Engine != "kvq" || final.Total.Candidate.Requests < 2 {
			t.Errorf("candidate's metrics %+v", final.Total.Candidate)
		}
	})
	t.Run("int2", func(t *testing.T) {
		reps, err := runWatch(t, append([]string{"--baseline", base, "--candidate", startServe(t, "int2")}, quality...)...)
		final := reps[len(reps)-1]
		var ge *cmdutil.GateError
		if !errors.As(err, &ge) || final.Result.Verdict != canary.Rollback {
			t.Fatalf("err %v, verdict %s %q, want rollback (a GateError: exit 3)", err, final.Result.Verdict, final.Result.Reasons)
		}
		if !strings.Contains(strings.Join(final.Result.Reasons, " "), "flips:") {
			t.Errorf("reasons %q do not name the flips", final.Result.Reasons)
		}
		p := final.Probe
		if p.Regressed < 6 || p.McNemarP >= 0.05 || len(p.Flips) == 0 || p.Flips[0].Direction != "regressed" || !p.Flips[0].Refusal {
			t.Errorf("probe %+v, want significant regressions, refusals first", p)
		}
	})
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "--candidate", "http://b"}, "baseline"},
		{[]string{"watch", "--baseline", "a:1", "--candidate", "http://b"}, "http://"},
		{[]string{"watch", "--baseline", "http://a", "--candidate", "http://b", "--act"}, "--route-cache"},
		{[]string{"watch", "--baseline", "http://a", "--candidate", "http://b", "--gate", "nope=1"}, "nope"},
		{[]string{"watch", "--baseline", "http://a", "--candidate", "http://b", "--policy", "/nonexistent/p.yaml"}, "p.yaml"},
		{[]string{"watch", "--baseline", "http://a", "--candidate", "http://b", "--duration", "1s", "--window", "5s"}, "shorter than one --window"},
		{[]string{"serve-verdict", "--baseline", "http://a", "--candidate", "http://b"}, "listen"},
	} {
		cmd := NewCmd(&cmdutil.Factory{IO: &cmdutil.IOStreams{Out: io.Discard, ErrOut: io.Discard}})
		cmd.SetArgs(c.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) || !cmdutil.IsUsage(err) && !cmdutil.IsFlagError(err) {
			t.Errorf("%q: err %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
}

// skipPureGo skips a watch of live kvq serve processes under -tags purego:
// the pure-Go kernels serve the built-in model too slowly for a probe to
// reach its minimum of items in a test's minute (9 of 12 on 2 cores). The
// watch's logic is the same in every build; the default build runs it.
func skipPureGo(t *testing.T) {
	t.Helper()
	if pureGo {
		t.Skip("a live watch of the built-in model needs the SIMD kernels' speed; run without -tags purego")
	}
}
