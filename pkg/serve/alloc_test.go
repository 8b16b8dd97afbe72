package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// TestStreamAllocs: a streamed completion allocates at most 6 objects per
// token beyond what the engine allocates for the same request read
// directly, counting the server (its event, the text released, the chunk
// encoded into a buffer reused for the whole response, the write) and the
// client reading the events in the same process. The per-token figures
// are the difference between a request of 65 tokens and one of 1, over
// 64. Before the buffer was reused and a lone request's events stopped
// passing through a goroutine of their own it was about 9.
func TestStreamAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector's sync.Pool drops items at random: allocations are counted without -race")
	}
	const steps = 64
	f := newServer(t, serve.Options{})
	ctx := context.Background()
	ids := []int{1, 40, 50, 60, 70}
	viaEngine := func(n int) func() {
		return func() {
			st, err := f.e.Submit(ctx, engine.Request{Prompt: ids, MaxTokens: n, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := st.Wait(ctx); err != nil || len(res.Tokens) != n {
				t.Fatalf("%d tokens, %v", len(res.Tokens), err)
			}
		}
	}
	viaServe := func(path string) func(int) func() {
		return func(n int) func() {
			req := map[string]any{"model": "tiny@fp16", "prompt": ids, "max_tokens": n, "ignore_eos": true, "stream": true}
			if path == "/v1/chat/completions" {
				delete(req, "prompt")
				req["messages"] = []map[string]string{{"role": "user", "content": "Once upon a time"}}
			}
			body, _ := json.Marshal(req)
			return func() {
				resp, err := f.client.Post(f.url+path, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				events := 0
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if bytes.HasPrefix(sc.Bytes(), []byte("data: ")) {
						events++
					}
				}
				if resp.StatusCode != http.StatusOK || events < n+1 { // and [DONE] (chat: and the role's)
					t.Fatalf("%s: status %d, %d events for %d tokens", path, resp.StatusCode, events, n)
				}
			}
		}
	}
	perTok := func(run func(int) func()) float64 {
		run(1)() // warm: the connection, the pools
		return (testing.AllocsPerRun(3, run(1+steps)) - testing.AllocsPerRun(3, run(1))) / steps
	}
	eng := perTok(viaEngine)
	for _, c := range []struct {
		path  string
		bound float64
	}{{"/v1/completions", 2}, {"/v1/chat/completions", 2}} {
		srv := perTok(viaServe(c.path))
		t.Logf("%s: allocations per token: engine %.2f, streamed over HTTP %.2f", c.path, eng, srv)
		if srv-eng > c.bound {
			t.Errorf("%s: a streamed token allocates %.2f objects beyond the engine's %.2f (at most %g)", c.path, srv-eng, eng, c.bound)
		}
	}
}
