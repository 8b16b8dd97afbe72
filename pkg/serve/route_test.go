package serve_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// draw is request k's draw of the stream seed, as the server makes it.
func draw(seed, k uint64) float64 {
	return float64(rand.NewPCG(seed, k).Uint64()>>11) / (1 << 53)
}

// do sends a request with headers (name, value pairs) and returns the
// status and body.
func (f *fixture) do(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// cacheOf sends a one-token completion for model with headers and
// returns the cache that served it (header and field must agree).
func (f *fixture) cacheOf(t *testing.T, model string, hdr ...string) string {
	t.Helper()
	code, h, b := f.post(t, "/v1/completions", fmt.Sprintf(`{"model": %q, "prompt": [1, 2], "max_tokens": 1, "ignore_eos": true}`, model), hdr...)
	c := decode(t, b)
	if code != 200 || c.Cache != h.Get(serve.CacheHeader) || c.Cache == "" {
		t.Fatalf("%s %v: status %d, field %q, header %q: %s", model, hdr, code, c.Cache, h.Get(serve.CacheHeader), b)
	}
	if want := model; want != "" && c.Model != want {
		t.Errorf("%s: response model %q", model, c.Model)
	}
	return c.Cache
}

// TestRouteMatch: a route restricted by a header, an API key or a model id
// takes the requests it matches and no others; the first matching route
// wins; a share below 100% splits by the seeded draws; NAME@CACHE stays
// pinned; a tenant key is accepted on /v1/ but the others are not.
func TestRouteMatch(t *testing.T) {
	f := newServer(t, serve.Options{APIKey: "adm", Routes: []serve.Route{
		{Cache: "int8", Share: 1, Match: serve.Match{Header: "X-Tenant", Value: "acme"}},
		{Cache: "int8", Share: 1, Match: serve.Match{Key: "sk-tenant"}},
		{Cache: "int8", Share: 1, Match: serve.Match{Model: "tiny-canary"}},
		{Cache: "fp16", Share: 1, Match: serve.Match{Header: "X-Tenant", Value: "beta"}},
	}})
	auth := "Bearer adm"
	for _, tc := range []struct {
		model string
		hdr   []string
		want  string
	}{
		{"tiny", []string{"Authorization", auth}, "fp16"},
		{"", []string{"Authorization", auth, "X-Tenant", "acme"}, "int8"},
		{"tiny", []string{"Authorization", auth, "x-tenant", "acme"}, "int8"}, // header names fold
		{"tiny", []string{"Authorization", auth, "X-Tenant", "acme2"}, "fp16"},
		{"tiny", []string{"Authorization", auth, "X-Tenant", "beta"}, "fp16"},
		{"tiny", []string{"Authorization", "Bearer sk-tenant"}, "int8"},
		{"tiny-canary", []string{"Authorization", auth}, "int8"},
		{"tiny@fp16", []string{"Authorization", auth, "X-Tenant", "acme"}, "fp16"},
		{"tiny@fp16", []string{"Authorization", "Bearer sk-tenant"}, "fp16"},
	} {
		if got := f.cacheOf(t, tc.model, tc.hdr...); got != tc.want {
			t.Errorf("model %q %v: served by %s, want %s", tc.model, tc.hdr, got, tc.want)
		}
	}
	code, _, b := f.post(t, "/v1/completions", `{"prompt": [1], "max_tokens": 1}`, "Authorization", "Bearer sk-other")
	wantError(t, "wrong key", code, b, 401, "authentication_error", "invalid_api_key", "")
	// The alias is listed, routed, under the served name.
	code, b = f.do(t, http.MethodGet, "/v1/models", "", "Authorization", auth)
	var list struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
			Cache  string  `json:"kvq_cache"`
		}
	}
	if err := json.Unmarshal(b, &list); err != nil || code != 200 {
		t.Fatalf("/v1/models: %d %s", code, b)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"tiny", "tiny@fp16", "tiny@int8", "tiny-canary"}) || list.Data[3].Parent == nil || *list.Data[3].Parent != "tiny" || list.Data[3].Cache != "" || list.Data[0].Cache != "" {
		t.Errorf("/v1/models: %s", b)
	}
}

