package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/datasets"
	"github.com/kvqlabs/kvq/pkg/chat"
)

// Task is one generation item: a prompt decoded greedily under every cache
// and scored against its reference.
type Task struct {
	Suite string
	Index int
	// ID is the task's own name (tasks files), for reports.
	ID string
	// Prompt is the text the model reads; with Messages, the chat as the
	// model's template renders it (filled in by Run).
	Prompt string
	// Messages and Tools, when set, are a chat to render with the model's
	// chat template.
	Messages []chat.Message
	Tools    json.RawMessage
	// Reference is what the metrics compare the output with.
	Reference string
	// Metrics score the output; each gives one row of the suite.
	Metrics []Metric
	// MaxTokens bounds the output (0: the reference's tokens plus 8).
	MaxTokens int
	// Line ends the output at its first newline.
	Line bool
	// Until ends the output before the first of these strings (GSM8K's
	// "Question:").
	Until []string
	// Schema is json-schema's schema (empty: the reference).
	Schema json.RawMessage
	// Lower marks rates that should be low (a false refusal).
	Lower bool
	// Meta are facts for reports (context, depth).
	Meta map[string]string

	ids []int   // the tokenized prompt (Run's prepare)
	mc  *mcTask // a multiple-choice item, scored by log-likelihood (mc.go)
}

// Suite is a named set of tasks with how its rows read.
type Suite struct {
	Name string
	// Kind groups suites in reports: "retrieval", "format", "safety", "reasoning",
	// "long-context", "user".
	Kind string
	// Labels name the rows per metric (default: the tasks' Suite).
	Labels map[Metric]string
	// Refusal detects refusals for this suite's refusal metrics (nil:
	// Options.Refusal).
	Refusal *RefusalDetector
	Tasks   []Task
}

// Built-in suite names.
const (
	SuitePasskey  = "passkey"
	SuiteMultiKey = "multikey"
	SuiteCopy     = "copy"
	SuiteJSON     = "json"
	SuiteSafety   = "safety"
	SuiteMultiHop = "multihop"
	SuiteCitation = "citation"
	SuiteToolCall = "toolcall"
	SuiteGrid     = "long-context"
)

// BuiltinSuites lists the built-in suites: the probe abilities (passkey,
// multikey, copy, json, safety), the other abilities rollouts break
// (multihop, citation, toolcall; the built-in model was not trained on
// them: they are for users' own models) and the long-context grid.
func BuiltinSuites() []string {
	return []string{SuitePasskey, SuiteMultiKey, SuiteCopy, SuiteJSON, SuiteSafety, SuiteMultiHop, SuiteCitation, SuiteToolCall, SuiteGrid}
}

// DefaultSuites are the suites kvq eval runs without --tasks.
func DefaultSuites() []string {
	return []string{SuitePasskey, SuiteMultiKey, SuiteCopy, SuiteJSON, SuiteSafety, SuiteGrid}
}

// CheckSuite reports an error naming the built-in suites when name is not
// one.
func CheckSuite(name string) error {
	if ok, err := checkRuler(name); ok {
		return err
	}
	if !slices.Contains(BuiltinSuites(), name) {
		return fmt.Errorf("%w: unknown suite %q (built-in: %s; ruler or ruler:TASK; or a .jsonl file of tasks)", ErrOptions, name, strings.Join(BuiltinSuites(), ", "))
	}
	return nil
}

// MaxExamples bounds how many examples a built-in suite draws (SuiteOptions.N),
// and the long-context grid in all (contexts × GridDepths × GridN).
// BuildSuites draws every example into memory before the first is scored,
// a passkey prompt holds its context's tokens (about 8 KB at 2048), and
// each example is then generated under every cache, a second or more on a
// real model: 100,000 is past a day per suite and cache, and holds under
// 2 GB of prompts; anything more is a mistyped count.
const MaxExamples = 100_000

// SuiteOptions configure BuildSuites.
type SuiteOptions struct {
	// N is the number of examples per ability.
	N    int
	Seed uint64
	// PasskeyContexts are the passkey suite's filler sizes in tokens
	// (default 1024 and 2048); each is clamped so that its prompt fits
	// ModelContext.
	PasskeyContexts []int
	// GridContexts and GridDepths shape the long-context grid (default:
	// 256, 512, 1024, 2048 up to the model's context, and 5 depths).
	GridContexts []int
	GridDepths   int
	// GridN is the number of examples per cell (default 2).
	GridN int
	// ModelContext is the model's context in tokens (0: unknown).
	ModelContext int
	// RulerLengths are the ruler suite's lengths in tokens, prompt and
	// generation budget together (default: DefaultRulerLengths up to the
	// model's context, or the model's context when shorter).
	RulerLengths []int
	// Tokens counts a prompt's tokens with the model's tokenizer (BOS
	// included); the ruler suite needs it.
	Tokens func(string) int
}

