package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// TestReliability drives the server with 24 concurrent clients on a
// loopback port: streaming and plain greedy requests, clients that leave
// after the first chunk (their requests aborted), malformed JSON, a prompt past the context and a
// body past the limit. Afterwards no KV block is in use and nothing
// runs or waits in the engine, the goroutines are back to what they were
// (small slack for the runtime's own), and every greedy response equals
// the same request run alone.
func TestReliability(t *testing.T) {
	f := start(t, startEngine(t, loadModel(t), engine.Options{Chunk: 16, MaxSeqs: 8}), serve.Options{MaxBodyBytes: 64 << 10})
	rng := rand.New(rand.NewPCG(11, 12))
	type client struct {
		kind string // stream, plain, leave, malformed, long, huge
		body string
		want string // the text alone
	}
	var clients []*client
	kinds := []string{"stream", "stream", "stream", "plain", "leave", "stream", "plain", "malformed", "stream", "leave", "long", "huge"}
	for i := range 24 {
		k := kinds[i%len(kinds)]
		c := &client{kind: k}
		prompt := make([]int, 5+rng.IntN(60))
		for j := range prompt {
			prompt[j] = rng.IntN(260)
		}
		req := map[string]any{"prompt": prompt, "max_tokens": 8 + rng.IntN(24), "temperature": 0, "ignore_eos": true, "model": []string{"tiny@fp16", "tiny@int8"}[i%2]}
		switch k {
		case "stream", "leave":
			req["stream"] = true
		case "long":
			req["prompt"] = make([]int, 600)
		case "huge":
			req["prompt"] = strings.Repeat("x", 100<<10)
		}
		if k == "leave" {
			req["max_tokens"] = 440 // long enough to be cut short
		}
		b, _ := json.Marshal(req)
		c.body = string(b)
		if k == "malformed" {
			c.body = c.body[:len(c.body)/2]
		}
		clients = append(clients, c)
	}
	// Each greedy request alone first.
	for _, c := range clients {
		if c.kind == "stream" || c.kind == "plain" {
			c.want = f.text(t, c.body)
		}
	}
	f.client.CloseIdleConnections()
	waitIdle(t, f.e)
	base := liveGoroutines()
	aborts := func() float64 {
		m := scrape(t, f)
		return m[`kvq:request_success_total{model_name="tiny",cache="fp16",finished_reason="abort"}`] +
			m[`kvq:request_success_total{model_name="tiny",cache="int8",finished_reason="abort"}`]
	}
	aborted := aborts()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/v1/completions", strings.NewReader(c.body))
			resp, err := f.client.Do(req)
			if err != nil {
				t.Errorf("client %d (%s): %v", i, c.kind, err)
				return
			}
			defer resp.Body.Close()
			switch c.kind {
			case "leave":
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "data: {") {
					t.Errorf("client %d (leave): first line %q, %v", i, line, err)
				}
				return // closes the body mid-stream
			case "malformed", "long", "huge":
				want := map[string]int{"malformed": 400, "long": 400, "huge": 413}[c.kind]
				if resp.StatusCode != want {
					t.Errorf("client %d (%s): status %d, want %d", i, c.kind, resp.StatusCode, want)
				}
				return
			}
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			if got := f.decodeText(t, resp.StatusCode, buf.Bytes(), c.kind == "stream"); got != c.want {
				t.Errorf("client %d (%s): %q together, %q alone", i, c.kind, got, c.want)
			}
		}()
	}
	wg.Wait()
	waitIdle(t, f.e)
	// A handler records its request's abort once it has read the end of
	// the engine's stream, which can be after the engine is idle: wait
	// for the count a little.
	for end := time.Now().Add(5 * time.Second); aborts()-aborted < 4 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := aborts() - aborted; got != 4 {
		t.Errorf("%g requests aborted, want the 4 whose clients left", got)
	}
	f.client.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Second)
	n := liveGoroutines()
	for n > base+3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = liveGoroutines()
	}
	if n > base+3 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines, %d before the clients:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// text runs one request and returns its text.
func (f *fixture) text(t *testing.T, body string) string {
	t.Helper()
	code, _, b := f.post(t, "/v1/completions", body)
	return f.decodeText(t, code, b, strings.Contains(body, `"stream":true`))
}

func (f *fixture) decodeText(t *testing.T, code int, b []byte, stream bool) string {
	t.Helper()
	if code != 200 {
		t.Errorf("status %d: %s", code, b)
		return ""
	}
	if !stream {
		return decode(t, b).text()
	}
	var s strings.Builder
	for _, c := range sse(t, b) {
		s.WriteString(c.text())
	}
	return s.String()
}

// liveGoroutines counts goroutines except the CPU backend's parked matrix
// helpers (internal/par keeps a bounded pool of them between calls by
// design; they are not requests' leftovers).
func liveGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.TrimSpace(g) != "" && !strings.Contains(g, "kvq/internal/par.helper") {
			count++
		}
	}
	return count
}
