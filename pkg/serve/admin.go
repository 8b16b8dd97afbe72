package serve

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// AdminRoutePath is the admin endpoint of the routes: GET lists them,
// POST sets a cache's share (the one switch of a canary).
const AdminRoutePath = "/admin/route"

// maxAdminBody bounds a POST /admin/route body.
const maxAdminBody = 64 << 10

// typePermission is the error type of a 403.
const typePermission = "permission_error"

// routeEntry is a route in the admin endpoint's JSON.
type routeEntry struct {
	Cache   string  `json:"cache"`
	Percent float64 `json:"percent"`
	Match   string  `json:"match"` // Match.String(); "" every request
}

// routeChange is a change in a POST's answer.
type routeChange struct {
	Cache string  `json:"cache"`
	Match string  `json:"match"`
	From  float64 `json:"from"`
	To    float64 `json:"to"`
}

// routeList is GET /admin/route's answer, and POST's with the changes.
type routeList struct {
	Routes []routeEntry `json:"routes"`
	// Fallback is the cache of the requests no route takes (the first).
	Fallback string        `json:"fallback"`
	Changed  []routeChange `json:"changed,omitempty"`
}

// routeSet is a POST /admin/route body.
type routeSet struct {
	Cache   *string  `json:"cache"`
	Percent *float64 `json:"percent"`
	Match   *string  `json:"match"`
	Reason  string   `json:"reason"`
}

// adminRoute serves /admin/route. It needs the server's API key
// (Options.APIKey; a route's tenant key is not enough); a server
// without one answers 403.
func (s *Server) adminRoute(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.opts.APIKey == "":
		s.fail(w, &apiError{status: http.StatusForbidden, typ: typePermission, code: "admin_disabled",
			message: "the admin endpoints need the server's API key: start the server with one (kvq serve --api-key or $KVQ_API_KEY) and send it as 'Authorization: Bearer KEY'"})
		return
	case !s.adminAuthorized(r):
		s.fail(w, &apiError{status: http.StatusUnauthorized, message: "missing or incorrect API key: the admin endpoints take the server's API key as 'Authorization: Bearer KEY'", typ: typeAuth, code: "invalid_api_key"})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.writeJSON(w, http.StatusOK, s.routeList(nil))
	case http.MethodPost:
		s.setRoute(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.fail(w, &apiError{status: http.StatusMethodNotAllowed, message: fmt.Sprintf("method %s not allowed on %s (use GET or POST)", r.Method, AdminRoutePath), typ: typeInvalid, code: "method_not_allowed"})
	}
}

// adminAuthorized reports whether r carries the server's API key.
func (s *Server) adminAuthorized(r *http.Request) bool {
	got, ok := bearer(r)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.APIKey)) == 1
}

func (s *Server) routeList(changed []routeChange) routeList {
	l := routeList{Routes: []routeEntry{}, Fallback: s.caches[0], Changed: changed}
	for _, rt := range s.Routes() {
		l.Routes = append(l.Routes, routeEntry{Cache: rt.Cache, Percent: toPercent(rt.Share), Match: rt.Match.String()})
	}
	return l
}

