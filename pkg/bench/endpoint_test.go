package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/openai"
)

// TestEndpointPrompts: an endpoint is sent a random or fixed workload's
// prompts as their token ids (BOS included, as the in-process engine
// prefills them), so that both modes do the same work, and a text
// workload's (builtin, files) as text; chat always sends text.
func TestEndpointPrompts(t *testing.T) {
	var mu sync.Mutex
	var prompts []json.RawMessage
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Prompt json.RawMessage `json:"prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		mu.Lock()
		prompts, paths = append(prompts, body.Prompt), append(paths, r.URL.Path)
		mu.Unlock()
		// The server counts an id prompt's ids, a text prompt's bytes.
		n := len(body.Prompt)
		var ids []int
		if json.Unmarshal(body.Prompt, &ids) == nil {
			n = len(ids)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"delta\":{\"content\":\"x\"},\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":1}}\n\n", n)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	tok := &byteTok{}
	target := &bench.EndpointTarget{Label: "ep", Client: &openai.Client{BaseURL: srv.URL, Model: "m"}, Tokenizer: tok}
	nop := func(int, time.Time) {}

	random, err := bench.Random(tok, 3, 40, 2, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := bench.Fixed(tok, 2, 17, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(random, fixed...) {
		prompts = prompts[:0]
		res, err := target.Do(context.Background(), r, nop)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int
		if len(prompts) != 1 || json.Unmarshal(prompts[0], &ids) != nil || !slices.Equal(ids, r.Prompt) {
			t.Errorf("request %d: sent prompt %s, want the ids %v", r.Index, prompts, r.Prompt)
		}
		if res.InputTokens != len(r.Prompt) {
			t.Errorf("request %d: %d input tokens, want %d", r.Index, res.InputTokens, len(r.Prompt))
		}
	}

	text := bench.Request{Prompt: tok.Encode("hello"), Text: "hello", MaxTokens: 2}
	for _, chat := range []bool{false, true} {
		target.Chat = chat
		for _, r := range []bench.Request{text, random[0]} {
			if !chat && r.TokenIDs {
				continue // above
			}
			prompts, paths = prompts[:0], paths[:0]
			if _, err := target.Do(context.Background(), r, nop); err != nil {
				t.Fatal(err)
			}
			var s string
			if chat {
				if len(paths) != 1 || paths[0] != "/v1/chat/completions" {
					t.Errorf("chat: sent to %v", paths)
				}
				continue
			}
			if len(prompts) != 1 || json.Unmarshal(prompts[0], &s) != nil || s != r.Text {
				t.Errorf("text request: sent prompt %s, want %q", prompts, r.Text)
			}
		}
	}
}
