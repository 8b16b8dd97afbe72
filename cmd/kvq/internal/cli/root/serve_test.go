package root

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
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
	} {
		code, _, stderr := run(t, append([]string{"serve"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.err) {
			t.Errorf("kvq serve %v: exit %d, stderr %q; want 2 mentioning %q", tc.args, code, stderr, tc.err)
		}
	}
}
