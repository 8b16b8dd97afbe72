package calibrate

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/spf13/cobra"
)

// StatsOptions are kvq calibrate stats's flags.
type StatsOptions struct {
	// Wide keeps table output at full width (--wide).
	Wide bool
	IO   *cmdutil.IOStreams
	DataFlags
	Percentiles string
	Output      string
	Plot        string

	pct    []float64
	format render.Format
}

func newStatsCmd(f *cmdutil.Factory, runF func(context.Context, *StatsOptions) error) *cobra.Command {
	o := &StatsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "K/V statistics per layer, KV head and channel (JSON: every channel; SVG/PNG plots)",
		Long: `kvq calibrate stats runs the model over calibration data and reports, for
each layer, the keys after RoPE (what an fp8 cache stores), the keys before
RoPE (what KVQuant calibrates) and the values: absmax, min, max, mean, std,
percentiles of |x|, outliers (|x| > 6·RMS) and outlier channels (absmax more
than 4× the median channel's). --output json adds every head and channel
(min, max, mean, std), quarter-octave histograms of |x| and each batch's
extremes. --plot draws absmax by layer and per-channel heatmaps of K and V.
On the built-in model it takes about 2 s on 2 cores.

` + cmdutil.ExitCodesHelp(""),
		Example: `  kvq calibrate stats
  kvq calibrate stats --plot stats-plots
  kvq calibrate stats --model ./Llama-3.1-8B --data wiki.train.raw \
    --output json > stats.json   # your own model and data`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.run(cmd.Context())
		},
	}
	o.DataFlags.bind(cmd, f.BackendRegistry())
	fl := cmd.Flags()
	cmdutil.AddWideFlag(fl, &o.Wide)
	fl.StringVar(&o.Percentiles, "percentiles", "50,99,99.9,99.99", "percentiles of |x| to report, comma-separated")
	fl.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(render.Formats(), ", "))
	fl.StringVar(&o.Plot, "plot", "", "write pictures (SVG and PNG) into this directory")
	return cmd
}

func (o *StatsOptions) validate() error {
	if err := o.DataFlags.validate(); err != nil {
		return err
	}
	o.pct = nil
	for _, p := range strings.Split(o.Percentiles, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0 && v <= 100) {
			return cmdutil.FlagErrorf("--percentiles: %q is not in (0, 100]", p)
		}
		o.pct = append(o.pct, v)
	}
	var err error
	if o.format, err = render.ParseFormat(o.Output); err != nil {
		return cmdutil.FlagErrorf("--output: %w", err)
	}
	return cmdutil.CheckOutputDir("--plot", o.Plot)
}

func (o *StatsOptions) run(ctx context.Context) error {
	m, data, err := o.DataFlags.load(ctx, o.IO)
	if err != nil {
		return err
	}
	defer m.Close()
	rec, err := record(ctx, o.IO, m, data, "stats", &o.DataFlags, calibrate.RecordOptions{})
	if err != nil {
		return err
	}
	st := rec.Stats(cmdutil.ModelLabel(m, o.Model), data.Info(), o.pct)
	if o.Plot != "" {
		if _, err := writePlots(o.Plot, st); err != nil {
			return fmt.Errorf("--plot %s: %w", o.Plot, err)
		}
	}
	return render.Write(o.IO.Out, o.format, o.IO.FitReport(statsView(st), o.format, o.Wide), render.Options{TTY: o.IO.OutTTY})
}