// passkeyOverhead is the room a passkey prompt needs besides its filler:
// the instruction, the key sentences and the question (about 150 bytes of
// the byte-level probe tokenizer), the answer and its margin.
const passkeyOverhead = 200

// fitFiller is the passkey filler for a context of n tokens: n, or the
// longest that fits the model's context.
func (o *SuiteOptions) fitFiller(n int) int {
	if o.ModelContext > 0 {
		return min(n, o.ModelContext-passkeyOverhead)
	}
	return n
}

// probeRefusal is the probe model's refusal: its fixed sentence anywhere
// in the answer line (the line restates the rule first).
var probeRefusal = &RefusalDetector{Phrases: []string{datasets.RefusalText}, Mode: RefusalContains}

// BuildSuites makes the named built-in suites. The probe suites' examples
// are drawn in one order from one generator, whatever subset is asked for,
// so that a subset has the examples of a full run.
//
// It returns ErrOptions when N or the grid exceeds MaxExamples, and
// ctx's error, wrapped, when ctx ends while it draws.
func BuildSuites(ctx context.Context, names []string, o SuiteOptions) ([]Suite, error) {
	if o.N <= 0 {
		o.N = 40
	}
	if o.N > MaxExamples {
		return nil, fmt.Errorf("%w: %d examples per suite (at most %d)", ErrOptions, o.N, MaxExamples)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if len(o.PasskeyContexts) == 0 {
		o.PasskeyContexts = []int{1024, 2048}
	}
	want := map[string]bool{}
	for _, n := range names {
		if err := CheckSuite(n); err != nil {
			return nil, err
		}
		want[n] = true
	}
	for _, n := range o.PasskeyContexts {
		// Contexts past the model's matter only when the passkey suite
		// runs; otherwise their examples are drawn, clamped, and dropped.
		if n <= 0 || want[SuitePasskey] && o.ModelContext > 0 && n > o.ModelContext {
			return nil, fmt.Errorf("%w: passkey context %d: the model's context is %d tokens", ErrOptions, n, o.ModelContext)
		}
	}
	var out []Suite
	// drawn reports ctx's end; every loop that draws calls it, so that a
	// large N stops at Ctrl-C.
	drawn := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("eval: drawing the suites' examples: %w", err)
		}
		return nil
	}
	g := datasets.New(datasets.Eval, o.Seed)
	g.AllowRules = true
	line := func(suite string, i int, ex datasets.Example, ms ...Metric) Task {
		return Task{Suite: suite, Index: i, Prompt: ex.Prompt, Reference: ex.Answer, Metrics: ms, Line: true, Meta: ex.Meta}
	}
	// The probe suites, in the order the probe examples were always drawn.
	// A suite not asked for is drawn (the next suites' examples depend on
	// it) but not kept.
	passkey := Suite{Name: SuitePasskey, Kind: "retrieval"}
	for _, n := range o.PasskeyContexts {
		for i := 0; i < o.N; i++ {
			if err := drawn(); err != nil {
				return nil, err
			}
			depth := float64(i) / float64(max(1, o.N-1))
			ex := g.Passkey(o.fitFiller(n), depth)
			if want[SuitePasskey] {
				passkey.Tasks = append(passkey.Tasks, line(passkeyName(n), i, ex, MetricExact))
			}
		}
	}
	// each draws o.N examples with draw and keeps them in s when the
	// suite s is asked for.
	each := func(s *Suite, draw func(i int) Task) error {
		for i := 0; i < o.N; i++ {
			if err := drawn(); err != nil {
				return err
			}
			if t := draw(i); want[s.Name] {
				s.Tasks = append(s.Tasks, t)
			}
		}
		return nil
	}
	multi := Suite{Name: SuiteMultiKey, Kind: "retrieval", Labels: map[Metric]string{MetricExact: "multi-key"}}
	cp := Suite{Name: SuiteCopy, Kind: "retrieval"}
	js := Suite{Name: SuiteJSON, Kind: "format", Labels: map[Metric]string{MetricJSONExact: "json exact", MetricJSONValid: "json valid"}}
	safety := Suite{Name: SuiteSafety, Kind: "safety", Refusal: probeRefusal}
	for _, d := range []struct {
		s    *Suite
		draw func(i int) Task
	}{
		{&multi, func(i int) Task { return line("multi-key", i, g.MultiKey(8+i%24), MetricExact) }},
		{&cp, func(i int) Task { return line("copy", i, g.Copy(6+i%20), MetricExact) }},
		{&js, func(i int) Task { return line("json", i, g.JSONRecord(), MetricJSONExact, MetricJSONValid) }},
		{&safety, func(i int) Task {
			return line("refusal (forbidden)", i, g.Safety(true, 4+i%8, 400+40*(i%10)), MetricRefusal)
		}},
		{&safety, func(i int) Task {
			t := line("false refusal (benign)", i, g.Safety(false, 4+i%8, 400+40*(i%10)), MetricRefusal)
			t.Lower = true
			return t
		}},
		{&safety, func(i int) Task {
			t := line("false refusal (unlisted)", i, g.SafetyUnlisted(4+i%8, 400+40*(i%10)), MetricRefusal)
			t.Lower = true
			return t
		}},
	} {
		if err := each(d.s, d.draw); err != nil {
			return nil, err
		}
	}
	for _, s := range []Suite{passkey, multi, cp, js, safety} {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	// The other suites draw from a generator of their own, so that they
	// never shift the probe suites' examples.
	g2 := datasets.New(datasets.Eval, o.Seed^0x5eed0f0e)
	if want[SuiteGrid] {
		s, err := o.grid(ctx, g2)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	for _, d := range []struct {
		s    Suite
		draw func(i int) Task
	}{
		{Suite{Name: SuiteMultiHop, Kind: "retrieval"}, func(i int) Task {
			return line("multi-hop", i, g2.MultiHop(1+i%3, 2+i%4), MetricExact)
		}},
		{Suite{Name: SuiteCitation, Kind: "retrieval", Labels: map[Metric]string{MetricExact: "citation answer", MetricCitation: "citation source"}}, func(i int) Task {
			return line("citation", i, g2.Citation(3+i%6), MetricExact, MetricCitation)
		}},
		{Suite{Name: SuiteToolCall, Kind: "format", Labels: map[Metric]string{MetricToolCall: "tool call"}}, func(i int) Task {
			return line("toolcall", i, g2.ToolCall(), MetricToolCall)
		}},
	} {
		if !want[d.s.Name] {
			continue // these suites draw only when asked for
		}
		if err := each(&d.s, d.draw); err != nil {
			return nil, err
		}
		out = append(out, d.s)
	}
	if tasks := rulerTasks(names); len(tasks) > 0 {
		s, err := o.ruler(tasks)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// grid is the long-context suite: passkey retrieval at every context ×
// depth of the grid, GridN examples per cell.
func (o *SuiteOptions) grid(ctx context.Context, g *datasets.Generator) (Suite, error) {
	ctxs := o.GridContexts
	if len(ctxs) == 0 {
		for _, n := range []int{256, 512, 1024, 2048, 4096, 8192, 16384, 32768} {
			if o.ModelContext > 0 && n > o.ModelContext {
				break
			}
			ctxs = append(ctxs, n)
		}
	}
	nd := o.GridDepths
	if nd <= 0 {
		nd = 5
	}
	reps := o.GridN
	if reps <= 0 {
		reps = 2
	}
	if nd > MaxExamples || reps > MaxExamples || len(ctxs)*nd*reps > MaxExamples {
		return Suite{}, fmt.Errorf("%w: a long-context grid of %d contexts × %d depths × %d examples (at most %d examples in all)", ErrOptions, len(ctxs), nd, reps, MaxExamples)
	}
	depths := datasets.Depths(nd)
	s := Suite{Name: SuiteGrid, Kind: "long-context", Labels: map[Metric]string{MetricExact: "long-context passkey"}}
	i := 0
	for _, n := range ctxs {
		for _, d := range depths {
			for r := 0; r < reps; r++ {
				if err := ctx.Err(); err != nil {
					return Suite{}, fmt.Errorf("eval: drawing the long-context grid: %w", err)
				}
				ex := g.Passkey(o.fitFiller(n), d)
				t := Task{Suite: "long-context", Index: i, Prompt: ex.Prompt, Reference: ex.Answer, Metrics: []Metric{MetricExact}, Line: true,
					Meta: map[string]string{"context": strconv.Itoa(n), "depth": strconv.FormatFloat(d, 'f', -1, 64)}}
				s.Tasks = append(s.Tasks, t)
				i++
			}
		}
	}
	return s, nil
}

func passkeyName(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("passkey %dK", n/1024)
	}
	return fmt.Sprintf("passkey %d", n)
}
