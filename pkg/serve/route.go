package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Route sends a share of the requests for the served name to a cache: a
// canary. With a Match it applies only to the requests the match selects
// (one tenant, one API key, one requested model id).
//
// The cache of a request for the served name (or a Match.Model alias) is
// drawn deterministically: the routes whose Match is the same form a
// group; a request belongs to the group of the first route (in the order
// given) whose non-zero Match selects it, or, when none does, to the group
// of the routes without a Match. The request's draw u in [0, 1), the k-th
// routed request's being the first output of a PCG seeded with
// (Options.RouteSeed, k), falls on the group's routes in order, each
// covering its Share; past them (and with no group) it goes to the
// engine's first cache. NAME@CACHE requests are never routed.
type Route struct {
	Cache string
	Share float64 // 0..1; a group's shares sum to at most 1
	Match Match
}

// Match selects requests for a Route. Exactly one of Header, Key and
// Model is set; the zero Match selects every request.
type Match struct {
	// Header and Value: the request has header Header (canonical form)
	// with the value Value (one of its values, compared exactly).
	Header, Value string
	// Key: the request's bearer token ("Authorization: Bearer KEY") is
	// Key. A server with an APIKey accepts Key on /v1/ paths too (a tenant
	// key); Key is never printed (String shows a fingerprint).
	Key string
	// Model: the request asks for the model id Model. An id other than
	// the served name is an alias the server answers and lists in
	// /v1/models.
	Model string
}

