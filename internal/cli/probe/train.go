package probe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/train"
	"github.com/spf13/cobra"
)

// TrainOptions are the flags of kvq probe train.
type TrainOptions struct {
	IO      *cmdutil.IOStreams
	Dir     string
	Smoke   bool
	From    string
	Steps   int
	Workers int
	Every   int
}

func newTrainCmd(f *cmdutil.Factory, runF func(context.Context, *TrainOptions) error) *cobra.Command {
	o := &TrainOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train the kvq-probe model (pure Go, CPU)",
		Long: `Train kvq's probe model on the training split of the probe generators: a
Llama-family model with head_dim 64 and GQA, trained with AdamW, warm-up and
cosine decay, gradient clipping and a length curriculum. Checkpoints are
written to --dir as it goes; running the same command again resumes and gives
bit-identical weights to an uninterrupted run. The result is exported as a
Hugging Face directory to DIR/model.

The second stage fine-tunes from the base run's checkpoint (--finetune-from
BASE_DIR: 800 steps of full-length documents with their own data, weighted
towards copying, multi-key lookups and the refusal policy in the eval suites'
format). make probe-model runs both and ships the second stage's export.`,
		Example: `  kvq probe train --dir probe-run            # the base run (about 60 minutes on 2 cores)
  kvq probe train --dir probe-ft --finetune-from probe-run   # the second stage (about 20 minutes)
  kvq probe train --dir /tmp/smoke --smoke     # a tiny run, seconds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Steps < 0 || o.Workers < 0 || o.Every <= 0 {
				return cmdutil.FlagErrorf("--steps and --workers must be ≥ 0, --log-every > 0")
			}
			if o.From != "" {
				if _, err := os.Stat(filepath.Join(o.From, train.CheckpointFile)); err != nil {
					return cmdutil.FlagErrorf("--finetune-from %s: not a training directory (%v)", o.From, err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Dir, "dir", "probe-train", "training directory (checkpoints; the model is exported to DIR/model)")
	fl.BoolVar(&o.Smoke, "smoke", false, "train the tiny smoke-test configuration")
	fl.StringVar(&o.From, "finetune-from", "", "fine-tune from the checkpoint of this training directory (the second stage)")
	fl.IntVar(&o.Steps, "steps", 0, "override the number of optimizer steps (0: the configuration's)")
	fl.IntVar(&o.Workers, "workers", 0, "goroutines (0: all CPUs; results do not depend on it)")
	fl.IntVar(&o.Every, "log-every", 10, "print a progress line every N steps")
	return cmd
}

// Run trains.
func (o *TrainOptions) Run(ctx context.Context) error {
	cfg := train.DefaultConfig()
	if o.From != "" {
		cfg = train.FinetuneConfig(o.From)
	}
	if o.Smoke {
		from := cfg.InitFrom
		cfg = train.SmokeConfig()
		cfg.InitFrom = from
	}
	if o.Steps > 0 {
		cfg.Steps = o.Steps
	}
	cfg.Workers = o.Workers
	start := time.Now()
	err := train.Train(ctx, cfg, o.Dir, func(s train.Step) {
		if s.Step%o.Every == 0 || s.Step == s.Steps {
			fmt.Fprintf(o.IO.ErrOut, "step %d/%d  loss %.4f  |g| %.3f  lr %.2e  seq %d  %.0f tok/s  (%s)\n",
				s.Step, s.Steps, s.Loss, s.GradNorm, s.LR, s.SeqBytes, s.TokensPerSec, time.Since(start).Round(time.Second))
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "model exported to %s\n", filepath.Join(o.Dir, train.ModelDir))
	return nil
}