// TestRouteSplitByHeader: a tenant's route at 30% sends the tenant's
// requests to int8 exactly as the seeded draws say (the draws count every
// routed request), the other requests (no default route) to fp16.
func TestRouteSplitByHeader(t *testing.T) {
	const seed, n = 11, 60
	f := newServer(t, serve.Options{RouteSeed: seed, Routes: []serve.Route{{Cache: "int8", Share: 0.3, Match: serve.Match{Header: "X-Tenant", Value: "acme"}}}})
	got, want := 0, 0
	for k := range uint64(n) {
		tenant := k%2 == 0
		hdr := []string{}
		if tenant {
			hdr = []string{"X-Tenant", "acme"}
		}
		c := f.cacheOf(t, "tiny", hdr...)
		if tenant && draw(seed, k) < 0.3 {
			want++
		}
		if c == "int8" {
			if !tenant {
				t.Fatalf("request %d without the header went to int8", k)
			}
			got++
		}
	}
	if got != want || want == 0 || want == n/2 {
		t.Errorf("int8 took %d of the tenant's %d requests, the draws say %d", got, n/2, want)
	}
}

// adminResp is the admin endpoint's JSON.
type adminResp struct {
	Routes []struct {
		Cache   string  `json:"cache"`
		Percent float64 `json:"percent"`
		Match   string  `json:"match"`
	} `json:"routes"`
	Fallback string `json:"fallback"`
	Changed  []struct {
		Cache    string
		Match    string
		From, To float64
	} `json:"changed"`
}

func (f *fixture) admin(t *testing.T, method, body string, hdr ...string) (int, adminResp, []byte) {
	t.Helper()
	code, b := f.do(t, method, "/admin/route", body, hdr...)
	var r adminResp
	if code == 200 {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s /admin/route: %s: %v", method, b, err)
		}
	}
	return code, r, b
}

// split sends n requests for plain tiny and counts the caches that served
// them.
func (f *fixture) split(t *testing.T, n int, hdr ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		out[f.cacheOf(t, "tiny", hdr...)]++
	}
	return out
}