// setRoute serves POST /admin/route: {"cache": NAME, "percent": N} sets
// the share of every route to NAME (a cache without a route gets one
// for every request); "match" (as GET lists it) narrows it to one route.
func (s *Server) setRoute(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		s.fail(w, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("reading the request body: %v", err), typ: typeInvalid, code: "invalid_body"})
		return
	}
	var req routeSet
	if e := decodeJSON(body, &req); e != nil {
		s.fail(w, e)
		return
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(body, &fields)
	for k := range fields {
		if !slices.Contains([]string{"cache", "percent", "match", "reason"}, k) {
			s.fail(w, badParam(k, "unknown field %q (the body is {\"cache\": NAME, \"percent\": 0..100}, optionally \"match\" and \"reason\")", k))
			return
		}
	}
	switch {
	case req.Cache == nil || *req.Cache == "":
		s.fail(w, badParam("cache", "cache: required, the name of one of the server's caches (%s)", strings.Join(s.caches, ", ")))
		return
	case req.Percent == nil:
		s.fail(w, badParam("percent", "percent: required, a number in [0, 100]"))
		return
	case !(*req.Percent >= 0 && *req.Percent <= 100) || math.IsNaN(*req.Percent):
		s.fail(w, badParam("percent", "percent %v: must be in [0, 100]", *req.Percent))
		return
	case len(req.Reason) > 500:
		s.fail(w, badParam("reason", "reason: %d bytes, over 500", len(req.Reason)))
		return
	}
	cache := *req.Cache
	if !slices.Contains(s.caches, cache) {
		s.fail(w, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("no cache %q on this server (it has %s)", cache, strings.Join(s.caches, ", ")), typ: typeInvalid, param: "cache", code: "cache_not_found"})
		return
	}
	share := *req.Percent / 100
	changed, e := s.applyRoute(cache, req.Match, share)
	if e != nil {
		s.fail(w, e)
		return
	}
	now := time.Now()
	for _, c := range changed {
		ch := RouteChange{Time: now, Remote: r.RemoteAddr, UserAgent: r.UserAgent(), Reason: req.Reason, Cache: c.Cache, Match: c.Match, From: c.From / 100, To: c.To / 100}
		if s.opts.OnRouteChange != nil {
			s.opts.OnRouteChange(ch)
		} else {
			s.log.Info("serve: route change", "change", ch.String())
		}
	}
	s.metrics.routeChanged(cache)
	s.writeJSON(w, http.StatusOK, s.routeList(changed))
}

// applyRoute sets the share of cache's routes (those with match's
// string when match is given), adding a route for every request when
// cache has none and match is not given. A group's shares may not sum
// over 1.
func (s *Server) applyRoute(cache string, match *string, share float64) ([]routeChange, *apiError) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	next := append([]Route(nil), s.routes...)
	var hit []int
	for i, rt := range next {
		if rt.Cache == cache && (match == nil || rt.Match.String() == *match) {
			hit = append(hit, i)
		}
	}
	switch {
	case len(hit) == 0 && match != nil && *match != "":
		var have []string
		for _, rt := range next {
			if rt.Cache == cache {
				have = append(have, fmt.Sprintf("%q", rt.Match.String()))
			}
		}
		msg := fmt.Sprintf("no route to cache %s matching %q", cache, *match)
		if len(have) > 0 {
			msg += " (its routes match " + strings.Join(have, ", ") + ")"
		}
		return nil, &apiError{status: http.StatusNotFound, message: msg, typ: typeInvalid, param: "match", code: "route_not_found"}
	case len(hit) == 0:
		next = append(next, Route{Cache: cache})
		hit = []int{len(next) - 1}
	}
	for _, i := range hit {
		next[i].Share = share
	}
	if m, sum, over := overGroup(next); over {
		group := ""
		if !m.zero() {
			group = " for " + m.String()
		}
		return nil, badParam("percent", "percent %v for %s: the shares%s would sum to %v%%, over 100%%", toPercent(share), cache, group, toPercent(sum))
	}
	var out []routeChange
	for _, i := range hit {
		from := 0.0
		if i < len(s.routes) {
			from = s.routes[i].Share
		}
		out = append(out, routeChange{Cache: cache, Match: next[i].Match.String(), From: toPercent(from), To: toPercent(share)})
	}
	s.routes = next
	return out, nil
}

// overGroup finds a group whose shares sum over 1: its match and sum.
func overGroup(routes []Route) (Match, float64, bool) {
	sums := map[Match]float64{}
	var order []Match
	for _, rt := range routes {
		if _, ok := sums[rt.Match]; !ok {
			order = append(order, rt.Match)
		}
		sums[rt.Match] += rt.Share
	}
	for _, m := range order {
		if sums[m] > 1+1e-9 {
			return m, sums[m], true
		}
	}
	return Match{}, 0, false
}
