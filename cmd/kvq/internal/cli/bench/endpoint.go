package bench

import (
	"context"
	"os"

	"github.com/kvqlabs/kvq/pkg/bench"
)

// endpointTargets makes a client per endpoint and finds the model id each
// serves.
func (o *Options) endpointTargets(ctx context.Context, tok bench.Tokenizer) ([]bench.Target, error) {
	var out []bench.Target
	for _, e := range o.ends {
		c, err := e.Client(ctx, os.Getenv(o.EndpointKey), o.EndpointMdl, o.Timeout, o.IO.ErrOut)
		if err != nil {
			return nil, err
		}
		c.Retries = o.Retries
		out = append(out, &bench.EndpointTarget{Label: e.Name, Client: c, Chat: o.Chat, Tokenizer: tok})
	}
	return out, nil
}
