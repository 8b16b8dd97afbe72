package eval

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/datasets"
)

// RULER (github.com/NVIDIA/RULER) built in: its synthetic tasks, made by
// datasets.Ruler at each length in the model's tokens, scored with RULER's
// string_match_all, one report row per task and length ("ruler:vt 4K"),
// each compared with the baseline as every suite row is (drop, bootstrap
// interval, flips and McNemar's p on the items that found every answer).
//
// --tasks names them "ruler" (every task) or "ruler:TASK".

// SuiteRuler is the RULER suite, and the prefix of one of its tasks
// ("ruler:vt").
const SuiteRuler = "ruler"

// RULER's metrics (scripts/eval/synthetic/constants.py), with the
// reference's answers separated by "|||":
//
//	string-match-all   the share of the answers found in the output, case-insensitive
//	                   (RULER's per-item string_match_all); Pass = every answer found
//	string-match-part  1 when any answer is found in the output, case-insensitive, else 0
//
// RULER's tasks all score with string-match-all (string-match-part is its
// qa tasks' metric). They are not offered to tasks files (Metrics).
const (
	MetricStringMatchAll  Metric = "string-match-all"
	MetricStringMatchPart Metric = "string-match-part"
)

// DefaultRulerLengths are RULER's lengths: 4K to 128K tokens.
func DefaultRulerLengths() []int {
	return []int{4096, 8192, 16384, 32768, 65536, 131072}
}

// RulerTasks lists RULER's tasks: the built-in ones, then qa_1 and qa_2,
// which read the user's SQuAD and HotpotQA files (ruler_qa.go).
func RulerTasks() []string { return append(datasets.RulerTasks(), RulerQA1, RulerQA2) }

// rulerTask returns the RULER task a suite name asks for: "" and true for
// "ruler" (every task), the task for "ruler:TASK", false for other names.
func rulerTask(name string) (string, bool) {
	if name == SuiteRuler {
		return "", true
	}
	t, ok := strings.CutPrefix(name, SuiteRuler+":")
	return t, ok && t != ""
}

// checkRuler reports whether name is a RULER suite name, and an error
// when it is one with an unknown task.
func checkRuler(name string) (bool, error) {
	t, ok := rulerTask(name)
	if !ok || t == "" || rulerQATask(t) {
		return ok, nil
	}
	if datasets.CheckRulerTask(t) != nil {
		return true, fmt.Errorf("%w: --tasks %s: unknown RULER task %q (have %s)", ErrOptions, name, t, strings.Join(RulerTasks(), ", "))
	}
	return true, nil
}

// rulerTasks are the RULER tasks names ask for, in RULER's order: "ruler"
// is every built-in task, and qa_1 and qa_2 when their data is given.
func (o *SuiteOptions) rulerTasks(names []string) []string {
	want := map[string]bool{}
	for _, n := range names {
		if t, ok := rulerTask(n); ok {
			if t == "" {
				for _, t := range RulerTasks() {
					want[t] = !rulerQATask(t) || o.rulerQAData(t) != nil
				}
				continue
			}
			want[t] = true
		}
	}
	var out []string
	for _, t := range RulerTasks() {
		if want[t] {
			out = append(out, t)
		}
	}
	return out
}

// RulerLabel is the report row of a RULER task at a length: "ruler:vt 4K"
// (whole K when length is a multiple of 1024, else the tokens).
func RulerLabel(task string, length int) string {
	if length%1024 == 0 {
		return fmt.Sprintf("%s:%s %dK", SuiteRuler, task, length/1024)
	}
	return fmt.Sprintf("%s:%s %d", SuiteRuler, task, length)
}

// rulerSeed is the seed of item i of task at length: independent of the
// other tasks and lengths, so that a subset draws the examples of a full
// run.
func rulerSeed(seed uint64, task string, length, i int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d/%d", seed, task, length, i)
	return h.Sum64()
}