// TestAdminRoute: POST /admin/route moves the traffic (0% → 100% → 50%
// by the draws → 0%), GET lists the routes, every change is reported
// (old → new, who) and counted in /metrics with the route's percentage.
func TestAdminRoute(t *testing.T) {
	const seed = 5
	var mu sync.Mutex
	var changes []serve.RouteChange
	f := newServer(t, serve.Options{APIKey: "adm", RouteSeed: seed, Route: map[string]float64{"int8": 0},
		OnRouteChange: func(c serve.RouteChange) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, c)
		}})
	auth := []string{"Authorization", "Bearer adm"}
	k := uint64(0) // routed requests so far
	if s := f.split(t, 10, auth...); s["fp16"] != 10 {
		t.Fatalf("int8 at 0%%: %v", s)
	}
	k += 10
	code, r, b := f.admin(t, http.MethodGet, "", auth...)
	if code != 200 || len(r.Routes) != 1 || r.Routes[0].Cache != "int8" || r.Routes[0].Percent != 0 || r.Routes[0].Match != "" || r.Fallback != "fp16" {
		t.Fatalf("GET: %d %s", code, b)
	}
	post := func(body string) adminResp {
		t.Helper()
		code, r, b := f.admin(t, http.MethodPost, body, append(auth, "User-Agent", "canary-test/1")...)
		if code != 200 {
			t.Fatalf("POST %s: %d %s", body, code, b)
		}
		return r
	}
	r = post(`{"cache": "int8", "percent": 100, "reason": "promote"}`)
	if len(r.Changed) != 1 || r.Changed[0].From != 0 || r.Changed[0].To != 100 || r.Routes[0].Percent != 100 {
		t.Errorf("POST 100: %+v", r)
	}
	if s := f.split(t, 10, auth...); s["int8"] != 10 {
		t.Errorf("int8 at 100%%: %v", s)
	}
	k += 10
	post(`{"cache": "int8", "percent": 50}`)
	want := 0
	for i := range uint64(40) {
		if draw(seed, k+i) < 0.5 {
			want++
		}
	}
	if s := f.split(t, 40, auth...); s["int8"] != want || want == 0 || want == 40 {
		t.Errorf("int8 at 50%%: %v, the draws say %d", s, want)
	}
	post(`{"cache": "int8", "percent": 0, "reason": "rollback: TTFT p95 ×3"}`)
	if s := f.split(t, 10, auth...); s["fp16"] != 10 {
		t.Errorf("int8 back at 0%%: %v", s)
	}
	mu.Lock()
	if len(changes) != 3 || changes[2].From != 0.5 || changes[2].To != 0 || changes[2].Cache != "int8" || changes[2].UserAgent != "canary-test/1" ||
		changes[2].Remote == "" || time.Since(changes[2].Time) > time.Minute || changes[2].Reason != "rollback: TTFT p95 ×3" {
		t.Errorf("changes %+v", changes)
	}
	line := changes[2].String()
	mu.Unlock()
	if !strings.Contains(line, "route int8 50% → 0% by 127.0.0.1:") || !strings.Contains(line, `"canary-test/1"`) || !strings.Contains(line, `reason "rollback`) {
		t.Errorf("change line %q", line)
	}
	m := scrape(t, f)
	for series, want := range map[string]float64{
		`kvq_route_changes_total{model_name="tiny",cache="int8"}`:                            3,
		`kvq_route_changes_total{model_name="tiny",cache="fp16"}`:                            0,
		`kvq_route_percent{model_name="tiny",cache="int8",match=""}`:                         0,
		`kvq:request_success_total{model_name="tiny",cache="int8",finished_reason="length"}`: float64(10 + want),
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	post(`{"cache": "int8", "percent": 12.5}`)
	if m := scrape(t, f); m[`kvq_route_percent{model_name="tiny",cache="int8",match=""}`] != 12.5 {
		t.Errorf("kvq_route_percent after 12.5: %v", m[`kvq_route_percent{model_name="tiny",cache="int8",match=""}`])
	}
}

