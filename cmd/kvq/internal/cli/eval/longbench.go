package eval

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/chat"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// LongBench and RULER's qa tasks in kvq eval, from the user's files (kvq
// downloads nothing): --tasks longbench=FILE.jsonl (LongBench v1, any
// number of files, each one dataset or several) and longbench2=FILE
// (LongBench v2) build pkg/eval's LongBench suites, the first -n items of
// each dataset; --ruler-squad and --ruler-hotpotqa give RULER's qa_1 and
// qa_2 their data (pkg/eval/ruler_qa.go).

// longBenchFlags are the LongBench and RULER qa inputs.
type longBenchFlags struct {
	RulerSQuAD    string
	RulerHotpotQA string

	v1, v2 []string // the files of --tasks longbench=, longbench2=
	specs  []string // those --tasks entries, for the report's setup
}

func (l *longBenchFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&l.RulerSQuAD, "ruler-squad", "", "ruler: SQuAD v2's dev set (dev-v2.0.json) for RULER's qa_1 (without it, --tasks ruler leaves qa_1 out)")
	fl.StringVar(&l.RulerHotpotQA, "ruler-hotpotqa", "", "ruler: HotpotQA's dev distractor set (hotpot_dev_distractor_v1.json) for RULER's qa_2 (without it, --tasks ruler leaves qa_2 out)")
}

// isLongBenchTask reports whether the --tasks entry t names LongBench
// ("longbench=FILE", "longbench2=FILE", or the bare names, refused).
func isLongBenchTask(t string) bool {
	for _, s := range []string{eval.SuiteLongBench, eval.SuiteLongBench2} {
		if t == s || strings.HasPrefix(t, s+"=") {
			return true
		}
	}
	return false
}

// reset forgets the --tasks entries of an earlier Validate.
func (l *longBenchFlags) reset() { l.v1, l.v2, l.specs = nil, nil, nil }

// parseTask takes the --tasks entry t when it is a LongBench one.
func (l *longBenchFlags) parseTask(t string) (bool, error) {
	for _, s := range []string{eval.SuiteLongBench, eval.SuiteLongBench2} {
		if t == s || t == s+"=" {
			return true, cmdutil.FlagErrorf("--tasks %s: LongBench is read from your local copy: --tasks %s=FILE.jsonl (kvq downloads no data sets)", t, s)
		}
		p, ok := strings.CutPrefix(t, s+"=")
		if !ok {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return true, cmdutil.FlagErrorf("--tasks %s: %w", t, err)
		}
		if s == eval.SuiteLongBench {
			l.v1 = append(l.v1, p)
		} else {
			l.v2 = append(l.v2, p)
		}
		l.specs = append(l.specs, t)
		return true, nil
	}
	return false, nil
}

// validate checks the RULER qa files once --tasks is parsed (suites holds
// its built-in suite names).
func (l *longBenchFlags) validate(suites []string) error {
	ruler := false
	for _, s := range suites {
		ruler = ruler || s == eval.SuiteRuler || strings.HasPrefix(s, eval.SuiteRuler+":")
	}
	for _, f := range []struct{ flag, path string }{{"--ruler-squad", l.RulerSQuAD}, {"--ruler-hotpotqa", l.RulerHotpotQA}} {
		if f.path == "" {
			continue
		}
		if !ruler {
			return cmdutil.FlagErrorf("%s needs --tasks ruler (or ruler:qa_1, ruler:qa_2)", f.flag)
		}
		if _, err := os.Stat(f.path); err != nil {
			return cmdutil.FlagErrorf("%s: %w", f.flag, err)
		}
	}
	return nil
}

// rulerQA reads the RULER qa files given into o, with their data records.
func (l *longBenchFlags) rulerQA(o *eval.SuiteOptions) ([]eval.DataInfo, error) {
	var data []eval.DataInfo
	for _, f := range []struct {
		flag, path string
		parse      func([]byte, string) (*eval.RulerQAData, error)
		dst        **eval.RulerQAData
	}{{"--ruler-squad", l.RulerSQuAD, eval.ParseRulerSQuAD, &o.RulerSQuAD}, {"--ruler-hotpotqa", l.RulerHotpotQA, eval.ParseRulerHotpotQA, &o.RulerHotpotQA}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, cmdutil.FlagErrorf("%s: %w", f.flag, err)
		}
		d, err := f.parse(b, f.path)
		if err != nil {
			return nil, cmdutil.UsageError(err)
		}
		*f.dst = d
		data = append(data, dataInfo(f.path, "ruler-qa", b))
	}
	return data, nil
}

// suites reads the LongBench files and builds their suites for model m
// within context tokens (0: no cut), the first n items of each dataset.
func (l *longBenchFlags) suites(m *runtime.Model, context, n int) ([]eval.Suite, []eval.DataInfo, error) {
	if len(l.v1)+len(l.v2) == 0 {
		return nil, nil, nil
	}
	o := eval.LongBenchOptions{N: n, Context: context,
		Encode: func(s string) []int { return m.Tokenizer.Encode(s, true) },
		Decode: m.Tokenizer.Decode}
	var data []eval.DataInfo
	for _, p := range l.v1 {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, cmdutil.FlagErrorf("--tasks: %w", err)
		}
		items, err := eval.ParseLongBench(b, p)
		if err != nil {
			return nil, nil, cmdutil.UsageError(err)
		}
		o.V1 = append(o.V1, items...)
		data = append(data, dataInfo(p, "longbench", b))
	}
	for _, p := range l.v2 {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, cmdutil.FlagErrorf("--tasks: %w", err)
		}
		items, err := eval.ParseLongBench2(b, p)
		if err != nil {
			return nil, nil, cmdutil.UsageError(err)
		}
		o.V2 = append(o.V2, items...)
		data = append(data, dataInfo(p, "longbench2", b))
	}
	// The chat template, where LongBench applies one, costs the tokens it
	// adds around a message (measured on a one-word message).
	if m.ChatTemplate != "" {
		ids, _, err := m.ChatPrompt([]chat.Message{{Role: "user", Content: "x"}})
		if err != nil {
			return nil, nil, err
		}
		o.Chat, o.ChatTokens = true, max(0, len(ids)-len(m.Tokenizer.Encode("x", true)))
	}
	s, err := eval.LongBenchSuites(o)
	if err != nil {
		return nil, nil, cmdutil.UsageError(err)
	}
	return s, data, nil
}

// rulerQANotes say which of RULER's qa tasks --tasks ruler left out for
// want of their data.
func rulerQANotes(rep *eval.Report) []string {
	if !slices.Contains(rep.Setup.Suites, eval.SuiteRuler) {
		return nil
	}
	var notes []string
	for _, q := range []struct{ task, set, flag string }{{eval.RulerQA1, "SQuAD", "--ruler-squad"}, {eval.RulerQA2, "HotpotQA", "--ruler-hotpotqa"}} {
		ran := slices.ContainsFunc(rep.Suites, func(s eval.SuiteResult) bool { return strings.HasPrefix(s.Name, eval.SuiteRuler+":"+q.task+" ") })
		if !ran {
			notes = append(notes, fmt.Sprintf("ruler: %s not run: it reads your copy of %s (%s FILE)", q.task, q.set, q.flag))
		}
	}
	return notes
}
