package root

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/openai"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServe runs kvq serve --port 0, reads the URL it bound from stderr,
// completes through pkg/openai on each model id, then cancels the
// command's context (as SIGINT does): it exits 0 without printing the API
// key.
func TestServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}, Version: "test"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, f, []string{"serve", "--model", dir, "--port", "0", "--cache", "fp16,int8", "--route", "int8=50", "--api-key", "s3cret", "--served-model-name", "tiny"})
	}()
	re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+), models (.*)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); {
		select {
		case code := <-exit:
			t.Fatalf("kvq serve exited %d early: %s", code, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			if !strings.HasPrefix(m[2], "tiny, tiny@fp16, tiny@int8") {
				t.Errorf("model ids %q", m[2])
			}
		}
	}
	if url == "" {
		t.Fatalf("no URL on stderr: %q", stderr.String())
	}
	c := &openai.Client{BaseURL: url, APIKey: "s3cret", Timeout: 10 * time.Second}
	for _, model := range []string{"tiny@fp16", "tiny@int8"} {
		comp, err := c.Complete(ctx, openai.CompletionRequest{Model: model, Prompt: "once upon", MaxTokens: 4, IgnoreEOS: true, Temperature: openai.Ptr(0.0)}, nil)
		if err != nil || comp.CompletionTokens != 4 || comp.Cache != strings.TrimPrefix(model, "tiny@") {
			t.Errorf("%s: %+v, %v", model, comp, err)
		}
	}
	// kvq bench drives the server in endpoint mode: endpoints named after
	// the caches pick NAME@CACHE; the key comes from the environment.
	t.Setenv("KVQ_API_KEY", "s3cret")
	code, out, errb := run(t, "bench", "--model", dir, "--endpoint", "fp16="+url, "--endpoint", "int8="+url, "--num-prompts", "4",
		"--input-len", "16", "--output-len", "4", "--max-concurrency", "2", "--warmups", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("bench --endpoint: exit %d: %s", code, errb)
	}
	var rep struct {
		Mode   string
		Caches []struct {
			Cache  string
			Points []struct {
				Summary map[string]any
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Mode != "endpoint" || len(rep.Caches) != 2 || rep.Caches[1].Cache != "int8" {
		t.Fatalf("bench --endpoint report: %+v", rep)
	}
	for _, c := range rep.Caches {
		// The prompts go as token ids: the server prefills the 16 tokens
		// of each the in-process engine would.
		if s := c.Points[0].Summary; s["completed"] != 4.0 || s["total_output_tokens"] != 16.0 || s["total_input_tokens"] != 64.0 {
			t.Errorf("%s: %v", c.Cache, s)
		}
	}
	if strings.Contains(errb, "warning") {
		t.Errorf("bench --endpoint warned: %s", errb)
	}
	// An endpoint named after a cache the server lacks warns that its
	// requests go to another one.
	code, _, errb = run(t, "bench", "--model", dir, "--endpoint", "fp8="+url, "--num-prompts", "1",
		"--input-len", "16", "--output-len", "2", "--warmups", "0", "-o", "json")
	if code != 0 || !strings.Contains(errb, "warning: --endpoint fp8=") || !strings.Contains(errb, "requests go to tiny,") {
		t.Errorf("bench --endpoint fp8=: exit %d, stderr %s", code, errb)
	}
	// kvq eval evaluates the two caches through the server: the same
	// numbers as a local eval of the same caches, the KLD from top-20.
	common := []string{"--model", dir, "--ctx", "256", "--chunks", "3", "--tasks", "passkey,copy", "--contexts", "256", "-n", "2", "-o", "json"}
	code, out, errb = run(t, append([]string{"eval", "--endpoint", "fp16=" + url, "--endpoint", "int8=" + url}, common...)...)
	if code != 0 {
		t.Fatalf("eval --endpoint: exit %d: %s", code, errb)
	}
	type evalRep struct {
		Caches []struct {
			Spec, Endpoint string
			ServedModel    string `json:"served_model"`
		}
		Text struct {
			Approximation string
			Caches        []struct {
				PPL float64
				KLD struct{ Mean float64 }
			}
		}
		Suites []struct{ Suite string }
	}
	var er, lr evalRep
	if err := json.Unmarshal([]byte(out), &er); err != nil {
		t.Fatal(err)
	}
	code, out, errb = run(t, append([]string{"eval", "--cache", "fp16,int8", "--no-speed"}, common...)...)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errb)
	}
	if err := json.Unmarshal([]byte(out), &lr); err != nil {
		t.Fatal(err)
	}
	if len(er.Caches) != 2 || er.Caches[1].Endpoint != url || er.Caches[1].ServedModel != "tiny@int8" || er.Text.Approximation == "" ||
		len(er.Text.Caches) != 2 || len(er.Suites) != len(lr.Suites) || len(er.Suites) == 0 {
		t.Fatalf("eval --endpoint report: %+v", er)
	}
	for i, lc := range lr.Text.Caches {
		ec := er.Text.Caches[i]
		if math.Abs(ec.PPL-lc.PPL) > 1e-3*lc.PPL || ec.KLD.Mean > lc.KLD.Mean*1.05+1e-6 {
			t.Errorf("cache %d: PPL %v KLD %v through the server, %v and %v locally", i, ec.PPL, ec.KLD.Mean, lc.PPL, lc.KLD.Mean)
		}
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit code %d after the shutdown, want 0; stderr %q", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("kvq serve did not exit after its context ended")
	}
	if strings.Contains(stderr.String()+stdout.String(), "s3cret") {
		t.Errorf("the API key was printed: %q", stderr.String())
	}
}

// TestServeFlags: bad flags are usage errors naming the flag.
func TestServeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--cache", "int3"}, "--cache"},
		{[]string{"--port", "70000"}, "--port"},
		{[]string{"--route", "fp8=10"}, "not among --cache"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=120"}, "percentage"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8"}, "CACHE=PCT"},
		{[]string{"--kv-budget", "2"}, "--kv-budget"},
		{[]string{"--max-body", "lots"}, "--max-body"},
		{[]string{"--max-waiting", "0"}, "--max-waiting"},
		{[]string{"--served-model-name", "a@b"}, "--served-model-name"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=100,header=X-Tenant"}, "header=NAME:VALUE"},
		{[]string{"--cache", "fp16,fp8", "--route", "header=X-Tenant:acme,fp8=10"}, "then one condition"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=10,header=X-T:a,key=k"}, "then one condition"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=10,model=m@fp8"}, "model=ID"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=10,key="}, "empty key"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=60,header=X-T:a", "--route", "fp8=50,header=x-t:a"}, "the shares for header=X-T:a sum to 110%"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=60", "--route", "fp8=50"}, "the shares sum to 110%"},
		{[]string{"--cache", "fp16,fp8", "--route", "fp8=10,colour=red"}, "--route"},
		{[]string{"--fault-delay", "-1s"}, "--fault-delay"},
		{[]string{"--fault-error-rate", "1.5"}, "--fault-error-rate"},
		{[]string{"--fault-cache", "fp16"}, "--fault-cache fp16: give --fault-delay"},
		{[]string{"--fault-cache", "int8", "--fault-delay", "1s"}, "--fault-cache int8: not among --cache"},
	} {
		code, _, stderr := run(t, append([]string{"serve"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.err) {
			t.Errorf("kvq serve %v: exit %d, stderr %q; want 2 mentioning %q", tc.args, code, stderr, tc.err)
		}
	}
}

// TestServeAdmin: kvq serve with a tenant-key route, an API key and an
// injected error rate on one cache: the start line shows the key's
// fingerprint (never the key) and the faults; POST /admin/route moves the
// plain-name traffic and prints the change on stderr; the faulty cache
// answers 500 counted as errors while the other serves.
func TestServeAdmin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr}, Version: "test"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, f, []string{"serve", "--model", dir, "--port", "0", "--cache", "fp16,int8", "--served-model-name", "tiny", "--api-key", "adm",
			"--route", "int8=0", "--route", "int8=100,key=sk-tenant-secret", "--fault-error-rate", "1", "--fault-cache", "int8"})
	}()
	re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+), models (.*)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); {
		select {
		case code := <-exit:
			t.Fatalf("kvq serve exited %d early: %s", code, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("no URL on stderr: %q", stderr.String())
	}
	start := stderr.String()
	if !strings.Contains(start, "--route int8=0 int8=100,key=sha256:") || !strings.Contains(start, "fault injection on, for canary drills and tests: 100% of completions fail with 500 (on cache int8)") {
		t.Errorf("start lines: %q", start)
	}
	do := func(method, path, body, key string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-KVQ-Cache"), string(b)
	}
	const completion = `{"model": "tiny", "prompt": "a", "max_tokens": 1, "ignore_eos": true}`
	if code, cache, b := do("POST", "/v1/completions", completion, "adm"); code != 200 || cache != "fp16" {
		t.Errorf("before the switch: %d %s %s", code, cache, b)
	}
	if code, cache, b := do("POST", "/v1/completions", completion, "sk-tenant-secret"); code != 500 || cache != "int8" || !strings.Contains(b, "injected_fault") {
		t.Errorf("the tenant key on the faulty int8: %d %s %s", code, cache, b)
	}
	if code, _, b := do("POST", "/admin/route", `{"cache": "int8", "percent": 100}`, "sk-tenant-secret"); code != 401 {
		t.Errorf("admin with the tenant key: %d %s", code, b)
	}
	code, _, b := do("POST", "/admin/route", `{"cache": "int8", "percent": 100, "match": ""}`, "adm")
	if code != 200 || !strings.Contains(b, `{"cache":"int8","percent":100,"match":""}`) {
		t.Fatalf("POST /admin/route: %d %s", code, b)
	}
	if !regexp.MustCompile(`kvq serve: \d{4}-\d\d-\d\dT\S+ route int8 0% → 100% by 127\.0\.0\.1:\d+ \("Go-http-client/1\.1"\)\n`).MatchString(stderr.String()) {
		t.Errorf("no change line on stderr: %q", stderr.String())
	}
	if code, cache, _ := do("POST", "/v1/completions", completion, "adm"); code != 500 || cache != "int8" {
		t.Errorf("after the switch: %d %s", code, cache)
	}
	_, _, metrics := do("GET", "/metrics", "", "")
	for _, line := range []string{
		`kvq_route_changes_total{model_name="tiny",cache="int8"} 1`,
		`kvq_route_percent{model_name="tiny",cache="int8",match=""} 100`,
		`kvq:request_success_total{model_name="tiny",cache="int8",finished_reason="error"} 2`,
		`kvq:request_success_total{model_name="tiny",cache="fp16",finished_reason="length"} 1`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("kvq serve did not exit")
	}
	if strings.Contains(stderr.String(), "sk-tenant-secret") {
		t.Errorf("the tenant key was printed: %q", stderr.String())
	}
}
