package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/pkg/chat/toolcall"
)

// Output metrics: one model output scored against one reference, the same
// way for the baseline cache and every candidate cache, so that paired
// statistics (stats.go) can compare them item by item.
//
// Every metric returns a Score with Value in [0, 1]. Pass/fail metrics set
// Value to 1 or 0; the graded ones (f1, rouge-l, citation) set it to the
// measured quantity and Pass from it.
//
//	exact        strings.Fields(output) joined by " " == the same of reference: surrounding
//	             whitespace (a trailing newline) is ignored and inner runs of whitespace
//	             count as one space; case and punctuation count
//	contains     reference is a substring of output, case-sensitive (RULER's string_match
//	             lowercases both; lowercase the reference and output first to get it)
//	f1           SQuAD / LongBench qa_f1: tokens = strings.Fields(NormalizeAnswer(s));
//	             common = |multiset intersection|; P = common/|pred|, R = common/|gold|;
//	             F1 = 2PR/(P+R), 0 when common = 0 (also when both are empty, as
//	             LongBench); reference "a|||b" lists alternatives, Value = max over them;
//	             Pass = Value ≥ Threshold
//	rouge-l      LCS F-measure (Lin 2004) over word tokens: P = LCS/|pred|, R = LCS/|ref|,
//	             F = (1+β²)PR/(R+β²P) with β = 1, i.e. 2PR/(P+R); 0 when either text is
//	             empty; alternatives and Pass as for f1
//	json-valid   output, with a ```json / ``` fence stripped as IFEval's json_format
//	             does, is one JSON value
//	json-exact   that JSON is deep-equal to the reference JSON (key order irrelevant,
//	             numbers compared as numbers: 1 = 1.0)
//	json-schema  that JSON validates against ScoreOptions.Schema, or against the
//	             reference when Schema is empty (ValidateJSONSchema: a full JSON Schema
//	             validator, draft 2020-12 unless "$schema" names another draft; only
//	             references inside the schema are resolved)
//	refusal      the RefusalDetector says the output refuses
//	no-refusal   it says the output does not
//	regex        reference is a Go regexp that matches (searches) the raw output
//	tool-call    the first function call in output equals the reference call: Value 1
//	             when name and arguments match, 0.5 when only the name does, 0
//	             otherwise; Pass = Value = 1 (see ScoreOutput for the formats read)
//	citation     F1 between the passage ids cited in output and the reference ids
//	             ("2,5"); Pass = the two sets are equal (see ScoreOutput)
//	strict-match, flexible-extract
//	             lm-eval's gsm8k filters and exact_match: the "#### N" answer, or the
//	             last number, of output equals the reference's "#### N" (gsm8k.go)
//
// Threshold (ScoreOptions) applies to f1 and rouge-l only; 0 means the
// default 0.5. citation passes on exact set equality whatever the
// threshold, since a partly right citation set is a wrong one.
//
// About rouge-l: LongBench scores with the `rouge` package (pltrdy/rouge),
// whose rouge-l "f" is computed with β = 1 (2PR/(P+R+1e-8)) but at summary
// level: both texts are split into sentences at ".", the LCS is the union
// LCS of each reference sentence with all candidate sentences, and |pred|,
// |ref| count distinct words. kvq uses the plain single-sequence LCS over
// all tokens, tokenized as that package does (periods separate, other
// punctuation and case are kept, whitespace splits), so the two agree on
// single-sentence texts without repeated words and differ slightly
// otherwise.

// Metric names a way of scoring an output against a reference.
type Metric string

// The metrics, by their user-facing names.
const (
	MetricExact      Metric = "exact"
	MetricContains   Metric = "contains"
	MetricF1         Metric = "f1"
	MetricRougeL     Metric = "rouge-l"
	MetricJSONValid  Metric = "json-valid"
	MetricJSONExact  Metric = "json-exact"
	MetricJSONSchema Metric = "json-schema"
	MetricRefusal    Metric = "refusal"
	MetricNoRefusal  Metric = "no-refusal"
	MetricRegex      Metric = "regex"
	MetricToolCall   Metric = "tool-call"
	MetricCitation   Metric = "citation"
)

// Metrics lists every metric in documentation order.
func Metrics() []Metric {
	return []Metric{MetricExact, MetricContains, MetricF1, MetricRougeL, MetricJSONValid, MetricJSONExact,
		MetricJSONSchema, MetricRefusal, MetricNoRefusal, MetricRegex, MetricToolCall, MetricCitation,
		MetricStrictMatch, MetricFlexibleExtract}
}

