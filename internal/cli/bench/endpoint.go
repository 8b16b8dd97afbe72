package bench

import (
	"context"
	"strings"

	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
)

// endpoint is one --endpoint NAME=URL.
type endpoint struct{ name, url string }

func parseEndpoints(list []string) ([]endpoint, error) {
	var out []endpoint
	for i, e := range list {
		name, url, ok := strings.Cut(e, "=")
		if !ok || strings.Contains(name, "/") {
			name, url = "", e
		}
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return nil, cmdutil.FlagErrorf("--endpoint %q: want NAME=URL or URL with http:// or https://", e)
		}
		if name == "" {
			name = "endpoint" + string(rune('1'+i))
		}
		out = append(out, endpoint{name: name, url: strings.TrimRight(url, "/")})
	}
	return out, nil
}

func (o *Options) endpointTargets(ctx context.Context) ([]namedTarget, error) {
	return nil, cmdutil.FlagErrorf("--endpoint: not built yet")
}
