package plan

import (
	"context"
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Evidence names what Assemble reads or measures before it builds the
// plan: request lengths, the running service and earlier kvq results.
type Evidence struct {
	// Trace is a request-length file (ReadTrace); when empty, Lengths
	// (typical lengths the user states, or nil) stand in for it.
	Trace   string
	Lengths *Traffic
	// Scrape configures the sampling of Options.Endpoint's metrics, when
	// Options.Endpoint is set.
	Scrape ScrapeOptions
	// Results is a directory of earlier kvq --output json results
	// (ReadResults); empty for none.
	Results string
}

// Assemble gathers step 1 and the earlier results that ev names into opts
// and builds the plan: it reads the trace, scrapes opts.Endpoint for
// ev.Scrape.Duration (progress through ev.Scrape.Progress), analyses the
// bottleneck, reads the results directory and calls Build. A bad trace,
// results directory or option is an input error (kvqerr.IsInput); a
// scrape that fails is not. When ctx ends during the scrape, Assemble
// returns ctx.Err().
func Assemble(ctx context.Context, opts Options, ev Evidence) (*Plan, error) {
	tr := ev.Lengths
	if ev.Trace != "" {
		var err error
		if tr, err = ReadTrace(ev.Trace); err != nil {
			return nil, kvqerr.Input(err)
		}
	}
	opts.Traffic = tr
	if opts.Endpoint != "" {
		snaps, err := Scrape(ctx, opts.Endpoint, ev.Scrape)
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b := Analyze(snaps, tr)
		opts.Bottleneck = &b
	} else if tr != nil {
		b := Analyze(nil, tr)
		opts.Bottleneck = &b
	}
	if ev.Results != "" {
		var err error
		if opts.Results, err = ReadResults(ev.Results); err != nil {
			return nil, kvqerr.Input(err)
		}
	}
	p, err := Build(ctx, opts)
	if err != nil {
		return nil, kvqerr.Input(err)
	}
	return p, nil
}