// TestAdminRouteErrors: the admin endpoint takes only the server's key
// (401 otherwise, 403 on a server without one), refuses unknown caches
// (404), bad percentages and bodies (400), unknown matches (404), shares
// over 100% (400), and other methods (405); a match narrows a change to
// one route; a cache without a route gets one.
func TestAdminRouteErrors(t *testing.T) {
	open := newServer(t, serve.Options{})
	code, _, b := open.admin(t, http.MethodGet, "")
	wantError(t, "no API key", code, b, 403, "permission_error", "admin_disabled", "", "API key", "--api-key")
	code, _, b = open.admin(t, http.MethodPost, `{"cache": "int8", "percent": 0}`, "Authorization", "Bearer x")
	wantError(t, "no API key, POST", code, b, 403, "permission_error", "admin_disabled", "")

	f := newServer(t, serve.Options{APIKey: "adm", Routes: []serve.Route{
		{Cache: "int8", Share: 1, Match: serve.Match{Header: "X-Tenant", Value: "acme"}},
		{Cache: "int8", Share: 0.5, Match: serve.Match{Key: "sk-t"}},
		{Cache: "int8", Share: 0.6},
	}})
	auth := []string{"Authorization", "Bearer adm"}
	for _, tc := range []struct {
		name, method, body string
		hdr                []string
		status             int
		typ, code, param   string
	}{
		{"no key", http.MethodGet, "", nil, 401, "authentication_error", "invalid_api_key", ""},
		{"wrong key", http.MethodPost, `{"cache": "int8", "percent": 0}`, []string{"Authorization", "Bearer nope"}, 401, "authentication_error", "invalid_api_key", ""},
		{"tenant key", http.MethodPost, `{"cache": "int8", "percent": 0}`, []string{"Authorization", "Bearer sk-t"}, 401, "authentication_error", "invalid_api_key", ""},
		{"unknown cache", http.MethodPost, `{"cache": "int4", "percent": 0}`, auth, 404, "invalid_request_error", "cache_not_found", "cache"},
		{"percent over", http.MethodPost, `{"cache": "int8", "percent": 120}`, auth, 400, "invalid_request_error", "invalid_value", "percent"},
		{"percent negative", http.MethodPost, `{"cache": "int8", "percent": -1}`, auth, 400, "invalid_request_error", "invalid_value", "percent"},
		{"percent missing", http.MethodPost, `{"cache": "int8"}`, auth, 400, "invalid_request_error", "invalid_value", "percent"},
		{"percent a string", http.MethodPost, `{"cache": "int8", "percent": "10"}`, auth, 400, "invalid_request_error", "invalid_type", "percent"},
		{"cache missing", http.MethodPost, `{"percent": 10}`, auth, 400, "invalid_request_error", "invalid_value", "cache"},
		{"unknown field", http.MethodPost, `{"cache": "int8", "share": 10}`, auth, 400, "invalid_request_error", "invalid_value", "share"},
		{"malformed", http.MethodPost, `{"cache": `, auth, 400, "invalid_request_error", "invalid_json", ""},
		{"unknown match", http.MethodPost, `{"cache": "int8", "percent": 0, "match": "header=X-Tenant:other"}`, auth, 404, "invalid_request_error", "route_not_found", "match"},
		{"over 100%", http.MethodPost, `{"cache": "fp16", "percent": 50}`, auth, 400, "invalid_request_error", "invalid_value", "percent"},
		{"method", http.MethodPut, `{}`, auth, 405, "invalid_request_error", "method_not_allowed", ""},
	} {
		code, b := f.do(t, tc.method, "/admin/route", tc.body, tc.hdr...)
		wantError(t, tc.name, code, b, tc.status, tc.typ, tc.code, tc.param)
	}
	// The key shows as its fingerprint; a match narrows the change.
	code, r, b := f.admin(t, http.MethodGet, "", auth...)
	fp := "key=" + serve.KeyFingerprint("sk-t")
	if code != 200 || len(r.Routes) != 3 || r.Routes[1].Match != fp || strings.Contains(string(b), "sk-t\"") || r.Routes[0].Match != "header=X-Tenant:acme" {
		t.Fatalf("GET: %d %s", code, b)
	}
	code, r, b = f.admin(t, http.MethodPost, `{"cache": "int8", "percent": 0, "match": "`+fp+`"}`, auth...)
	if code != 200 || len(r.Changed) != 1 || r.Changed[0].Match != fp || r.Routes[1].Percent != 0 || r.Routes[0].Percent != 100 || r.Routes[2].Percent != 60 {
		t.Fatalf("POST with a match: %d %s", code, b)
	}
	// Without a match, every route to the cache.
	code, r, b = f.admin(t, http.MethodPost, `{"cache": "int8", "percent": 0}`, auth...)
	if code != 200 || len(r.Changed) != 3 {
		t.Fatalf("POST for every route: %d %s", code, b)
	}
	if c := f.cacheOf(t, "tiny", append(auth, "X-Tenant", "acme")...); c != "fp16" {
		t.Errorf("tenant acme after int8 went to 0%%: %s", c)
	}
	// A cache without a route gets one for every request.
	code, r, b = f.admin(t, http.MethodPost, `{"cache": "fp16", "percent": 100}`, auth...)
	if code != 200 || len(r.Routes) != 4 || r.Routes[3].Cache != "fp16" || r.Routes[3].Match != "" || r.Changed[0].From != 0 {
		t.Fatalf("POST for a cache without a route: %d %s", code, b)
	}
}

