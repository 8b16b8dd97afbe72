package cmdutil

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/pkg/openai"
)

// Endpoint is one --endpoint NAME=URL (or URL, named endpointN).
type Endpoint struct {
	Name, URL string
	// Named is set when the flag gave the name.
	Named bool
}

// ParseEndpoints reads --endpoint values: NAME=URL or URL, http or
// https, names unique.
func ParseEndpoints(list []string) ([]Endpoint, error) {
	var out []Endpoint
	seen := map[string]bool{}
	for i, e := range list {
		name, url, ok := strings.Cut(e, "=")
		if !ok || strings.Contains(name, "/") {
			name, url = "", e
		}
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return nil, FlagErrorf("--endpoint %q: want NAME=URL or URL with http:// or https://", e)
		}
		named := name != ""
		if !named {
			name = fmt.Sprintf("endpoint%d", i+1)
		}
		if seen[name] {
			return nil, FlagErrorf("--endpoint: name %q given twice", name)
		}
		seen[name] = true
		out = append(out, Endpoint{Name: name, URL: strings.TrimRight(url, "/"), Named: named})
	}
	return out, nil
}

// Client makes e's client. With no model given it asks the server's
// /v1/models and takes the first id, or the one ending in "@NAME" (kvq
// serve lists NAME@CACHE per cache, so an endpoint named after a cache
// picks that one). When e was named, the server lists per-cache ids (with
// an @) and none ends in "@NAME", it writes a warning to warn: the first
// id, which it then takes, serves another cache than the name says.
func (e Endpoint) Client(ctx context.Context, apiKey, model string, timeout time.Duration, warn io.Writer) (*openai.Client, error) {
	c := &openai.Client{BaseURL: e.URL, APIKey: apiKey, Model: model, HTTP: &http.Client{}, Timeout: timeout}
	if c.Model != "" {
		return c, nil
	}
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ms, err := c.Models(mctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("--endpoint %s: %w", e.URL, err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("--endpoint %s: /v1/models lists no model; give --served-model", e.URL)
	}
	c.Model = ms[0].ID
	found, perCache := false, false
	var ids []string
	for _, m := range ms {
		if strings.HasSuffix(m.ID, "@"+e.Name) {
			c.Model, found = m.ID, true
		}
		perCache = perCache || strings.Contains(m.ID, "@")
		ids = append(ids, m.ID)
	}
	if e.Named && perCache && !found && warn != nil {
		fmt.Fprintf(warn, "kvq: warning: --endpoint %s=%s: the server lists no model ending in @%s (it lists %s): requests go to %s, another model or cache than %s (give --served-model to choose)\n",
			e.Name, e.URL, e.Name, strings.Join(ids, ", "), c.Model, e.Name)
	}
	return c, nil
}
