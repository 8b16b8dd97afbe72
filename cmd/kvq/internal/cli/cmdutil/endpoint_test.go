package cmdutil

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestEndpointModel: an endpoint named after a cache picks the id ending
// in @NAME; named after a cache the server does not list, it takes the
// first id and warns that it goes to another model; an unnamed endpoint,
// or a server without per-cache ids (vLLM), gets no warning.
func TestEndpointModel(t *testing.T) {
	serve := func(ids ...string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var b strings.Builder
			for i, id := range ids {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `{"id":%q,"object":"model"}`, id)
			}
			fmt.Fprintf(w, `{"object":"list","data":[%s]}`, b.String())
		}))
	}
	kvq := serve("m", "m@fp16", "m@int4")
	defer kvq.Close()
	vllm := serve("org/model")
	defer vllm.Close()
	for _, c := range []struct {
		flag, model string
		warn        bool
	}{
		{"int4=" + kvq.URL, "m@int4", false},
		{"fp8=" + kvq.URL, "m", true},
		{kvq.URL, "m", false},
		{"fp8=" + vllm.URL, "org/model", false},
	} {
		ends, err := ParseEndpoints([]string{c.flag})
		if err != nil {
			t.Fatal(err)
		}
		var warn bytes.Buffer
		cl, err := ends[0].Client(context.Background(), "", "", time.Minute, &warn)
		if err != nil {
			t.Fatal(err)
		}
		if cl.Model != c.model {
			t.Errorf("%s: model %q, want %q", c.flag, cl.Model, c.model)
		}
		w := warn.String()
		if got := strings.Contains(w, "warning") && strings.Contains(w, "@fp8") && strings.Contains(w, "requests go to m,"); got != c.warn {
			t.Errorf("%s: warning %q, want one: %v", c.flag, w, c.warn)
		}
	}
}
