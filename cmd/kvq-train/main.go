// Command kvq-train trains kvq's built-in probe model. It is a maintainers'
// command (make probe-model runs it), kept out of the kvq binary so that
// users' builds carry no trainer:
//
//	go run ./cmd/kvq-train --dir probe-smoke --smoke   # a tiny run, seconds
//
// Exit codes: 0 ok, 1 a failure, 2 a bad flag or input directory, 130
// interrupted (a checkpoint is saved first; run it again to resume).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq-train/internal/train"
	"github.com/spf13/cobra"
)

// Exit codes, as kvq's.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitCancelled = 130
)

// logInterval is the longest time between two progress lines.
const logInterval = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks a bad flag or input (exit 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// options are the flags.
type options struct {
	dir     string
	smoke   bool
	from    string
	stage   int
	steps   int
	workers int
	every   int
}

// run executes the command with args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "kvq-train",
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

Exit codes: 0 ok, 1 failure, 2 a bad flag or input directory, 130
interrupted. Interrupted, it saves a checkpoint first: run it again to resume.`,
		Example: `  go run ./cmd/kvq-train --dir probe-run            # the base run, about 60 minutes on 2 cores
  go run ./cmd/kvq-train --dir probe-ft --finetune-from probe-run   # the second stage, about 20 minutes
  go run ./cmd/kvq-train --dir probe-ft3 --stage 3 --finetune-from probe-ft/model   # about 7 minutes
  go run ./cmd/kvq-train --dir probe-ft4 --stage 4 --finetune-from probe-ft3/model  # about 5 minutes
  go run ./cmd/kvq-train --dir probe-smoke --smoke  # a tiny run of the same code, seconds`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), stdout, stderr)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	fl := cmd.Flags()
	fl.StringVar(&o.dir, "dir", "probe-train", "training directory (checkpoints; the model is exported to DIR/model)")
	fl.BoolVar(&o.smoke, "smoke", false, "train the tiny smoke-test configuration")
	fl.StringVar(&o.from, "finetune-from", "", "fine-tune from this training directory's checkpoint or this exported model's weights (stages 2 to 4)")
	fl.IntVar(&o.stage, "stage", 0, "recipe stage: 1 base, 2 to 4 fine-tune from --finetune-from (0: 2 with --finetune-from, else 1)")
	fl.IntVar(&o.steps, "steps", 0, "override the number of optimizer steps (0: the configuration's)")
	fl.IntVar(&o.workers, "workers", 0, "goroutines (0: all CPUs; results do not depend on it)")
	fl.IntVar(&o.every, "log-every", 10, "print a progress line every N steps")
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		fmt.Fprintln(stderr, "kvq-train: cancelled")
		return exitCancelled
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "kvq-train: %v\nRun 'kvq-train --help' for usage.\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "kvq-train: %v\n", err)
		return exitError
	}
}

func (o *options) validate() error {
	if o.steps < 0 || o.workers < 0 || o.every <= 0 {
		return usagef("--steps and --workers must be ≥ 0, --log-every > 0")
	}
	switch {
	case o.stage < 0 || o.stage > train.Stages:
		return usagef("--stage %d: the recipe has stages 1 (base) to %d", o.stage, train.Stages)
	case o.stage == 1 && o.from != "":
		return usagef("--stage 1 is the base run, which starts from scratch: drop --finetune-from")
	case o.stage > 1 && o.from == "":
		return usagef("--stage %d fine-tunes: give the previous stage's directory with --finetune-from", o.stage)
	}
	if o.from != "" {
		_, errCk := os.Stat(filepath.Join(o.from, train.CheckpointFile))
		_, errST := os.Stat(filepath.Join(o.from, "model.safetensors"))
		if errCk != nil && errST != nil {
			return usagef("--finetune-from %s: neither a training directory (%v) nor an exported model (no model.safetensors)", o.from, errCk)
		}
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return usagef("--dir %s: %v", o.dir, err)
	}
	return nil
}

// run trains.
func (o *options) run(ctx context.Context, stdout, stderr io.Writer) error {
	stage := o.stage
	if stage == 0 {
		stage = 1
		if o.from != "" {
			stage = 2
		}
	}
	cfg, err := train.StageConfig(stage, o.from)
	if err != nil {
		return err
	}
	if o.smoke {
		from := cfg.InitFrom
		cfg = train.SmokeConfig()
		cfg.InitFrom = from
	}
	if o.steps > 0 {
		cfg.Steps = o.steps
	}
	cfg.Workers = o.workers
	start := time.Now()
	first, last := -1, start
	err = train.Train(ctx, cfg, o.dir, func(s train.Step) {
		if first < 0 {
			first = s.Step - 1 // a resumed run starts past 0
		}
		now := time.Now()
		// Every --log-every steps, and at least every logInterval, so that
		// a CI log shows the run is alive.
		if s.Step%o.every != 0 && s.Step != s.Steps && now.Sub(last) < logInterval {
			return
		}
		last = now
		eta := "?"
		if n := s.Step - first; n > 0 {
			eta = (time.Duration(float64(now.Sub(start)) / float64(n) * float64(s.Steps-s.Step))).Round(time.Second).String()
		}
		fmt.Fprintf(stderr, "step %d/%d  loss %.4f  |g| %.3f  lr %.2e  seq %d  %.0f tok/s  (%s, ETA %s)\n",
			s.Step, s.Steps, s.Loss, s.GradNorm, s.LR, s.SeqBytes, s.TokensPerSec, now.Sub(start).Round(time.Second), eta)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model exported to %s\n", filepath.Join(o.dir, train.ModelDir))
	return nil
}
