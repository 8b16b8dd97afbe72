package root

import (
	"context"
	"encoding/json"
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

// startServe runs kvq serve --port 0 with args until the test ends and
// returns its URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	var stderr syncBuffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &syncBuffer{}, ErrOut: &stderr}, Version: "test"}
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() { exit <- Run(ctx, f, append([]string{"serve", "--port", "0"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exit:
		case <-time.After(15 * time.Second):
			t.Error("kvq serve did not stop")
		}
	})
	re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case code := <-exit:
			t.Fatalf("kvq serve exited %d: %s", code, stderr.String())
		default:
		}
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no URL: %s", stderr.String())
	return ""
}

// load keeps clients requests in flight against url until stop closes.
func load(t *testing.T, url string, clients, promptLen, maxTokens int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	c := &openai.Client{BaseURL: url, Timeout: 30 * time.Second}
	prompt := make([]int, promptLen)
	for i := range prompt {
		prompt[i] = 1 + i%200
	}
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, _ = c.Complete(ctx, openai.CompletionRequest{PromptTokens: prompt, MaxTokens: maxTokens, IgnoreEOS: true, Temperature: openai.Ptr(0.0), NoStream: true}, nil)
				cancel()
			}
		}()
	}
	return &wg
}

// TestPlanLiveServe: kvq plan --endpoint samples a live kvq serve — one
// whose KV budget (512 tokens) cannot hold two of the 370-token requests its eight clients keep
// sending (KV-bound), and one with a single client of short requests
// (not KV-bound).
func TestPlanLiveServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	verdict := func(url string) (string, []string) {
		t.Helper()
		code, out, stderr := run(t, "plan", "--model", dir, "--endpoint", url, "--scrape", "1500ms", "--interval", "100ms", "-o", "json")
		if code != 0 {
			t.Fatalf("plan --endpoint %s: exit %d: %s", url, code, stderr)
		}
		var p struct {
			Bottleneck struct {
				Verdict  string
				Engine   string
				Evidence []string
			} `json:"step1"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if p.Bottleneck.Engine != "kvq" {
			t.Errorf("engine %q", p.Bottleneck.Engine)
		}
		return p.Bottleneck.Verdict, p.Bottleneck.Evidence
	}

	bound := startServe(t, "--model", dir, "--kv-budget", "128KiB")
	stop := make(chan struct{})
	wg := load(t, bound, 8, 200, 170, stop)
	v, ev := verdict(bound)
	close(stop)
	wg.Wait()
	if v != "kv-bound" {
		t.Errorf("a 128 KiB pool (512 tokens) under eight 370-token clients: %s, evidence %q", v, ev)
	}

	light := startServe(t, "--model", dir)
	stop = make(chan struct{})
	wg = load(t, light, 1, 8, 4, stop)
	v, ev = verdict(light)
	close(stop)
	wg.Wait()
	if v != "not-kv-bound" {
		t.Errorf("one client of short requests: %s, evidence %q", v, ev)
	}
}
