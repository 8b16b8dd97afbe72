package eval

import (
	"context"
	"math"
	"os"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/openai"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/spf13/cobra"
)

// validateEndpoints checks the endpoint mode's flags: two or more
// servers, and none of the flags that only a local run has.
func (o *Options) validateEndpoints(cmd *cobra.Command) error {
	o.ends = nil
	if len(o.Endpoints) == 0 {
		return nil
	}
	ends, err := cmdutil.ParseEndpoints(o.Endpoints)
	if err != nil {
		return err
	}
	if len(ends) < 2 {
		return cmdutil.FlagErrorf("--endpoint: give a baseline and at least one candidate (--endpoint fp16=URL --endpoint fp8=URL2)")
	}
	for _, f := range []string{"cache", "prefill", "step", "k-order", "max-slowdown", "f32-activations"} {
		if cmd.Flags().Changed(f) {
			return cmdutil.FlagErrorf("--%s with --endpoint: the servers' caches are evaluated as they serve them", f)
		}
	}
	if o.TopLogprobs < 1 || o.TopLogprobs > 20 {
		return cmdutil.FlagErrorf("--top-logprobs %d: must be in 1..20", o.TopLogprobs)
	}
	if o.Concurrency < 1 {
		return cmdutil.FlagErrorf("--concurrency %d: must be positive", o.Concurrency)
	}
	o.ends = ends
	o.NoSpeed = true // a server's speed is kvq bench --endpoint's
	return nil
}

// runEndpoints evaluates the servers with the suites and texts of opts.
func (o *Options) runEndpoints(ctx context.Context, m *runtime.Model, opts eval.Options) (*eval.Report, error) {
	eo := eval.EndpointOptions{Texts: opts.Texts, TextOpts: opts.TextOpts, TopK: o.TopLogprobs, Suites: opts.Suites, Gates: opts.Gates,
		Refusal: opts.Refusal, Concurrency: o.Concurrency, Store: opts.Store, Progress: opts.Progress, LogSamples: opts.LogSamples, Seed: opts.Seed}
	for _, e := range o.ends {
		c, err := e.Client(ctx, os.Getenv(o.EndpointKey), o.EndpointMdl, o.Timeout, o.IO.ErrOut)
		if err != nil {
			return nil, err
		}
		c.Retries = 2
		eo.Names, eo.URLs, eo.Models = append(eo.Names, e.Name), append(eo.URLs, e.URL), append(eo.Models, c.Model)
		eo.Deployments = append(eo.Deployments, deployment{c})
	}
	return eval.RunEndpoints(ctx, m, eo)
}

// deployment is a server behind pkg/openai's client: prompts go as
// token ids, greedy, unstreamed.
type deployment struct{ c *openai.Client }

func (d deployment) Generate(ctx context.Context, prompt []int, maxTokens int) (string, error) {
	comp, err := d.c.Complete(ctx, openai.CompletionRequest{PromptTokens: prompt, MaxTokens: maxTokens, Temperature: openai.Ptr(0.0), NoStream: true}, nil)
	return comp.Text, err
}

func (d deployment) ScorePrompt(ctx context.Context, prompt []int, topK int) ([]eval.ScoredToken, error) {
	lps, err := d.c.PromptTokenLogprobs(ctx, prompt, topK)
	if err != nil {
		return nil, err
	}
	out := make([]eval.ScoredToken, len(lps))
	for i, t := range lps {
		st := eval.ScoredToken{Token: t.Token, Logprob: t.Logprob, Top: make(map[string]float64, len(t.Top))}
		for _, a := range t.Top {
			if v, ok := st.Top[a.Token]; !ok || a.Logprob > v {
				st.Top[a.Token] = a.Logprob
			}
		}
		if i == 0 {
			st.Logprob = math.NaN()
		}
		out[i] = st
	}
	return out, nil
}
