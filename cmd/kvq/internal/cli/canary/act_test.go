package canary

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/canary"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// The end-to-end tests of this file run kvq canary watch from its command
// against real kvq serve servers on the built-in model: --act pulls the
// admin route of a server that routes half its traffic to int2, and
// kvq serve's fault injection (--fault-delay, --fault-error-rate) plays a
// slow and a failing candidate.

// adminKey is the API key of the servers of these tests.
const adminKey = "sk-admin-test"

// call sends a request with the admin key (when key is set) and returns
// the status, the served cache (X-KVQ-Cache) and the body.
func call(t *testing.T, method, url, key, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(serve.CacheHeader), b
}

// routedCaches sends n one-token completions for the served name (the
// routed traffic) and counts the caches that served them.
func routedCaches(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		code, cache, b := call(t, http.MethodPost, url+"/v1/completions", adminKey, `{"model": "kvq-probe", "prompt": "Hello", "max_tokens": 1}`)
		if code != http.StatusOK || cache == "" {
			t.Fatalf("routed completion: HTTP %d, cache %q: %s", code, cache, b)
		}
		out[cache]++
	}
	return out
}

// int2Route is the int2 route's percentage in GET /admin/route.
func int2Route(t *testing.T, url string) float64 {
	t.Helper()
	code, _, b := call(t, http.MethodGet, url+"/admin/route", adminKey, "")
	var l struct {
		Routes []struct {
			Cache   string  `json:"cache"`
			Percent float64 `json:"percent"`
		} `json:"routes"`
	}
	if err := json.Unmarshal(b, &l); code != http.StatusOK || err != nil {
		t.Fatalf("GET /admin/route: HTTP %d %v: %s", code, err, b)
	}
	for _, r := range l.Routes {
		if r.Cache == "int2" {
			return r.Percent
		}
	}
	t.Fatalf("GET /admin/route lists no int2 route: %s", b)
	return 0
}

