package eval

import (
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/eval"
)

// Multiple choice in kvq eval: --tasks NAME=FILE (NAME one of
// eval.MCAdapters: mmlu, arc, hellaswag, winogrande, piqa, mc) scores the
// user's local JSON Lines or Parquet file by log-likelihood as
// lm-evaluation-harness does (pkg/eval/mc.go), the first -n items, with
// --num-fewshot shots (0 unless given) from the --fewshot file, read with
// the same adapter. kvq downloads nothing.

// mcFlags are the multiple-choice suites' state; --fewshot and
// --num-fewshot are gsm8kFlags', shared.
type mcFlags struct {
	files map[string]string // adapter → file of --tasks NAME=FILE
	order []string          // adapters in --tasks order
	specs []string          // those --tasks entries, for the report's setup
	shots int               // few-shot examples per item (validate)
}

// mcName is what a --tasks NAME=FILE entry's NAME looks like.
var mcName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// parseTask takes the --tasks entry t when it names a multiple-choice data
// set: NAME=FILE with NAME an adapter, or bare NAME (an error: kvq reads
// the user's file). An entry NAME=FILE with an unknown NAME that is not a
// file either is an error listing the names kvq reads.
func (c *mcFlags) parseTask(t string) (bool, error) {
	name, p, eq := strings.Cut(t, "=")
	known := slices.Contains(eval.MCAdapters(), name)
	if !eq {
		if known {
			return true, cmdutil.FlagErrorf("--tasks %s: %s is read from your local copy: --tasks %s=FILE (JSON Lines or Parquet; kvq downloads no data sets)", t, name, name)
		}
		return false, nil
	}
	if !known {
		if _, err := os.Stat(t); err == nil || !mcName.MatchString(name) || name == eval.SuiteGSM8K {
			return false, nil
		}
		return true, cmdutil.FlagErrorf("--tasks %s: unknown data set %q (valid: %s=FILE, %s=FILE)", t, name, eval.SuiteGSM8K, strings.Join(eval.MCAdapters(), "=FILE, "))
	}
	if c.files == nil {
		c.files = map[string]string{}
	}
	if _, dup := c.files[name]; dup {
		return true, cmdutil.FlagErrorf("--tasks %s: %s given twice", t, name)
	}
	if _, err := os.Stat(p); err != nil {
		return true, cmdutil.FlagErrorf("--tasks %s: %w", t, err)
	}
	c.files[name] = p
	c.order = append(c.order, name)
	c.specs = append(c.specs, t)
	return true, nil
}

// reset forgets the parsed --tasks entries (Validate runs again in tests).
func (c *mcFlags) reset() { *c = mcFlags{} }

// validate checks the shared few-shot flags once --tasks is parsed:
// numSet says whether --num-fewshot was given (multiple choice is 0-shot
// by default, as lm-eval's tasks); endpoints whether servers are
// evaluated.
func (c *mcFlags) validate(g *gsm8kFlags, numSet, endpoints bool) error {
	if len(c.order) == 0 {
		return nil
	}
	if endpoints {
		return cmdutil.FlagErrorf("--tasks %s: multiple choice is scored by log-likelihood with a local model, not with --endpoint", c.specs[0])
	}
	c.shots = 0
	if numSet {
		c.shots = g.NumFewshot
	}
	takers := len(c.order)
	if g.test != "" {
		takers++
	}
	if g.Fewshot != "" && takers > 1 {
		return cmdutil.FlagErrorf("--fewshot %s: one few-shot file, and %d suites that read shots (%s): run them one at a time", g.Fewshot, takers, strings.Join(c.takers(g), ", "))
	}
	if g.Fewshot != "" && !numSet {
		return cmdutil.FlagErrorf("--fewshot %s: multiple choice is 0-shot unless --num-fewshot N says how many shots", g.Fewshot)
	}
	if c.shots > 0 && g.Fewshot == "" {
		return cmdutil.FlagErrorf("--tasks %s: %d-shot needs --fewshot FILE (shots are never taken from the scored file); or --num-fewshot 0", c.specs[0], c.shots)
	}
	if g.Fewshot != "" {
		if _, err := os.Stat(g.Fewshot); err != nil {
			return cmdutil.FlagErrorf("--fewshot: %w", err)
		}
	}
	return nil
}

func (c *mcFlags) takers(g *gsm8kFlags) []string {
	var out []string
	if g.test != "" {
		out = append(out, eval.SuiteGSM8K)
	}
	return append(out, c.order...)
}

// active reports whether a multiple-choice suite was given.
func (c *mcFlags) active() bool { return len(c.order) > 0 }

// suites reads the files and builds the suites of their first n items,
// with the files' data records.
func (c *mcFlags) suites(n int, seed uint64, fewshot string) ([]eval.Suite, []eval.DataInfo, error) {
	var out []eval.Suite
	var data []eval.DataInfo
	for _, name := range c.order {
		p := c.files[name]
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, cmdutil.FlagErrorf("--tasks: %w", err)
		}
		test, err := eval.ParseMC(name, b, p)
		if err != nil {
			return nil, nil, cmdutil.UsageError(err)
		}
		data = append(data, dataInfo(p, name, b))
		var shots []eval.MCDoc
		if c.shots > 0 {
			fb, err := os.ReadFile(fewshot)
			if err != nil {
				return nil, nil, cmdutil.FlagErrorf("--fewshot: %w", err)
			}
			if shots, err = eval.ParseMC(name, fb, fewshot); err != nil {
				return nil, nil, cmdutil.UsageError(err)
			}
			if len(shots) < c.shots {
				return nil, nil, cmdutil.FlagErrorf("--num-fewshot %d: %s holds %d examples", c.shots, fewshot, len(shots))
			}
			data = append(data, dataInfo(fewshot, name+"-fewshot", fb))
		}
		o := eval.MCOptions{Name: name, Metrics: eval.MCMetrics(name), Test: test, N: n, Shots: shots, Fewshot: c.shots, Seed: seed}
		if name == eval.MCMMLU {
			o.FirstN, o.Description = true, eval.MMLUDescription
		}
		s, err := eval.MCSuite(o)
		if err != nil {
			return nil, nil, cmdutil.UsageError(err)
		}
		out = append(out, s)
	}
	return out, data, nil
}
