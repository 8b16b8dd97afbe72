package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/kvqlabs/kvq/pkg/openai"
)

// A streamed completion: each chunk that carries a choice arrives with
// its time; the usage-only last message gives the token counts.
func ExampleClient_Complete() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": ping\n\n")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"Hello\"}],\"kvq_cache\":\"int8\"}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\", world\",\"finish_reason\":\"length\"}],\"kvq_cache\":\"int8\"}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()

	c := &openai.Client{BaseURL: srv.URL, Model: "kvq-probe@int8"}
	comp, err := c.Complete(context.Background(), openai.CompletionRequest{Prompt: "Say hi", MaxTokens: 2}, func(ch openai.Chunk) {
		fmt.Printf("chunk %q\n", ch.Text)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q: %d prompt + %d generated tokens on %s, finish %s, TTFT %v\n", comp.Text, comp.PromptTokens, comp.CompletionTokens,
		comp.Cache, comp.FinishReason, comp.FirstChunk.Sub(comp.Start) > 0)
	// Output:
	// chunk "Hello"
	// chunk ", world"
	// "Hello, world": 3 prompt + 2 generated tokens on int8, finish length, TTFT true
}