// metrics scrapes url's /metrics into series (name{labels} as written) →
// value.
func metrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	code, _, b := call(t, http.MethodGet, url+"/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// succeeded sums kvq:request_success_total of cache over its reasons.
func succeeded(m map[string]float64, cache string) float64 {
	n := 0.0
	for _, r := range []string{"stop", "length", "abort", "error"} {
		n += m[fmt.Sprintf(`kvq:request_success_total{model_name="kvq-probe",cache=%q,finished_reason=%q}`, cache, r)]
	}
	return n
}

// TestWatchActRoute: one kvq serve with fp16 and int2 routes half of its
// traffic to int2; kvq canary watch --act, told the two sides apart by
// their caches, ends in rollback on quality, sets int2's share to 0% with
// the server's API key and records it; afterwards every routed request
// goes to fp16. A wrong key or a cache without a route fails at the
// start (exit 2) and moves nothing.
func TestWatchActRoute(t *testing.T) {
	skipPureGo(t)
	if testing.Short() {
		t.Skip("starts an engine")
	}
	url := startServeWith(t, "fp16,int2", serve.Options{APIKey: adminKey, Route: map[string]float64{"int2": 0.5}, RouteSeed: 3})
	if s := routedCaches(t, url, 12); s["int2"] == 0 || s["fp16"] == 0 {
		t.Fatalf("int2 at 50%%: routed requests went to %v", s)
	}
	act := []string{"--baseline", url, "--baseline-cache", "fp16", "--candidate", url, "--candidate-cache", "int2", "--act", "--route-cache", "int2"}

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"wrong key", []string{"--api-key", "sk-wrong"}, []string{"--act", "--api-key", "HTTP 401", "not the candidate server's"}},
		{"no key", nil, []string{"--act", "--api-key", "HTTP 401"}},
		{"no route", []string{"--api-key", adminKey, "--route-cache", "fp16"}, []string{"--route-cache fp16", `no route to cache "fp16"`, "its routes: int2"}},
		{"serve-verdict, wrong key", []string{"--api-key", "sk-wrong"}, []string{"--act", "--api-key", "HTTP 401"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(APIKeyEnv, "")
			var out, errOut bytes.Buffer
			cmd := NewCmd(&cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &errOut}})
			sub := []string{"watch", "-o", "json"}
			if strings.HasPrefix(c.name, "serve-verdict") {
				sub = []string{"serve-verdict", "--listen", "127.0.0.1:0"}
			}
			cmd.SetArgs(append(append(append(sub, act...), c.args...), fast...))
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			start := time.Now()
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !cmdutil.IsUsage(err) {
				t.Fatalf("err %v, want a usage error (exit 2)", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if out.Len() != 0 || errOut.Len() != 0 || time.Since(start) > 5*time.Second {
				t.Errorf("the watch ran (%v): %s%s", time.Since(start), out.Bytes(), errOut.Bytes())
			}
		})
	}
	if p := int2Route(t, url); p != 50 {
		t.Fatalf("after the refused watches int2 is at %g%%, want 50", p)
	}

	before := metrics(t, url)
	reps, err := runWatch(t, append(append(act, "--api-key", adminKey), quality...)...)
	final := reps[len(reps)-1]
	var ge *cmdutil.GateError
	if !errors.As(err, &ge) || final.Result.Verdict != canary.Rollback {
		t.Fatalf("err %v, verdict %s %q, want rollback (exit 3)", err, final.Result.Verdict, final.Result.Reasons)
	}
	if !strings.Contains(strings.Join(final.Result.Reasons, " "), "flips:") || final.Probe.Regressed == 0 {
		t.Errorf("reasons %q, probe %+v: want a rollback on the flips", final.Result.Reasons, final.Probe)
	}
	if a := final.Actions; len(a) != 1 || !a[0].OK || a[0].Status != http.StatusOK || a[0].Cache != "int2" || a[0].Percent != 0 ||
		a[0].URL != url+"/admin/route" || a[0].Error != "" {
		t.Errorf("actions %+v, want one successful POST setting int2 to 0%%", a)
	}

	// The probe reached each side's cache (NAME@CACHE, found in
	// /v1/models), not the routed split: each cache served at least the
	// probe's requests to its side.
	after := metrics(t, url)
	for _, c := range []string{"fp16", "int2"} {
		if n := succeeded(after, c) - succeeded(before, c); n < float64(final.Probe.Requests) || final.Probe.Requests == 0 {
			t.Errorf("%s finished %g requests during the watch, fewer than the probe's %d per side", c, n, final.Probe.Requests)
		}
	}
	for series, want := range map[string]float64{
		`kvq_route_changes_total{model_name="kvq-probe",cache="int2"}`:    1,
		`kvq_route_changes_total{model_name="kvq-probe",cache="fp16"}`:    0,
		`kvq_route_percent{model_name="kvq-probe",cache="int2",match=""}`: 0,
	} {
		if got, ok := after[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if p := int2Route(t, url); p != 0 {
		t.Errorf("GET /admin/route: int2 at %g%%, want 0", p)
	}
	if s := routedCaches(t, url, 12); s["fp16"] != 12 {
		t.Errorf("after the rollback routed requests went to %v, want all fp16", s)
	}
}

// TestWatchFaults: a candidate kvq serve that injects latency
// (--fault-delay 3s) ends in rollback on TTFT, a cache that fails half its
// completions (--fault-error-rate, --fault-cache) in rollback on the
// error rate its metrics count; the same watch of a plain fp16 candidate promotes
// (TestWatchBuiltinModel), so each fault is what fails it.
func TestWatchFaults(t *testing.T) {
	skipPureGo(t)
	if testing.Short() {
		t.Skip("starts three engines")
	}
	base := startServe(t, "fp16")
	failed := func(rep canary.Report, metric string) *canary.GateResult {
		for i, g := range rep.Gates {
			if g.Gate.Metric == metric && g.Status == canary.StatusFail {
				return &rep.Gates[i]
			}
		}
		return nil
	}
	t.Run("delay", func(t *testing.T) {
		// Two engines on a loaded machine differ by a few hundred ms of
		// TTFT on their own (fp16 against fp16 has measured 0.81 s against
		// 0.38 s): the gate fails only a median 2× and 1 s (fast's floor)
		// above the baseline's, which the 3 s delay passes and noise does
		// not.
		cand := startServeWith(t, "fp16", serve.Options{Fault: serve.Fault{Delay: 3 * time.Second}})
		reps, err := runWatch(t, append([]string{"--baseline", base, "--candidate", cand, "--gate", "ttft-p50=2"}, fast...)...)
		final := reps[len(reps)-1]
		var ge *cmdutil.GateError
		if !errors.As(err, &ge) || final.Result.Verdict != canary.Rollback {
			t.Fatalf("err %v, verdict %s %q, want rollback (exit 3)", err, final.Result.Verdict, final.Result.Reasons)
		}
		g := failed(final, "ttft-p50")
		if g == nil || g.Value < 2 || g.Candidate < 2 {
			t.Fatalf("gates %+v: want ttft-p50 failed, the candidate's p50 over 2 s", final.Gates)
		}
		if g.Candidate-g.Baseline < 1 {
			t.Errorf("ttft-p50 %+v: the candidate's p50 is not 1 s above the baseline's", g)
		}
		if failed(final, canary.GateFlips) != nil || failed(final, canary.GateErrorRate) != nil {
			t.Errorf("reasons %q: only latency should fail", final.Result.Reasons)
		}
	})
	t.Run("errors", func(t *testing.T) {
		// One server, the faults scoped to the candidate's cache (kvq serve
		// --cache fp16,fp32 --fault-error-rate 0.5 --fault-cache fp32):
		// the injected errors count in fp32's series only.
		url := startServeWith(t, "fp16,fp32", serve.Options{Fault: serve.Fault{ErrorRate: 0.5, Seed: 7, Cache: "fp32"}})
		reps, err := runWatch(t, append([]string{"--baseline", url, "--baseline-cache", "fp16", "--candidate", url, "--candidate-cache", "fp32"}, fast...)...)
		final := reps[len(reps)-1]
		var ge *cmdutil.GateError
		if !errors.As(err, &ge) || final.Result.Verdict != canary.Rollback {
			t.Fatalf("err %v, verdict %s %q, want rollback (exit 3)", err, final.Result.Verdict, final.Result.Reasons)
		}
		if g := failed(final, canary.GateErrorRate); g == nil || g.Candidate < 0.2 || g.Baseline != 0 {
			t.Fatalf("gates %+v: want error-rate failed, the candidate's rate near 0.5", final.Gates)
		}
		if c := final.Total.Candidate; !(c.Errors >= 5) || c.Requests < c.Errors || final.Total.Baseline.Errors != 0 {
			t.Errorf("totals %+v / %+v: want the candidate's injected errors counted from kvq:request_success_total", final.Total.Baseline, c)
		}
		if failed(final, canary.GateFlips) != nil {
			t.Errorf("reasons %q: the outputs that succeed are as fp16's", final.Result.Reasons)
		}
	})
}