// ruler is the RULER suite for tasks: N examples per task and length.
func (o *SuiteOptions) ruler(tasks []string) (Suite, error) {
	if o.Tokens == nil {
		return Suite{}, fmt.Errorf("%w: the ruler suite needs the model's tokenizer (SuiteOptions.Tokens)", ErrOptions)
	}
	lengths := o.RulerLengths
	if len(lengths) == 0 {
		for _, n := range DefaultRulerLengths() {
			if o.ModelContext > 0 && n > o.ModelContext {
				break
			}
			lengths = append(lengths, n)
		}
		if len(lengths) == 0 {
			lengths = []int{o.ModelContext}
		}
	}
	for _, n := range lengths {
		if n <= 0 || o.ModelContext > 0 && n > o.ModelContext {
			return Suite{}, fmt.Errorf("%w: ruler length %d: the model's context is %d tokens", ErrOptions, n, o.ModelContext)
		}
	}
	s := Suite{Name: SuiteRuler, Kind: "long-context"}
	// RULER's leaderboard averages the tasks at each length: one row per
	// length over every item there (the tasks have N items each, so the
	// mean of the items is the mean of the task rows).
	if len(tasks) > 1 {
		for _, n := range lengths {
			s.Groups = append(s.Groups, rulerAverageLabel(n))
		}
	}
	for _, task := range tasks {
		metric := MetricStringMatchAll
		if rulerQATask(task) {
			metric = MetricStringMatchPart
		}
		for _, n := range lengths {
			label := RulerLabel(task, n)
			for i := 0; i < o.N; i++ {
				var ex datasets.RulerExample
				var err error
				if rulerQATask(task) {
					ex, err = o.rulerQAExample(task, n, i)
				} else {
					ex, err = datasets.Ruler(task, n, rulerSeed(o.Seed, task, n, i), o.Tokens)
				}
				if err != nil {
					return Suite{}, fmt.Errorf("%w: ruler length %d: %w", ErrOptions, n, err)
				}
				t := Task{Suite: label, Index: i, ID: label + "#" + strconv.Itoa(i), Prompt: ex.Prompt,
					Reference: strings.Join(ex.Outputs, "|||"), Metrics: []Metric{metric}, MaxTokens: ex.MaxTokens,
					Meta: map[string]string{"task": task, "length": strconv.Itoa(n), "tokens": strconv.Itoa(ex.Tokens), "haystack": strconv.Itoa(ex.Haystack)}}
				if len(s.Groups) > 0 {
					t.Groups = []string{rulerAverageLabel(n)}
				}
				s.Tasks = append(s.Tasks, t)
			}
		}
	}
	return s, nil
}

// StringMatchAll is RULER's string_match_all for one item: the share of
// refs found in pred, case-insensitive (0 without refs).
func StringMatchAll(pred string, refs []string) float64 {
	if len(refs) == 0 {
		return 0
	}
	p := strings.ToLower(pred)
	found := 0
	for _, r := range refs {
		if strings.Contains(p, strings.ToLower(r)) {
			found++
		}
	}
	return float64(found) / float64(len(refs))
}

// StringMatchPart is RULER's string_match_part for one item: 1 when any
// of refs is in pred, case-insensitive, else 0.
func StringMatchPart(pred string, refs []string) float64 {
	p := strings.ToLower(pred)
	if slices.ContainsFunc(refs, func(r string) bool { return strings.Contains(p, strings.ToLower(r)) }) {
		return 1
	}
	return 0
}

// scoreStringMatch scores output with RULER's metric m against the
// "|||"-separated answers of reference.
func scoreStringMatch(m Metric, output, reference string) (Score, error) {
	refs := referenceAnswers(reference)
	if len(refs) == 0 {
		return Score{}, fmt.Errorf("%w: %s needs a non-empty reference", ErrReference, m)
	}
	v := StringMatchPart(output, refs)
	if m == MetricStringMatchAll {
		v = StringMatchAll(output, refs)
	}
	return Score{Pass: v == 1, Value: v, Detail: fmt.Sprintf("%s %.3f", m, v)}, nil
}