// ParseMetric parses a metric name (surrounding spaces and case ignored).
// The error wraps ErrMetric and lists the valid names.
func ParseMetric(s string) (Metric, error) {
	m := Metric(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(Metrics(), m) {
		return m, nil
	}
	return "", unknownMetric(s)
}

func unknownMetric(s string) error {
	names := make([]string, 0, len(Metrics()))
	for _, v := range Metrics() {
		names = append(names, string(v))
	}
	return fmt.Errorf("%w %q (valid: %s)", ErrMetric, s, strings.Join(names, ", "))
}

// Score is one output's score under one metric.
type Score struct {
	Pass bool
	// Value is in [0, 1]: 1 or 0 for pass/fail metrics, the F1, ROUGE-L F,
	// tool-call or citation score for the graded ones.
	Value float64
	// Detail says why, in a few words (the first difference, the matched
	// refusal phrase, the schema violation); it may be empty on a pass.
	Detail string
}

// ScoreOptions configure ScoreOutput; the zero value is the defaults.
type ScoreOptions struct {
	// Threshold is the Value at which f1 and rouge-l pass, in (0, 1]
	// (compared with a 1e-12 tolerance, so that an F1 of exactly 1/2 on
	// paper passes 0.5); 0 means DefaultThreshold.
	Threshold float64
	// Refusal is the detector of refusal and no-refusal; nil means
	// prefix mode with DefaultRefusalPhrases.
	Refusal *RefusalDetector
	// Schema is the JSON schema of json-schema; empty means the reference
	// is the schema.
	Schema json.RawMessage
	// Classes are LongBench's all_classes (classification-score), and
	// FirstLine scores only the output's first line (LongBench's trec,
	// triviaqa, samsum and lsht); see longbench_metrics.go.
	Classes   []string
	FirstLine bool
}

// DefaultThreshold is the f1 and rouge-l pass threshold when
// ScoreOptions.Threshold is 0.
const DefaultThreshold = 0.5

// ScoreOutput scores output against reference with metric m (see the
// table at the top of this file).
//
// tool-call reads the first call from output in any of these forms (the
// parser is toolcall.First, which kvq serve's tool calls share): a JSON
// object {"name": ..., "arguments": {...}} (or "parameters", as Llama 3.1
// writes it; an OpenAI-style {"function": {"name", "arguments"}} wrapper,
// and arguments given as a JSON string, are unwrapped); the same after
// Llama 3.1's "<|python_tag|>"; Qwen/Hermes "<tool_call>{...}</tool_call>";
// Mistral "[TOOL_CALLS] [{...}]" and "[TOOL_CALLS]name[ARGS]{...}"; a JSON
// array of calls (its first); any of these inside a ``` fence or after
// leading prose. The reference is a call in the same shapes. Missing or
// null arguments equal {}. Names compare exactly, arguments as JSON
// (json-exact's equality).
//
// citation reads ids from brackets, [1], [2, 3], [1-3], [doc3], [P4],
// [Doc 2; S5], and from words, "Passage 7", "(passage 2)", "documents 1
// and 4", "doc 3". An id with digits is normalized to its digits without
// leading zeros ("doc03" → "3"); one without digits is lowercased, and a
// bracketed id without digits ([intro]) counts only when the reference has
// such ids, so that markdown like [x] does not count as a citation of a
// numbered passage. Bracketed text followed by "(" (a markdown link) is
// not a citation. The reference is ids separated by commas, semicolons or
// spaces; an empty reference means "cites nothing" (Value 1 when output
// cites nothing, else 0). Value = 2PR/(P+R) with P = |cited ∩ ref|/|cited|,
// R = |cited ∩ ref|/|ref|.
//
// A model's wrong or unparsable output is a failing Score, never an error.
// The error is for the caller's mistakes: an unknown metric (ErrMetric), a
// bad reference (ErrReference), a malformed schema (ErrSchema), or bad
// options (ErrOptions).
func ScoreOutput(m Metric, output, reference string, opts ScoreOptions) (Score, error) {
	threshold, err := opts.threshold()
	if err != nil {
		return Score{}, err
	}
	switch m {
	case MetricExact:
		return passFail(strings.Join(strings.Fields(output), " ") == strings.Join(strings.Fields(reference), " "), ""), nil
	case MetricContains:
		if reference == "" {
			return Score{}, fmt.Errorf("%w: contains needs a non-empty reference", ErrReference)
		}
		return passFail(strings.Contains(output, reference), ""), nil
	case MetricF1:
		return bestOf(output, reference, threshold, "f1", TokenF1)
	case MetricRougeL:
		return bestOf(output, reference, threshold, "rouge-l", RougeL)
	case MetricJSONValid:
		_, err := decodeJSON([]byte(StripJSONFence(output)))
		return passFail(err == nil, errDetail(err)), nil
	case MetricJSONExact:
		return scoreJSONExact(output, reference)
	case MetricJSONSchema:
		return scoreJSONSchema(output, reference, opts.Schema)
	case MetricRefusal, MetricNoRefusal:
		return scoreRefusal(m, output, opts.Refusal)
	case MetricRegex:
		re, err := regexp.Compile(reference)
		if err != nil {
			return Score{}, fmt.Errorf("%w: regexp %q: %w", ErrReference, reference, err)
		}
		return passFail(re.MatchString(output), ""), nil
	case MetricToolCall:
		return scoreToolCall(output, reference)
	case MetricCitation:
		return scoreCitation(output, reference), nil
	case MetricStringMatchAll, MetricStringMatchPart:
		return scoreStringMatch(m, output, reference)
	case MetricStrictMatch, MetricFlexibleExtract:
		return scoreGSM8K(m, output, reference)
	case MetricChoice:
		return scoreChoice(output, reference)
	}
	if longBenchMetric(m) {
		return scoreLongBench(m, output, reference, opts)
	}
	return Score{}, unknownMetric(string(m))
}

func (o ScoreOptions) threshold() (float64, error) {
	switch t := o.Threshold; {
	case t == 0:
		return DefaultThreshold, nil
	case t > 0 && t <= 1:
		return t, nil
	}
	return 0, fmt.Errorf("%w: threshold %v is not in (0, 1]", ErrOptions, o.Threshold)
}

func passFail(ok bool, detail string) Score {
	if ok {
		return Score{Pass: true, Value: 1, Detail: detail}
	}
	return Score{Value: 0, Detail: detail}
}

func errDetail(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// bestOf scores output against each "|||"-separated reference answer with
// f and keeps the best.
func bestOf(output, reference string, threshold float64, name string, f func(pred, ref string) float64) (Score, error) {
	answers := referenceAnswers(reference)
	if len(answers) == 0 {
		return Score{}, fmt.Errorf("%w: %s needs a non-empty reference", ErrReference, name)
	}
	best, arg := -1.0, 0
	for i, a := range answers {
		if v := f(output, a); v > best {
			best, arg = v, i
		}
	}
	detail := fmt.Sprintf("%s %.3f", name, best)
	if len(answers) > 1 {
		detail += fmt.Sprintf(" (best of %d answers: %q)", len(answers), answers[arg])
	}
	// The tolerance keeps F1s that are exactly the threshold on paper
	// (2PR/(P+R) = 0.5) from failing on rounding.
	return Score{Pass: best >= threshold-1e-12, Value: best, Detail: detail}, nil
}

// referenceAnswers splits a reference into its "|||"-separated
// alternatives, trimmed, dropping empty ones.
func referenceAnswers(reference string) []string {
	var out []string
	for _, a := range strings.Split(reference, "|||") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// NormalizeAnswer is SQuAD's normalize_answer, which LongBench's qa_f1
// uses: lowercase, remove ASCII punctuation (Python's string.punctuation),
// remove the articles a, an, the (as whole words, \b(a|an|the)\b with
// Unicode word characters), and collapse whitespace to single spaces.
func NormalizeAnswer(s string) string {
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && strings.ContainsRune(asciiPunctuation, r) {
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(removeArticles(s)), " ")
}

// asciiPunctuation is Python's string.punctuation.
const asciiPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// removeArticles replaces every maximal run of word characters equal to
// "a", "an" or "the" with a space, which is what Python's
// re.sub(r"\b(a|an|the)\b", " ", s) does.
func removeArticles(s string) string {
	var b strings.Builder
	word := func(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }
	for len(s) > 0 {
		i := strings.IndexFunc(s, func(r rune) bool { return !word(r) })
		if i == 0 {
			j := strings.IndexFunc(s, word)
			if j < 0 {
				j = len(s)
			}
			b.WriteString(s[:j])
			s = s[j:]
			continue
		}
		if i < 0 {
			i = len(s)
		}
		switch run := s[:i]; run {
		case "a", "an", "the":
			b.WriteByte(' ')
		default:
			b.WriteString(run)
		}
		s = s[i:]
	}
	return b.String()
}

// TokenF1 is SQuAD's / LongBench's qa_f1 of one prediction against one
// gold answer: with tokens = strings.Fields(NormalizeAnswer(s)) and common
// the size of their multiset intersection, P = common/|pred|, R =
// common/|gold|, F1 = 2PR/(P+R), and 0 when common is 0.
func TokenF1(prediction, gold string) float64 {
	pred := strings.Fields(NormalizeAnswer(prediction))
	ref := strings.Fields(NormalizeAnswer(gold))
	counts := make(map[string]int, len(ref))
	for _, t := range ref {
		counts[t]++
	}
	common := 0
	for _, t := range pred {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	return f1(common, len(pred), len(ref))
}

// f1 is 2PR/(P+R) from the overlap and the two sizes, 0 when the overlap
// is 0.
func f1(common, npred, nref int) float64 {
	if common == 0 {
		return 0
	}
	p := float64(common) / float64(npred)
	r := float64(common) / float64(nref)
	return 2 * p * r / (p + r)
}

// RougeL is the ROUGE-L F-measure with β = 1 of a prediction against a
// reference: with LCS the length of the longest common subsequence of
// their word tokens, P = LCS/|pred|, R = LCS/|ref|, F = 2PR/(P+R); 0 when
// either has no token. Tokens split at whitespace and periods, case and
// other punctuation kept (the `rouge` package's tokenization).
func RougeL(prediction, reference string) float64 {
	pred, ref := rougeTokens(prediction), rougeTokens(reference)
	if len(pred) == 0 || len(ref) == 0 {
		return 0
	}
	return f1(lcsLen(pred, ref), len(pred), len(ref))
}

func rougeTokens(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || unicode.IsSpace(r) })
}

// lcsLen is the length of the longest common subsequence of a and b, in
// O(len(a)·len(b)) time and O(len(b)) space.
func lcsLen(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// StripJSONFence removes what IFEval's json_format check removes before
// json.loads: surrounding whitespace, a leading "```json", "```Json",
// "```JSON" and then "```", a trailing "```", and whitespace again.
//
// Go's encoding/json is stricter than Python's json.loads in one way that
// shows: NaN, Infinity and -Infinity are not JSON to it.
func StripJSONFence(s string) string {
	s = strings.TrimSpace(s)
	for _, p := range []string{"```json", "```Json", "```JSON", "```"} {
		s = strings.TrimPrefix(s, p)
	}
	return strings.TrimSpace(strings.TrimSuffix(s, "```"))
}

func scoreJSONExact(output, reference string) (Score, error) {
	want, err := decodeJSON([]byte(StripJSONFence(reference)))
	if err != nil {
		return Score{}, fmt.Errorf("%w: json-exact: %w", ErrReference, err)
	}
	got, err := decodeJSON([]byte(StripJSONFence(output)))
	if err != nil {
		return passFail(false, err.Error()), nil
	}
	d := jsonDiff(got, want, "")
	return passFail(d == "", d), nil
}

func scoreJSONSchema(output, reference string, schema json.RawMessage) (Score, error) {
	if len(schema) == 0 {
		schema = []byte(reference)
	}
	s, err := CompileJSONSchema(schema)
	if err != nil {
		return Score{}, err
	}
	err = s.Validate([]byte(StripJSONFence(output)))
	if errors.Is(err, ErrSchema) { // a $ref loop the compiler could not see
		return Score{}, err
	}
	return passFail(err == nil, errDetail(err)), nil
}

func scoreRefusal(m Metric, output string, d *RefusalDetector) (Score, error) {
	if err := d.check(); err != nil {
		return Score{}, err
	}
	phrase, refused := d.Match(output)
	detail := "no refusal phrase"
	if refused {
		detail = fmt.Sprintf("refusal phrase %q", phrase)
	}
	return passFail(refused == (m == MetricRefusal), detail), nil
}

func scoreToolCall(output, reference string) (Score, error) {
	want, err := toolcall.First(reference)
	if err != nil {
		return Score{}, fmt.Errorf("%w: tool-call: %w", ErrReference, err)
	}
	got, err := toolcall.First(output)
	if err != nil {
		return Score{Detail: err.Error()}, nil
	}
	argDiff := jsonDiff(got.Arguments, want.Arguments, "")
	switch {
	case got.Name != want.Name:
		return Score{Detail: fmt.Sprintf("name: got %q, want %q", got.Name, want.Name)}, nil
	case argDiff != "":
		return Score{Value: 0.5, Detail: "arguments differ: " + argDiff}, nil
	}
	return Score{Pass: true, Value: 1}, nil
}

// Citation patterns: brackets holding ids, and ids after a passage word.
var (
	citeBracket  = regexp.MustCompile(`\[([^\[\]\n]{1,80})\](\()?`)
	citeWord     = regexp.MustCompile(`(?i)\b(?:passages?|documents?|docs?)\s*#?\s*(\d+(?:\s*(?:,|;|&|and|or)\s*#?\s*\d+)*)`)
	citeItem     = regexp.MustCompile(`^\^?[A-Za-z]{0,10}[\s#_-]*\d+$`)
	citeRange    = regexp.MustCompile(`^\^?[A-Za-z]{0,10}[\s#_-]*(\d+)\s*[-–]\s*[A-Za-z]{0,10}[\s#_-]*(\d+)$`)
	citeWordItem = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31}$`)
	citeDigits   = regexp.MustCompile(`\d+`)
	citeSplit    = regexp.MustCompile(`[,;\s]+`)
)

// maxCiteRange bounds the ids a bracketed range like [1-3] expands to.
const maxCiteRange = 50

func scoreCitation(output, reference string) Score {
	want := map[string]bool{}
	wordIDs := false
	for _, f := range citeSplit.Split(strings.TrimSpace(reference), -1) {
		if f == "" {
			continue
		}
		id := normalizeCiteID(f)
		want[id] = true
		wordIDs = wordIDs || !citeDigits.MatchString(f)
	}
	got := citedIDs(output, wordIDs)
	common := 0
	for id := range got {
		if want[id] {
			common++
		}
	}
	v := f1(common, len(got), len(want))
	if len(got) == 0 && len(want) == 0 {
		v = 1
	}
	equal := common == len(got) && common == len(want)
	detail := fmt.Sprintf("cited [%s], want [%s]", strings.Join(sortedIDs(got), " "), strings.Join(sortedIDs(want), " "))
	return Score{Pass: equal, Value: v, Detail: detail}
}

// citedIDs collects the normalized ids cited in s; wordIDs admits
// bracketed ids without digits.
func citedIDs(s string, wordIDs bool) map[string]bool {
	ids := map[string]bool{}
	for _, m := range citeBracket.FindAllStringSubmatch(s, -1) {
		if m[2] != "" { // [text](url): a markdown link
			continue
		}
		for _, item := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ';' }) {
			item = strings.TrimSpace(item)
			switch {
			case citeItem.MatchString(item):
				ids[normalizeCiteID(item)] = true
			case citeRange.MatchString(item):
				r := citeRange.FindStringSubmatch(item)
				lo, _ := strconv.Atoi(r[1])
				hi, _ := strconv.Atoi(r[2])
				for i := lo; i <= hi && i <= lo+maxCiteRange; i++ {
					ids[strconv.Itoa(i)] = true
				}
			case wordIDs && citeWordItem.MatchString(item):
				ids[normalizeCiteID(item)] = true
			}
		}
	}
	for _, m := range citeWord.FindAllStringSubmatch(s, -1) {
		for _, d := range citeDigits.FindAllString(m[1], -1) {
			ids[normalizeCiteID(d)] = true
		}
	}
	return ids
}

// normalizeCiteID keeps an id's digits without leading zeros ("doc03" →
// "3"), or lowercases an id that has none.
func normalizeCiteID(id string) string {
	d := strings.Join(citeDigits.FindAllString(id, -1), "")
	if d == "" {
		return strings.ToLower(strings.TrimSpace(id))
	}
	if d = strings.TrimLeft(d, "0"); d == "" {
		d = "0"
	}
	return d
}

// sortedIDs lists ids with numbers first, by value.
func sortedIDs(ids map[string]bool) []string {
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b string) int {
		an, bn := isDigits(a), isDigits(b)
		switch {
		case an && bn && len(a) != len(b):
			return len(a) - len(b)
		case an != bn && an:
			return -1
		case an != bn:
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

func isDigits(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}
