package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// GSM8K (Cobbe et al. 2021, github.com/openai/grade-school-math) as
// lm-evaluation-harness scores it (lm_eval/tasks/gsm8k/gsm8k.yaml, version
// 3): kvq reads the user's local copy of the test split (JSON Lines with
// "question" and "answer", the answer's last line "#### 72") and of the
// train split for the few-shot examples; it downloads nothing.
//
//	prompt      the shots, each "Question: {question}\nAnswer: {answer}",
//	            then "Question: {question}\nAnswer:", joined by "\n\n"
//	generation  greedy, at most GSM8KMaxTokens tokens, cut before the first
//	            of GSM8KUntil (and at the model's stop tokens)
//	rows        strict-match and flexible-extract, each an exact match of
//	            the extracted answer with the reference's after
//	            NormalizeGSM8K
//
// The two metrics are also offered to tasks files (Metrics), so that any
// local generative set whose references end in "#### N" scores the same way.

// SuiteGSM8K names the GSM8K suite in --tasks ("gsm8k=FILE.jsonl") and is
// its rows' prefix.
const SuiteGSM8K = "gsm8k"

// lm-evaluation-harness's gsm8k filters, each followed by its exact_match:
//
//	strict-match      the first match of `#### (\-?[0-9\.\,]+)`, its group
//	flexible-extract  the last match of `(-?[$0-9.,]{2,})|(-?[0-9]+)`, its
//	                  non-empty group
//
// An output without a match extracts "[invalid]" (lm-eval's fallback), which
// fails.
const (
	MetricStrictMatch     Metric = "strict-match"
	MetricFlexibleExtract Metric = "flexible-extract"
)

// GSM8K generation settings, lm-eval's: its max_gen_toks default and the
// task's until.
const (
	GSM8KMaxTokens = 256
	// DefaultGSM8KShots is lm-eval's num_fewshot for gsm8k (and the Open
	// LLM Leaderboard's).
	DefaultGSM8KShots = 5
)

// GSM8KUntil are the strings generation stops before (the task's
// generation_kwargs.until).
func GSM8KUntil() []string { return []string{"Question:", "</s>", "<|im_end|>"} }

var (
	gsm8kStrict   = regexp.MustCompile(`#### (\-?[0-9\.\,]+)`)
	gsm8kFlexible = regexp.MustCompile(`(-?[$0-9.,]{2,})|(-?[0-9]+)`)
	// gsm8kIgnore are exact_match's regexes_to_ignore, removed in order
	// from prediction and reference alike. Python's `\.$` also matches a
	// period before a final newline; the group keeps that newline.
	gsm8kIgnore = []*regexp.Regexp{regexp.MustCompile(`,`), regexp.MustCompile(`\$`),
		regexp.MustCompile(`(?s).*#### `), regexp.MustCompile(`\.(\n?)$`)}
)

// gsm8kInvalid is what a filter extracts from an output without a match.
const gsm8kInvalid = "[invalid]"

// ExtractGSM8K is the answer filter m (strict-match or flexible-extract)
// takes from output, spaces trimmed, or "[invalid]".
func ExtractGSM8K(m Metric, output string) string {
	switch m {
	case MetricStrictMatch:
		if g := gsm8kStrict.FindStringSubmatch(output); g != nil {
			return strings.TrimSpace(g[1])
		}
	case MetricFlexibleExtract:
		all := gsm8kFlexible.FindAllStringSubmatch(output, -1)
		if len(all) == 0 {
			break
		}
		last := all[len(all)-1]
		for _, g := range last[1:] {
			if g != "" {
				return strings.TrimSpace(g)
			}
		}
	}
	return gsm8kInvalid
}

// NormalizeGSM8K is exact_match's normalization of prediction and
// reference: ",", "$", everything up to the last "#### " and a final "."
// removed, in that order, then lowercased (ignore_case).
func NormalizeGSM8K(s string) string {
	for i, re := range gsm8kIgnore {
		repl := ""
		if i == len(gsm8kIgnore)-1 {
			repl = "${1}"
		}
		s = re.ReplaceAllString(s, repl)
	}
	return strings.ToLower(s)
}

// scoreGSM8K scores output with filter m against reference, an answer
// whose last line is "#### N" (or the bare N).
func scoreGSM8K(m Metric, output, reference string) (Score, error) {
	if reference == "" {
		return Score{}, fmt.Errorf("%w: %s needs a non-empty reference", ErrReference, m)
	}
	got := ExtractGSM8K(m, output)
	want := NormalizeGSM8K(reference)
	if NormalizeGSM8K(got) == want {
		return Score{Pass: true, Value: 1, Detail: "answer " + want}, nil
	}
	return Score{Detail: fmt.Sprintf("extracted %q, want %q", got, want)}, nil
}

