package serve_test

import (
	"testing"

	"github.com/kvqlabs/kvq/pkg/serve"
)

// TestContextLimits: a prompt plus max_tokens beyond the model's context is
// an HTTP 400 naming both numbers, however large max_tokens is (no integer
// overflow lets it through).
func TestContextLimits(t *testing.T) {
	f := newServer(t, serve.Options{})
	for _, tc := range []struct {
		name, path, body string
		param            string
		words            []string
	}{
		{"max_tokens past the context", "/v1/completions", `{"prompt": "a", "max_tokens": 512}`, "max_tokens", []string{"512", "514"}},
		{"max_tokens near MaxInt64", "/v1/completions", `{"prompt": "a", "max_tokens": 9223372036854775807}`, "max_tokens", []string{"512", "9223372036854775807"}},
		{"max_completion_tokens near MaxInt64", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 9223372036854775806}`, "max_tokens", []string{"512", "9223372036854775806"}},
	} {
		code, _, b := f.post(t, tc.path, tc.body)
		wantError(t, tc.name, code, b, 400, "invalid_request_error", "context_length_exceeded", tc.param, tc.words...)
	}
	waitIdle(t, f.e)
}
