package eval

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/eval"
)

// GSM8K in kvq eval: --tasks gsm8k=FILE.jsonl scores the user's local copy
// of GSM8K's test split as lm-evaluation-harness does (pkg/eval/gsm8k.go),
// the first -n items, with --num-fewshot shots from the --fewshot file (the
// train split). kvq downloads nothing, and never takes shots from the
// scored file: without --fewshot, --num-fewshot must be 0.

// gsm8kFlags are the GSM8K suite's flags.
type gsm8kFlags struct {
	NumFewshot int
	Fewshot    string

	test string // the file of --tasks gsm8k=FILE
	spec string // that --tasks entry, for the report's setup
}

func (g *gsm8kFlags) addFlags(fl *pflag.FlagSet) {
	fl.IntVar(&g.NumFewshot, "num-fewshot", eval.DefaultGSM8KShots, "few-shot examples before each question, from --fewshot: gsm8k takes the first N; multiple choice draws N by --seed (MMLU: the first N of the subject) and is 0-shot unless this flag is given")
	fl.StringVar(&g.Fewshot, "fewshot", "", "a file of few-shot examples in the scored file's format: GSM8K's train split (JSON Lines), a multiple-choice set's train or dev split")
}

// parseTask takes the --tasks entry t when it is the GSM8K suite's.
func (g *gsm8kFlags) parseTask(t string) (bool, error) {
	if t == eval.SuiteGSM8K || t == eval.SuiteGSM8K+"=" {
		return true, cmdutil.FlagErrorf("--tasks %s: GSM8K is read from your local copy: --tasks gsm8k=TEST.jsonl (kvq downloads no data sets)", t)
	}
	p, ok := strings.CutPrefix(t, eval.SuiteGSM8K+"=")
	if !ok {
		return false, nil
	}
	if g.test != "" {
		return true, cmdutil.FlagErrorf("--tasks %s: gsm8k given twice", t)
	}
	if _, err := os.Stat(p); err != nil {
		return true, cmdutil.FlagErrorf("--tasks %s: %w", t, err)
	}
	g.test, g.spec = p, t
	return true, nil
}

// validate checks the GSM8K flags once --tasks is parsed; others says
// whether another suite (multiple choice) reads --fewshot.
func (g *gsm8kFlags) validate(others bool) error {
	if g.NumFewshot < 0 {
		return cmdutil.FlagErrorf("--num-fewshot %d: must be ≥ 0", g.NumFewshot)
	}
	if g.test == "" {
		if g.Fewshot != "" && !others {
			return cmdutil.FlagErrorf("--fewshot needs --tasks gsm8k=FILE")
		}
		return nil
	}
	if g.Fewshot == "" {
		if g.NumFewshot > 0 {
			return cmdutil.FlagErrorf("--tasks gsm8k: %d-shot needs --fewshot TRAIN.jsonl (shots are never taken from the scored file); or --num-fewshot 0", g.NumFewshot)
		}
		return nil
	}
	if _, err := os.Stat(g.Fewshot); err != nil {
		return cmdutil.FlagErrorf("--fewshot: %w", err)
	}
	return nil
}

// suite reads the GSM8K files and builds the suite of their first n items,
// with the files' data records.
func (g *gsm8kFlags) suite(n int) ([]eval.Suite, []eval.DataInfo, error) {
	if g.test == "" {
		return nil, nil, nil
	}
	b, err := os.ReadFile(g.test)
	if err != nil {
		return nil, nil, cmdutil.FlagErrorf("--tasks: %w", err)
	}
	test, err := eval.ParseGSM8K(b, g.test, true)
	if err != nil {
		return nil, nil, cmdutil.UsageError(err)
	}
	data := []eval.DataInfo{dataInfo(g.test, "gsm8k", b)}
	var shots []eval.GSM8KItem
	if g.Fewshot != "" && g.NumFewshot > 0 {
		fb, err := os.ReadFile(g.Fewshot)
		if err != nil {
			return nil, nil, cmdutil.FlagErrorf("--fewshot: %w", err)
		}
		if shots, err = eval.ParseGSM8K(fb, g.Fewshot, false); err != nil {
			return nil, nil, cmdutil.UsageError(err)
		}
		if len(shots) < g.NumFewshot {
			return nil, nil, cmdutil.FlagErrorf("--num-fewshot %d: %s holds %d examples", g.NumFewshot, g.Fewshot, len(shots))
		}
		data = append(data, dataInfo(g.Fewshot, "gsm8k-fewshot", fb))
	}
	s, err := eval.GSM8KSuite(eval.GSM8KOptions{Test: test, N: n, Shots: shots, Fewshot: min(g.NumFewshot, len(shots))})
	if err != nil {
		return nil, nil, cmdutil.UsageError(err)
	}
	return []eval.Suite{s}, data, nil
}

// specs is the --tasks entry of the GSM8K suite, when given.
func (g *gsm8kFlags) specs() []string {
	if g.spec == "" {
		return nil
	}
	return []string{g.spec}
}