// ParseMatch parses a match as kvq serve's --route spells it:
// "header=NAME:VALUE", "key=KEY" or "model=ID"; "" is the zero Match.
func ParseMatch(s string) (Match, error) {
	if s == "" {
		return Match{}, nil
	}
	kind, val, ok := strings.Cut(s, "=")
	kind = strings.ToLower(strings.TrimSpace(kind))
	if !ok {
		return Match{}, fmt.Errorf("match %q: want header=NAME:VALUE, key=KEY or model=ID", s)
	}
	switch kind {
	case "header":
		name, value, ok := strings.Cut(val, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || !validHeaderName(name) {
			return Match{}, fmt.Errorf("match %q: want header=NAME:VALUE, e.g. header=X-Tenant:acme", s)
		}
		if strings.EqualFold(name, "Authorization") {
			return Match{}, fmt.Errorf("match %q: match an API key with key=KEY, not the Authorization header", s)
		}
		return Match{Header: http.CanonicalHeaderKey(name), Value: strings.TrimSpace(value)}, nil
	case "key":
		if strings.TrimSpace(val) == "" {
			return Match{}, fmt.Errorf("match %q: empty key", s)
		}
		return Match{Key: strings.TrimSpace(val)}, nil
	case "model":
		id := strings.TrimSpace(val)
		if id == "" || strings.Contains(id, "@") {
			return Match{}, fmt.Errorf("match %q: want model=ID, an id without '@' (NAME@CACHE is never routed)", s)
		}
		return Match{Model: id}, nil
	}
	return Match{}, fmt.Errorf("match %q: unknown kind %q (want header=NAME:VALUE, key=KEY or model=ID)", s, kind)
}

// validHeaderName reports whether name is an HTTP token.
func validHeaderName(name string) bool {
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// String is the match as ParseMatch reads it, but for a key: its
// fingerprint, "key=sha256:" and the first 12 hex digits of the key's
// SHA-256, so that logs, /metrics and GET /admin/route never show it.
func (m Match) String() string {
	switch {
	case m.Header != "":
		return "header=" + m.Header + ":" + m.Value
	case m.Key != "":
		return "key=" + KeyFingerprint(m.Key)
	case m.Model != "":
		return "model=" + m.Model
	}
	return ""
}

// KeyFingerprint is how a tenant key shows: "sha256:" and the first 12
// hex digits of its SHA-256.
func KeyFingerprint(key string) string {
	h := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(h[:6])
}

// check reports a Match that ParseMatch would not return.
func (m Match) check() error {
	n := 0
	for _, f := range []string{m.Header, m.Key, m.Model} {
		if f != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return fmt.Errorf("match %+v: set one of Header, Key and Model", m)
	case m.Value != "" && m.Header == "":
		return fmt.Errorf("match value %q without a header", m.Value)
	case m.Header != "" && (!validHeaderName(m.Header) || m.Header != http.CanonicalHeaderKey(m.Header)):
		return fmt.Errorf("match header %q: not a canonical header name (%s)", m.Header, http.CanonicalHeaderKey(m.Header))
	case strings.Contains(m.Model, "@"):
		return fmt.Errorf("match model %q: '@' separates a name from its cache", m.Model)
	}
	return nil
}

func (m Match) zero() bool { return m == Match{} }

// selects reports whether the non-zero m selects a request for model id
// (the served name when the request named none).
func (m Match) selects(r *http.Request, id string) bool {
	switch {
	case m.Header != "":
		for _, v := range r.Header.Values(m.Header) {
			if strings.TrimSpace(v) == m.Value {
				return true
			}
		}
		return false
	case m.Key != "":
		got, ok := bearer(r)
		return ok && subtle.ConstantTimeCompare([]byte(got), []byte(m.Key)) == 1
	case m.Model != "":
		return id == m.Model
	}
	return true
}

// bearer is a request's bearer token.
func bearer(r *http.Request) (string, bool) {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(got), ok
}

// draw is the k-th uniform draw in [0, 1) of the stream seed.
func draw(seed, k uint64) float64 {
	return float64(mrand.NewPCG(seed, k).Uint64()>>11) / (1 << 53)
}

// Routes returns the server's routes as they are now (the admin endpoint
// changes their shares).
func (s *Server) Routes() []Route {
	s.rmu.RLock()
	defer s.rmu.RUnlock()
	return append([]Route(nil), s.routes...)
}

// routed reports whether some route has a share above 0: requests for
// the served name may then go elsewhere than the first cache.
func (s *Server) routed() bool {
	s.rmu.RLock()
	defer s.rmu.RUnlock()
	for _, rt := range s.routes {
		if rt.Share > 0 {
			return true
		}
	}
	return false
}

// aliases are the model ids of the routes' Model matches other than the
// served name, in order, once each (set in New: the admin endpoint
// changes shares, never matches).
func (s *Server) aliases() []string { return s.aliasIDs }

// setMatches records the routes' aliases and tenant keys.
func (s *Server) setMatches() {
	for _, rt := range s.routes {
		if id := rt.Match.Model; id != "" && id != s.name && !slices.Contains(s.aliasIDs, id) {
			s.aliasIDs = append(s.aliasIDs, id)
		}
		if k := rt.Match.Key; k != "" {
			s.tenantKeys = append(s.tenantKeys, k)
		}
	}
}

// pick draws the cache of a request for model id (the served name or an
// alias), as Route describes.
func (s *Server) pick(r *http.Request, id string) string {
	s.rmu.RLock()
	defer s.rmu.RUnlock()
	if len(s.routes) == 0 {
		return s.caches[0]
	}
	var group Match
	for _, rt := range s.routes {
		if !rt.Match.zero() && rt.Match.selects(r, id) {
			group = rt.Match
			break
		}
	}
	u := draw(s.opts.RouteSeed, s.routeN.Add(1)-1)
	var acc float64
	for _, rt := range s.routes {
		if rt.Match != group {
			continue
		}
		acc += rt.Share
		if u < acc {
			return rt.Cache
		}
	}
	return s.caches[0]
}

// tenantKey reports whether a request's bearer token is a route's key.
func (s *Server) tenantKey(r *http.Request) bool {
	got, ok := bearer(r)
	if !ok || got == "" {
		return false
	}
	for _, k := range s.tenantKeys {
		if subtle.ConstantTimeCompare([]byte(got), []byte(k)) == 1 {
			return true
		}
	}
	return false
}

// RouteChange is one route's share changed through POST /admin/route.
type RouteChange struct {
	Time      time.Time
	Remote    string // the client's address
	UserAgent string
	Reason    string // the request's "reason", if any
	Cache     string
	Match     string // Match.String(); "" every request
	From, To  float64
}

// String is the change as one log line: when, what, who and why.
func (c RouteChange) String() string {
	what := c.Cache
	if c.Match != "" {
		what += " [" + c.Match + "]"
	}
	line := fmt.Sprintf("%s route %s %s%% → %s%% by %s", c.Time.UTC().Format(time.RFC3339), what, pct(c.From), pct(c.To), c.Remote)
	if c.UserAgent != "" {
		line += " (" + strconv.Quote(c.UserAgent) + ")"
	}
	if c.Reason != "" {
		line += ", reason " + strconv.Quote(c.Reason)
	}
	return line
}

// pct writes a share as a percentage, as short as it reads exactly.
func pct(share float64) string {
	return strconv.FormatFloat(toPercent(share), 'g', -1, 64)
}

// toPercent turns a share into a percentage without float noise in the
// last digits (0.07 → 7, not 7.000000000000001).
func toPercent(share float64) float64 {
	p, _ := strconv.ParseFloat(strconv.FormatFloat(share*100, 'g', 12, 64), 64)
	return p
}