// TestFaultDelay: --fault-delay's wait comes before the first token: the
// client's time to the first streamed byte and the TTFT the metrics
// record both exceed it (no upper bound is asserted: the machine may be
// loaded).
func TestFaultDelay(t *testing.T) {
	const delay = 150 * time.Millisecond
	f := newServer(t, serve.Options{Fault: serve.Fault{Delay: delay, Cache: "int8"}})
	for range 2 {
		begin := time.Now()
		resp, err := f.client.Post(f.url+"/v1/completions", "application/json", strings.NewReader(`{"model": "tiny@int8", "prompt": [1, 2], "max_tokens": 2, "stream": true}`))
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, 1)
		_, err = io.ReadFull(resp.Body, first)
		ttfb := time.Since(begin)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || ttfb < delay || resp.Header.Get(serve.CacheHeader) != "int8" {
			t.Errorf("first byte after %v (%v), cache %q; want ≥ %v", ttfb, err, resp.Header.Get(serve.CacheHeader), delay)
		}
	}
	f.cacheOf(t, "tiny@fp16")
	m := scrape(t, f)
	lbl := `{model_name="tiny",cache="int8"}`
	if n, sum := m["kvq:time_to_first_token_seconds_count"+lbl], m["kvq:time_to_first_token_seconds_sum"+lbl]; n != 2 || sum < 2*delay.Seconds() {
		t.Errorf("int8 TTFT: %v requests, sum %vs; want 2, ≥ %vs", n, sum, 2*delay.Seconds())
	}
	if b := m[`kvq:time_to_first_token_seconds_bucket{model_name="tiny",cache="int8",le="0.1"}`]; b != 0 {
		t.Errorf("int8 TTFT: %v requests under 0.1 s with a %v delay", b, delay)
	}
	if n := m[`kvq:time_to_first_token_seconds_count{model_name="tiny",cache="fp16"}`]; n != 1 {
		t.Errorf("fp16 TTFT count %v", n)
	}
}

// TestFaultErrors: --fault-error-rate fails the completions the seeded
// draws pick with a 500 (an OpenAI error naming the injected fault, the
// cache header set), counted as finished_reason "error"; with a cache
// given, the other cache never fails.
func TestFaultErrors(t *testing.T) {
	const seed, rate, n = 3, 0.4, 30
	f := newServer(t, serve.Options{Fault: serve.Fault{ErrorRate: rate, Seed: seed, Cache: "int8"}})
	want, failed := 0, 0
	for k := range uint64(n) {
		if draw(seed, k) < rate {
			want++
		}
		body := `{"model": "tiny@int8", "prompt": [1, 2], "max_tokens": 1, "ignore_eos": true}`
		if k%3 == 0 {
			body = `{"model": "tiny@int8", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "ignore_eos": true}`
		}
		path := "/v1/completions"
		if k%3 == 0 {
			path = "/v1/chat/completions"
		}
		code, hdr, b := f.post(t, path, body)
		switch {
		case code == 500:
			failed++
			wantError(t, "injected", code, b, 500, "server_error", "injected_fault", "", "injected")
			if hdr.Get(serve.CacheHeader) != "int8" {
				t.Errorf("500 without the cache header: %q", hdr.Get(serve.CacheHeader))
			}
		case code != 200:
			t.Fatalf("status %d: %s", code, b)
		}
		if (code == 500) != (draw(seed, k) < rate) {
			t.Errorf("request %d: status %d, draw %v", k, code, draw(seed, k))
		}
	}
	if failed != want || want == 0 || want == n {
		t.Errorf("%d of %d failed, the draws say %d", failed, n, want)
	}
	for range 10 {
		f.cacheOf(t, "tiny@fp16")
	}
	m := scrape(t, f)
	errs := func(c string) float64 {
		return m[`kvq:request_success_total{model_name="tiny",cache="`+c+`",finished_reason="error"}`]
	}
	if errs("int8") != float64(want) || errs("fp16") != 0 {
		t.Errorf("error counters: int8 %v, fp16 %v; want %d, 0", errs("int8"), errs("fp16"), want)
	}
	if ok := m[`kvq:request_success_total{model_name="tiny",cache="int8",finished_reason="length"}`]; ok != float64(n-want) {
		t.Errorf("int8 finished %v, want %d", ok, n-want)
	}
}