// GSM8KItem is one line of a GSM8K file.
type GSM8KItem struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// ParseGSM8K reads a GSM8K split as JSON Lines (Hugging Face's openai/gsm8k
// dump, or any file with "question" and "answer" per line; other keys are
// ignored, blank lines skipped). name is the file in errors. A line
// without a question or answer is an ErrTasks naming the line; with
// scored, so is an answer without "#### " (strict-match and the reference's
// normalization need it).
func ParseGSM8K(data []byte, name string, scored bool) ([]GSM8KItem, error) {
	var out []GSM8KItem
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), maxTaskLine)
	ln := 0
	for sc.Scan() {
		ln++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var it GSM8KItem
		if err := json.Unmarshal(text, &it); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: not a GSM8K object: %w", ErrTasks, name, ln, err)
		}
		switch {
		case strings.TrimSpace(it.Question) == "":
			return nil, fmt.Errorf(`%w: %s:%d: no "question"`, ErrTasks, name, ln)
		case strings.TrimSpace(it.Answer) == "":
			return nil, fmt.Errorf(`%w: %s:%d: no "answer"`, ErrTasks, name, ln)
		case scored && !strings.Contains(it.Answer, "#### "):
			return nil, fmt.Errorf(`%w: %s:%d: the answer has no "#### N" line (GSM8K's final answer)`, ErrTasks, name, ln)
		}
		out = append(out, it)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%w: %s:%d: a line longer than %d MiB", ErrTasks, name, ln+1, maxTaskLine>>20)
	} else if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTasks, name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s has no items", ErrTasks, name)
	}
	return out, nil
}

// GSM8KPrompt is lm-eval's prompt for question after shots: each shot
// "Question: q\nAnswer: a" (doc_to_text, target_delimiter " ",
// doc_to_target), joined and followed by "\n\n" (fewshot_delimiter), then
// "Question: question\nAnswer:".
func GSM8KPrompt(shots []GSM8KItem, question string) string {
	var b strings.Builder
	for _, s := range shots {
		b.WriteString("Question: " + s.Question + "\nAnswer: " + s.Answer + "\n\n")
	}
	b.WriteString("Question: " + question + "\nAnswer:")
	return b.String()
}

// GSM8KOptions configure GSM8KSuite.
type GSM8KOptions struct {
	// Test are the items scored, the first N of them (N ≤ 0: all).
	Test []GSM8KItem
	N    int
	// Shots are the few-shot examples, the first Fewshot of them, in file
	// order (lm-eval draws them at random from the train split with a
	// fixed seed; a file of the chosen shots gives the same prompt).
	Shots   []GSM8KItem
	Fewshot int
}

// GSM8KSuite is the GSM8K suite: one task per scored item, scored with
// strict-match and flexible-extract (rows "gsm8k strict-match" and "gsm8k
// flexible-extract"). It returns ErrOptions when Fewshot is negative or
// more than the shots given.
func GSM8KSuite(o GSM8KOptions) (Suite, error) {
	if o.Fewshot < 0 || o.Fewshot > len(o.Shots) {
		return Suite{}, fmt.Errorf("%w: %d few-shot examples asked for, %d given", ErrOptions, o.Fewshot, len(o.Shots))
	}
	n := len(o.Test)
	if o.N > 0 {
		n = min(n, o.N)
	}
	if n > MaxExamples {
		return Suite{}, fmt.Errorf("%w: %d GSM8K items (at most %d)", ErrOptions, n, MaxExamples)
	}
	shots := o.Shots[:o.Fewshot]
	s := Suite{Name: SuiteGSM8K, Kind: "reasoning", Labels: map[Metric]string{
		MetricStrictMatch: SuiteGSM8K + " " + string(MetricStrictMatch), MetricFlexibleExtract: SuiteGSM8K + " " + string(MetricFlexibleExtract)}}
	for i, it := range o.Test[:n] {
		s.Tasks = append(s.Tasks, Task{Suite: SuiteGSM8K, Index: i, ID: SuiteGSM8K + "#" + strconv.Itoa(i),
			Prompt: GSM8KPrompt(shots, it.Question), Reference: it.Answer,
			Metrics: []Metric{MetricStrictMatch, MetricFlexibleExtract}, MaxTokens: GSM8KMaxTokens, Until: GSM8KUntil(),
			Meta: map[string]string{"shots": strconv.Itoa(len(shots))}})
	}
	return s, nil
}

// cutUntil is text before the first of until (text when none occurs), and
// whether one occurred.
func cutUntil(text string, until []string) (string, bool) {
	cut := -1
	for _, u := range until {
		if u == "" {
			continue
		}
		if i := strings.Index(text, u); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut < 0 {
		return text, false
	}
	return text[:cut], true
}
