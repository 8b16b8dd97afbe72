package canary_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/canary"
	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// TestCheckRoute: CheckRoute passes a key and cache that kvq serve's GET
// /admin/route takes and lists, and refuses, as input errors naming the
// cause, a wrong key (401), a server without a key (403), one without
// the endpoint (404) and a cache without a route; a server error or an
// unreachable server is not an input error.
func TestCheckRoute(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/admin/route":
			http.NotFound(w, r)
		case r.Method != http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Header.Get("X-Case") == "nokey":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"message":"the admin endpoints need the server's API key","type":"permission_error","code":"admin_disabled"}}`))
		case r.Header.Get("X-Case") == "broken":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("boom"))
		case r.Header.Get("Authorization") != "Bearer k":
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"missing or incorrect API key","type":"authentication_error","code":"invalid_api_key"}}`))
		default:
			w.Write([]byte(`{"routes":[{"cache":"int4","percent":100,"match":"header=X-Tenant:acme"}],"fallback":"fp16"}`))
		}
	}))
	defer srv.Close()
	withCase := func(c string) *http.Client {
		return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			r.Header.Set("X-Case", c)
			return http.DefaultTransport.RoundTrip(r)
		})}
	}
	ctx := context.Background()
	if err := canary.CheckRoute(ctx, nil, srv.URL+"/v1", "k", "int4"); err != nil {
		t.Fatalf("a good key and route: %v", err)
	}
	for _, c := range []struct {
		name, url, key, cache string
		client                *http.Client
		input                 bool
		want                  string
	}{
		{"wrong key", srv.URL, "x", "int4", nil, true, "HTTP 401: the API key is not the candidate server's (missing or incorrect API key)"},
		{"no key on the server", srv.URL, "k", "int4", withCase("nokey"), true, "HTTP 403: the admin endpoints need the server's API key"},
		{"no admin endpoint", srv.URL + "/other", "k", "int4", nil, true, "HTTP 404"},
		{"no route", srv.URL, "k", "int2", nil, true, `no route to cache "int2" (its routes: int4; the fallback is fp16)`},
		{"server error", srv.URL, "k", "int4", withCase("broken"), false, "HTTP 500: boom"},
		{"unreachable", "http://127.0.0.1:1", "k", "int4", nil, false, "/admin/route"},
	} {
		err := canary.CheckRoute(ctx, c.client, c.url, c.key, c.cache)
		if err == nil || !errors.Is(err, canary.ErrAct) || kvqerr.IsInput(err) != c.input || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v (input %v), want ErrAct saying %q, input %v", c.name, err, kvqerr.IsInput(err), c.want, c.input)
		}
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
