package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// userAgent names kvq canary's admin requests in kvq serve's route log.
const userAgent = "kvq-canary"

// maxReason is the longest reason kvq serve's admin endpoint takes.
const maxReason = 500

// SetRoute sets the share of cache in a kvq serve --route to percent
// (0..100) through the server's admin endpoint, POST /admin/route with
// {"cache": CACHE, "percent": N, "reason": REASON} and the server's API
// key; the server logs the reason with the change (cut to 500 bytes;
// "" sends none). The Action records the outcome; it is never an error,
// so that a watch goes on judging when the switch fails.
func SetRoute(ctx context.Context, client *http.Client, baseURL, apiKey, cache string, percent float64, reason string) Action {
	u := adminURL(baseURL)
	a := Action{Time: time.Now().UTC(), URL: u, Cache: cache, Percent: percent}
	set := map[string]any{"cache": cache, "percent": percent}
	if reason != "" {
		set["reason"] = cutUTF8(reason, maxReason)
	}
	body, _ := json.Marshal(set)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		a.Error = fmt.Sprintf("%v: %v", ErrAct, err)
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		a.Error = fmt.Sprintf("%v: %v", ErrAct, err)
		return a
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	a.Status = resp.StatusCode
	a.OK = resp.StatusCode/100 == 2
	if !a.OK {
		a.Error = fmt.Sprintf("%v: HTTP %d: %s", ErrAct, resp.StatusCode, apiMessage(msg))
	}
	return a
}

// cutUTF8 is s cut to at most n bytes, at a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// CheckRoute asks the candidate kvq serve's admin endpoint (GET
// /admin/route with apiKey) whether SetRoute can move cache's share: the
// key must be the server's API key and cache must have a route. Run it
// before a watch that acts, so that a wrong key or cache is found before
// a rollback needs the switch. A refusal (401, 403, 404: no admin
// endpoint, or no route to cache) is an input error (kvqerr.IsInput); a
// server that cannot be reached is not.
func CheckRoute(ctx context.Context, client *http.Client, baseURL, apiKey, cache string) error {
	u := adminURL(baseURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAct, err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	req.Header.Set("User-Agent", userAgent)
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrAct, u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	msg := apiMessage(body)
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return kvqerr.Input(fmt.Errorf("%w: GET %s: HTTP 401: the API key is not the candidate server's (%s)", ErrAct, u, msg))
	case resp.StatusCode == http.StatusForbidden:
		return kvqerr.Input(fmt.Errorf("%w: GET %s: HTTP 403: %s", ErrAct, u, msg))
	case resp.StatusCode == http.StatusNotFound:
		return kvqerr.Input(fmt.Errorf("%w: GET %s: HTTP 404: the candidate has no admin route endpoint (acting needs a kvq serve with --route)", ErrAct, u))
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("%w: GET %s: HTTP %d: %s", ErrAct, u, resp.StatusCode, msg)
	}
	var list struct {
		Routes []struct {
			Cache   string  `json:"cache"`
			Percent float64 `json:"percent"`
			Match   string  `json:"match"`
		} `json:"routes"`
		Fallback string `json:"fallback"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrAct, u, err)
	}
	var have []string
	for _, r := range list.Routes {
		if r.Cache == cache {
			return nil
		}
		have = append(have, r.Cache)
	}
	routes := "none"
	if len(have) > 0 {
		routes = strings.Join(have, ", ")
	}
	return kvqerr.Input(fmt.Errorf("%w: the candidate server has no route to cache %q (its routes: %s; the fallback is %s)", ErrAct, cache, routes, list.Fallback))
}

// adminURL is the admin route endpoint of a server's base URL.
func adminURL(baseURL string) string {
	return strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1") + "/admin/route"
}

// apiMessage is an OpenAI-style error body's message, or the body.
func apiMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(body))
}
