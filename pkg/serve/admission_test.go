package serve_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// TestMaxWaitingBurst: 100 simultaneous requests while the engine is busy,
// with max waiting 8, get 8 queued (200 once served) and 429s with
// Retry-After for the rest: admission is decided with the queueing, not
// from statistics a burst outruns (all 100 got 200, waiting peaked at 56).
func TestMaxWaitingBurst(t *testing.T) {
	const limit, burst = 8, 100
	block, blocked := make(chan struct{}), make(chan struct{}, 1)
	stepping := true
	e := startEngine(t, loadModel(t), engine.Options{Caches: specs(t, "fp16"), MaxSeqs: 1, MaxWaiting: limit, OnStep: func(engine.StepInfo) {
		if stepping {
			stepping = false
			blocked <- struct{}{}
			<-block // the engine stops here: nothing is admitted meanwhile
		}
	}})
	var unblock sync.Once
	release := func() { unblock.Do(func() { close(block) }) }
	t.Cleanup(release) // before the engine's cleanup, which waits for it
	f := start(t, e, serve.Options{MaxWaiting: limit})
	firstDone := make(chan int, 1)
	go func() {
		code, _, _ := f.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 2}`)
		firstDone <- code
	}()
	<-blocked
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var started sync.WaitGroup
	started.Add(burst)
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			code, hdr, _ := f.post(t, "/v1/completions", `{"prompt": "a", "max_tokens": 2}`)
			mu.Lock()
			codes[code]++
			mu.Unlock()
			if code == http.StatusTooManyRequests && hdr.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		}()
	}
	// Let the refusals come back while the engine is stopped, then let
	// it run the queued requests.
	started.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := codes[http.StatusTooManyRequests]
		mu.Unlock()
		if n == burst-limit {
			break
		}
		if time.Now().After(deadline) {
			release()
			wg.Wait()
			t.Fatalf("burst of %d with max waiting %d: %v after 30 s; want %d × 429 while the engine is stopped", burst, limit, codes, burst-limit)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	if c := <-firstDone; c != http.StatusOK {
		t.Errorf("first request: %d", c)
	}
	if codes[http.StatusOK] != limit || codes[http.StatusTooManyRequests] != burst-limit {
		t.Errorf("burst of %d with max waiting %d: %v; want %d × 200 and %d × 429", burst, limit, codes, limit, burst-limit)
	}
}