// TestRouteOptions: New refuses routes it cannot follow and accepts a
// model alias split over two caches.
func TestRouteOptions(t *testing.T) {
	e := startEngine(t, loadModel(t), engine.Options{})
	acme := serve.Match{Header: "X-Tenant", Value: "acme"}
	for _, tc := range []struct {
		name   string
		routes []serve.Route
	}{
		{"unknown cache", []serve.Route{{Cache: "int4", Share: 0.1}}},
		{"share over 1", []serve.Route{{Cache: "int8", Share: 1.1, Match: acme}}},
		{"group over 1", []serve.Route{{Cache: "int8", Share: 0.6, Match: acme}, {Cache: "fp16", Share: 0.6, Match: acme}}},
		{"twice", []serve.Route{{Cache: "int8", Share: 0.1, Match: acme}, {Cache: "int8", Share: 0.1, Match: acme}}},
		{"two conditions", []serve.Route{{Cache: "int8", Share: 0.1, Match: serve.Match{Key: "k", Model: "m"}}}},
		{"header not canonical", []serve.Route{{Cache: "int8", Share: 0.1, Match: serve.Match{Header: "x-tenant", Value: "a"}}}},
		{"model with @", []serve.Route{{Cache: "int8", Share: 0.1, Match: serve.Match{Model: "tiny@int8"}}}},
	} {
		if _, err := serve.New(e, serve.Options{Routes: tc.routes}); !errors.Is(err, serve.ErrOptions) {
			t.Errorf("%s: New = %v, want ErrOptions", tc.name, err)
		}
	}
	if _, err := serve.New(e, serve.Options{Routes: []serve.Route{{Cache: "int8", Share: 0.4, Match: acme}}, Route: map[string]float64{"int8": 0.1}}); err != nil {
		t.Errorf("a tenant route and a plain one: %v", err)
	}
	s, err := serve.New(e, serve.Options{Routes: []serve.Route{
		{Cache: "int8", Share: 0.5, Match: serve.Match{Model: "canary"}},
		{Cache: "fp16", Share: 0.5, Match: serve.Match{Model: "canary"}},
	}})
	if err != nil || !slices.Equal(s.ModelIDs(), []string{"tiny", "tiny@fp16", "tiny@int8", "canary"}) {
		t.Errorf("an alias over two caches: %v, ids %v", err, s.ModelIDs())
	}
	for _, tc := range []struct {
		in   string
		want serve.Match
		str  string
	}{
		{"header=x-tenant:acme", acme, "header=X-Tenant:acme"},
		{"HEADER= X-Tenant : acme ", acme, "header=X-Tenant:acme"},
		{"key=sk-1", serve.Match{Key: "sk-1"}, "key=" + serve.KeyFingerprint("sk-1")},
		{"model=canary", serve.Match{Model: "canary"}, "model=canary"},
		{"", serve.Match{}, ""},
	} {
		m, err := serve.ParseMatch(tc.in)
		if err != nil || m != tc.want || m.String() != tc.str {
			t.Errorf("ParseMatch(%q) = %+v %q, %v; want %+v %q", tc.in, m, m.String(), err, tc.want, tc.str)
		}
	}
	for _, bad := range []string{"header=X-Tenant", "header=:a", "header=X Y:a", "header=Authorization:Bearer x", "key=", "model=", "model=a@b", "tenant=acme", "acme"} {
		if _, err := serve.ParseMatch(bad); err == nil {
			t.Errorf("ParseMatch(%q): no error", bad)
		}
	}
	if fp := serve.KeyFingerprint("sk-1"); len(fp) != len("sha256:")+12 || strings.Contains(fp, "sk-1") {
		t.Errorf("fingerprint %q", fp)
	}
}

// TestAdminRouteConcurrent: shares change while requests stream in (for
// the race detector): every request is served by one of the caches.
func TestAdminRouteConcurrent(t *testing.T) {
	f := newServer(t, serve.Options{APIKey: "adm", Route: map[string]float64{"int8": 0.5}})
	auth := []string{"Authorization", "Bearer adm"}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if c := f.cacheOf(t, "tiny", auth...); c != "fp16" && c != "int8" {
					t.Errorf("cache %q", c)
				}
			}
		}()
	}
	for i := range 10 {
		if code, _, b := f.admin(t, http.MethodPost, fmt.Sprintf(`{"cache": "int8", "percent": %d}`, i*10), auth...); code != 200 {
			t.Errorf("POST: %d %s", code, b)
		}
		f.admin(t, http.MethodGet, "", auth...)
		scrape(t, f)
	}
	wg.Wait()
}
