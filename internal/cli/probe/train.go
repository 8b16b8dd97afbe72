package probe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/internal/progressbar"
	"github.com/kvqlabs/kvq/internal/train"
	"github.com/spf13/cobra"
)

// TrainOptions are the flags of kvq probe train.
type TrainOptions struct {
	IO      *cmdutil.IOStreams
	Dir     string
	Smoke   bool
	From    string
	Stage   int
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
format). The third (--stage 3 --finetune-from FT_DIR/model) starts from the
second stage's exported F16 weights: 300 steps that teach requests about
topics the policy does not list; the fourth (--stage 4 --finetune-from
FT3_DIR/model) continues from the third's export for 200 steps with more of
those requests and longer policies. --finetune-from takes a training
directory or an exported model directory. make probe-model runs all four and
ships the fourth stage's export. On 2 cores the base run takes about 60
minutes, the later stages about 20, 7 and 5 minutes; --smoke takes seconds.

` + cmdutil.ExitCodesHelp("") + `
Interrupted, it saves a checkpoint first: run it again to resume.`,
		Example: `  kvq probe train --dir probe-run            # the base run, about 60 minutes on 2 cores
  kvq probe train --dir probe-ft --finetune-from probe-run   # the second stage, about 20 minutes
  kvq probe train --dir probe-ft3 --stage 3 --finetune-from probe-ft/model   # about 7 minutes
  kvq probe train --dir probe-ft4 --stage 4 --finetune-from probe-ft3/model  # about 5 minutes
  kvq probe train --dir probe-smoke --smoke  # a tiny run of the same code, seconds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Steps < 0 || o.Workers < 0 || o.Every <= 0 {
				return cmdutil.FlagErrorf("--steps and --workers must be ≥ 0, --log-every > 0")
			}
			switch {
			case o.Stage < 0 || o.Stage > train.Stages:
				return cmdutil.FlagErrorf("--stage %d: the recipe has stages 1 (base) to %d", o.Stage, train.Stages)
			case o.Stage == 1 && o.From != "":
				return cmdutil.FlagErrorf("--stage 1 is the base run, which starts from scratch: drop --finetune-from")
			case o.Stage > 1 && o.From == "":
				return cmdutil.FlagErrorf("--stage %d fine-tunes: give the previous stage's directory with --finetune-from", o.Stage)
			}
			if o.From != "" {
				_, errCk := os.Stat(filepath.Join(o.From, train.CheckpointFile))
				_, errST := os.Stat(filepath.Join(o.From, "model.safetensors"))
				if errCk != nil && errST != nil {
					return cmdutil.FlagErrorf("--finetune-from %s: neither a training directory (%v) nor an exported model (no model.safetensors)", o.From, errCk)
				}
			}
			if err := cmdutil.CheckOutputDir("--dir", o.Dir); err != nil {
				return err
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
	fl.StringVar(&o.From, "finetune-from", "", "fine-tune from this training directory's checkpoint or this exported model's weights (stages 2 to 4)")
	fl.IntVar(&o.Stage, "stage", 0, "recipe stage: 1 base, 2 to 4 fine-tune from --finetune-from (0: 2 with --finetune-from, else 1)")
	fl.IntVar(&o.Steps, "steps", 0, "override the number of optimizer steps (0: the configuration's)")
	fl.IntVar(&o.Workers, "workers", 0, "goroutines (0: all CPUs; results do not depend on it)")
	fl.IntVar(&o.Every, "log-every", 10, "print a progress line every N steps")
	return cmd
}

// Run trains.
func (o *TrainOptions) Run(ctx context.Context) error {
	stage := o.Stage
	if stage == 0 {
		stage = 1
		if o.From != "" {
			stage = 2
		}
	}
	cfg, err := train.StageConfig(stage, o.From)
	if err != nil {
		return err
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
	interval := o.IO.ProgressInterval
	if interval <= 0 {
		interval = progressbar.DefaultInterval
	}
	first, last := -1, start
	err = train.Train(ctx, cfg, o.Dir, func(s train.Step) {
		if first < 0 {
			first = s.Step - 1 // a resumed run starts past 0
		}
		now := time.Now()
		// Every --log-every steps, and at least every interval, so that a CI
		// log shows the run is alive.
		if s.Step%o.Every != 0 && s.Step != s.Steps && now.Sub(last) < interval {
			return
		}
		last = now
		eta := "?"
		if n := s.Step - first; n > 0 {
			eta = (time.Duration(float64(now.Sub(start)) / float64(n) * float64(s.Steps-s.Step))).Round(time.Second).String()
		}
		fmt.Fprintf(o.IO.ErrOut, "step %d/%d  loss %.4f  |g| %.3f  lr %.2e  seq %d  %.0f tok/s  (%s, ETA %s)\n",
			s.Step, s.Steps, s.Loss, s.GradNorm, s.LR, s.SeqBytes, s.TokensPerSec, now.Sub(start).Round(time.Second), eta)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "model exported to %s\n", filepath.Join(o.Dir, train.ModelDir))
	return nil
}
