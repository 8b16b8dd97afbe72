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
)

// SetRoute sets the share of cache in a kvq serve --route to percent
// (0..100) through the server's admin endpoint, POST /admin/route with
// {"cache": CACHE, "percent": N} and the server's API key. The Action
// records the outcome; it is never an error, so that a watch goes on
// judging when the switch fails.
func SetRoute(ctx context.Context, client *http.Client, baseURL, apiKey, cache string, percent float64) Action {
	u := strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1") + "/admin/route"
	a := Action{Time: time.Now().UTC(), URL: u, Cache: cache, Percent: percent}
	body, _ := json.Marshal(map[string]any{"cache": cache, "percent": percent})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		a.Error = fmt.Sprintf("%v: %v", ErrAct, err)
		return a
	}
	req.Header.Set("Content-Type", "application/json")
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
		a.Error = fmt.Sprintf("%v: HTTP %d: %s", ErrAct, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return a
}
