package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/pkg/chat"
)

// LongBench (Bai et al. 2023, github.com/THUDM/LongBench) from the user's
// local files; kvq downloads nothing.
//
// v1 (--tasks longbench=FILE.jsonl): the files of THUDM/LongBench's
// data.zip, one item per line with input, context, answers, length,
// dataset, language, all_classes and _id. Each dataset (the "dataset"
// field, else the file's name less ".jsonl" and a LongBench-E "_e") is
// prompted with its dataset2prompt template, generates at most its
// dataset2maxlen tokens greedily and is scored with its dataset2metric
// (longbench_metrics.go). As LongBench's pred.py: a prompt longer than the
// budget is cut in the middle, its first and last half tokens kept
// (LongBenchTruncate), and the chat template is applied (when the model has
// one) except on trec, triviaqa, samsum, lsht, lcc and repobench-p; trec,
// triviaqa, samsum and lsht score the output's first line (eval.py).
// Rows: "longbench:DATASET" and, for LongBench-E's buckets of the item's
// "length" field (words; characters for Chinese), "longbench:DATASET
// 0-4k", "4-8k" and "8k+".
//
// v2 (--tasks longbench2=FILE.jsonl, or the data.json array): _id,
// domain, sub_domain, difficulty, length, question, choice_A … choice_D,
// answer and context per item, prompted with v2's 0-shot template, 128
// tokens, the chat template applied when the model has one, the answer
// letter extracted as v2's pred.py does (ExtractLongBench2Answer). Rows:
// "longbench2", then "longbench2 easy", "hard", "short", "medium", "long".
//
// The budget of a prompt is the context (--max-context, else the model's)
// less the dataset's generation budget and the tokens the chat template
// adds: LongBench's model2maxlen leaves that room by hand (3500 of 4K).

// Suite names and row prefixes.
const (
	SuiteLongBench  = "longbench"
	SuiteLongBench2 = "longbench2"
)

// LongBenchItem is one line of a LongBench v1 file.
type LongBenchItem struct {
	Input      string   `json:"input"`
	Context    string   `json:"context"`
	Answers    []string `json:"answers"`
	Length     int      `json:"length"`
	Dataset    string   `json:"dataset"`
	Language   string   `json:"language"`
	AllClasses []string `json:"all_classes"`
	ID         string   `json:"_id"`
}

// LongBench2Item is one item of LongBench v2.
type LongBench2Item struct {
	ID         string `json:"_id"`
	Domain     string `json:"domain"`
	SubDomain  string `json:"sub_domain"`
	Difficulty string `json:"difficulty"`
	Length     string `json:"length"`
	Question   string `json:"question"`
	ChoiceA    string `json:"choice_A"`
	ChoiceB    string `json:"choice_B"`
	ChoiceC    string `json:"choice_C"`
	ChoiceD    string `json:"choice_D"`
	Answer     string `json:"answer"`
	Context    string `json:"context"`
}

// longBenchDataset is one v1 dataset's settings (LongBench/config and
// eval.py).
type longBenchDataset struct {
	prompt string
	maxGen int
	metric Metric
}

// longBenchDatasets are dataset2prompt, dataset2maxlen and dataset2metric.
var longBenchDatasets = map[string]longBenchDataset{
	"narrativeqa":          {"You are given a story, which can be either a novel or a movie script, and a question. Answer the question asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: {context}\n\nNow, answer the question based on the story asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:", 128, MetricQAF1},
	"qasper":               {"You are given a scientific article and a question. Answer the question as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nArticle: {context}\n\n Answer the question based on the above article as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:", 128, MetricQAF1},
	"multifieldqa_en":      {"Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question based on the above text, only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:", 64, MetricQAF1},
	"multifieldqa_zh":      {"阅读以下文字并用中文简短回答：\n\n{context}\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，不要输出任何其他字词。\n\n问题：{input}\n回答：", 64, MetricQAF1Zh},
	"hotpotqa":             {longBenchPassagesQA, 32, MetricQAF1},
	"2wikimqa":             {longBenchPassagesQA, 32, MetricQAF1},
	"musique":              {longBenchPassagesQA, 32, MetricQAF1},
	"dureader":             {"请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n问题：{input}\n回答：", 128, MetricRougeZh},
	"gov_report":           {"You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n{context}\n\nNow, write a one-page summary of the report.\n\nSummary:", 512, MetricRouge},
	"qmsum":                {"You are given a meeting transcript and a query containing a question or instruction. Answer the query in one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based on the above meeting transcript in one or more sentences.\n\nQuery: {input}\nAnswer:", 512, MetricRouge},
	"multi_news":           {"You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\nNow, write a one-page summary of all the news.\n\nSummary:", 512, MetricRouge},
	"vcsum":                {"下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n会议总结：", 512, MetricRougeZh},
	"trec":                 {"Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}", 64, MetricClassification},
	"triviaqa":             {"Answer the question based on the given passage. Only give me the answer and do not output any other words. The following are some examples.\n\n{context}\n\n{input}", 32, MetricQAF1},
	"samsum":               {"Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n{input}", 128, MetricRouge},
	"lsht":                 {"请判断给定新闻的类别，下面是一些例子。\n\n{context}\n{input}", 64, MetricClassification},
	"passage_count":        {"There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other words, how many non-repeating paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of unique paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, and so on.\n\nThe final answer is: ", 32, MetricCount},
	"passage_retrieval_en": {"Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\nPlease enter the number of the paragraph that the abstract is from. The answer format must be like \"Paragraph 1\", \"Paragraph 2\", etc.\n\nThe answer is: ", 32, MetricRetrieval},
	"passage_retrieval_zh": {"以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要\n\n{input}\n\n请输入摘要所属段落的编号。答案格式必须是\"段落1\"，\"段落2\"等格式\n\n答案是：", 32, MetricRetrievalZh},
	"lcc":                  {"Please complete the code given below. \n{context}Next line of code:\n", 64, MetricCodeSim},
	"repobench-p":          {"Please complete the code given below. \n{context}{input}Next line of code:\n", 64, MetricCodeSim},
}

const longBenchPassagesQA = "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:"

// LongBenchDatasets lists LongBench v1's datasets in pred.py's order.
func LongBenchDatasets() []string {
	return []string{"narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique",
		"dureader", "gov_report", "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht",
		"passage_count", "passage_retrieval_en", "passage_retrieval_zh", "lcc", "repobench-p"}
}

// LongBenchNoChat reports whether pred.py leaves dataset's prompt without
// the chat template ("chat models are better off without build prompts on
// these tasks").
func LongBenchNoChat(dataset string) bool {
	return slices.Contains([]string{"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}, dataset)
}

// longBenchFirstLine reports whether eval.py scores only dataset's first
// output line.
func longBenchFirstLine(dataset string) bool {
	return slices.Contains([]string{"trec", "triviaqa", "samsum", "lsht"}, dataset)
}

// LongBenchPrompt is dataset's prompt for it: prompt_format.format(**item),
// {context} and {input} replaced in one pass (Python's str.format: a
// context that holds "{input}" keeps it).
func LongBenchPrompt(dataset string, it LongBenchItem) (string, error) {
	d, ok := longBenchDatasets[dataset]
	if !ok {
		return "", unknownLongBench(dataset)
	}
	return strings.NewReplacer("{context}", it.Context, "{input}", it.Input).Replace(d.prompt), nil
}

func unknownLongBench(dataset string) error {
	return fmt.Errorf("unknown LongBench dataset %q (have %s)", dataset, strings.Join(LongBenchDatasets(), ", "))
}

// LongBenchBucket is LongBench-E's bucket of an item of length words:
// "0-4k" below 4000, "4-8k" below 8000, else "8k+".
func LongBenchBucket(length int) string {
	switch {
	case length < 4000:
		return "0-4k"
	case length < 8000:
		return "4-8k"
	}
	return "8k+"
}

// longBench2Template is LongBench v2's prompts/0shot.txt.
const longBench2Template = "Please read the following text and answer the question below.\n\n<text>\n$DOC$\n</text>\n\nWhat is the correct answer to this question: $Q$\nChoices:\n(A) $C_A$\n(B) $C_B$\n(C) $C_C$\n(D) $C_D$\n\nFormat your response as follows: \"The correct answer is (insert answer here)\"."

// LongBench2MaxTokens is v2's max_new_tokens without chain of thought.
const LongBench2MaxTokens = 128

// LongBench2Prompt is v2's 0-shot prompt for it: the template's $DOC$, $Q$,
// $C_A$ … $C_D$ replaced in that order by the stripped fields, one after
// the other (as pred.py's chained str.replace: a context holding "$Q$"
// has it replaced too).
func LongBench2Prompt(it LongBench2Item) string {
	s := longBench2Template
	for _, r := range [][2]string{{"$DOC$", it.Context}, {"$Q$", it.Question}, {"$C_A$", it.ChoiceA}, {"$C_B$", it.ChoiceB}, {"$C_C$", it.ChoiceC}, {"$C_D$", it.ChoiceD}} {
		s = strings.ReplaceAll(s, r[0], strings.TrimSpace(r[1]))
	}
	return s
}

// LongBenchTruncate cuts prompt in the middle to at most max tokens as
// LongBench does; encode tokenizes with the model's BOS, decode skips
// special tokens. v1 (pred.py): with half = max/2, the decoded first half
// and last half tokens, decoded separately and joined. v2 (pred.py of
// LongBench v2): the first max/2 and last ⌈max/2⌉ tokens (Python's
// -max_len//2), decoded together. A prompt of at most max tokens is
// returned as it is; the bool says whether it was cut.
func LongBenchTruncate(prompt string, max int, v2 bool, encode func(string) []int, decode func([]int) string) (string, bool) {
	ids := encode(prompt)
	if len(ids) <= max {
		return prompt, false
	}
	if v2 {
		head, tail := max/2, max-max/2
		return decode(append(slices.Clip(ids[:head]), ids[len(ids)-tail:]...)), true
	}
	half := max / 2
	return decode(ids[:half]) + decode(ids[len(ids)-half:]), true
}

// ParseLongBench reads a LongBench v1 file (JSON Lines); name is the file
// in errors and, without "dataset" fields, names the dataset. Every line
// is checked: a malformed line, an unknown dataset, no answers, a
// classification item without all_classes or a retrieval answer without
// its paragraph number is an ErrTasks naming the file and line.
func ParseLongBench(data []byte, name string) ([]LongBenchItem, error) {
	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	base = strings.TrimSuffix(base, "_e")
	var out []LongBenchItem
	err := eachJSONLine(data, name, func(ln int, text []byte) error {
		var it LongBenchItem
		if err := json.Unmarshal(text, &it); err != nil {
			return fmt.Errorf("not a LongBench object: %w", err)
		}
		if it.Dataset == "" {
			it.Dataset = base
		}
		d, ok := longBenchDatasets[it.Dataset]
		switch {
		case !ok:
			return unknownLongBench(it.Dataset)
		case len(it.Answers) == 0:
			return fmt.Errorf(`no "answers"`)
		case it.Length < 0:
			return fmt.Errorf("length %d", it.Length)
		case d.metric == MetricClassification && len(it.AllClasses) == 0:
			return fmt.Errorf(`%s needs "all_classes"`, it.Dataset)
		}
		if d.metric == MetricRetrieval || d.metric == MetricRetrievalZh {
			for _, a := range it.Answers {
				if retrievalID(d.metric, a) == "" {
					return fmt.Errorf("%s answer %q names no paragraph", it.Dataset, a)
				}
			}
		}
		out = append(out, it)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s has no items", ErrTasks, name)
	}
	return out, nil
}

// ParseLongBench2 reads LongBench v2: JSON Lines, or one JSON array (the
// data.json of THUDM/LongBench-v2). An item without a question, choices
// or context, with an answer other than A–D, a difficulty other than easy
// or hard, or a length other than short, medium or long is an ErrTasks
// naming the file and line.
func ParseLongBench2(data []byte, name string) ([]LongBench2Item, error) {
	var out []LongBench2Item
	check := func(text []byte) error {
		var it LongBench2Item
		if err := json.Unmarshal(text, &it); err != nil {
			return fmt.Errorf("not a LongBench v2 object: %w", err)
		}
		switch {
		case strings.TrimSpace(it.Question) == "":
			return fmt.Errorf(`no "question"`)
		case it.ChoiceA == "" || it.ChoiceB == "" || it.ChoiceC == "" || it.ChoiceD == "":
			return fmt.Errorf(`a choice of "choice_A" … "choice_D" is missing`)
		case len(it.Answer) != 1 || it.Answer[0] < 'A' || it.Answer[0] > 'D':
			return fmt.Errorf(`answer %q (want A, B, C or D)`, it.Answer)
		case it.Difficulty != "easy" && it.Difficulty != "hard":
			return fmt.Errorf(`difficulty %q (want easy or hard)`, it.Difficulty)
		case it.Length != "short" && it.Length != "medium" && it.Length != "long":
			return fmt.Errorf(`length %q (want short, medium or long)`, it.Length)
		}
		out = append(out, it)
		return nil
	}
	var err error
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		err = eachJSONElement(data, name, func(_ int, raw []byte) error { return check(raw) })
	} else {
		err = eachJSONLine(data, name, func(_ int, text []byte) error { return check(text) })
	}
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s has no items", ErrTasks, name)
	}
	return out, nil
}

// eachJSONLine calls f with every non-blank line of data and its number;
// f's error becomes an ErrTasks naming the file and line.
func eachJSONLine(data []byte, name string, f func(ln int, text []byte) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), maxTaskLine)
	ln := 0
	for sc.Scan() {
		ln++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		if err := f(ln, text); err != nil {
			return fmt.Errorf("%w: %s:%d: %w", ErrTasks, name, ln, err)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%w: %s:%d: a line longer than %d MiB", ErrTasks, name, ln+1, maxTaskLine>>20)
	} else if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTasks, name, err)
	}
	return nil
}

// eachJSONElement calls f with every element of the JSON array in data
// and the line it starts on; a syntax error or f's error becomes an
// ErrTasks naming the file and line.
func eachJSONElement(data []byte, name string, f func(ln int, raw []byte) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	fail := func(off int64, err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return fmt.Errorf("%w: %s:%d: %w", ErrTasks, name, lineAt(data, off), err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		if err == nil {
			err = fmt.Errorf("not a JSON array")
		}
		return fail(dec.InputOffset(), err)
	}
	for dec.More() {
		off := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fail(off, err)
		}
		// The element starts after the separator and white space.
		start := off + int64(len(data[off:])-len(bytes.TrimLeft(data[off:], ", \t\r\n")))
		if err := f(lineAt(data, start), raw); err != nil {
			return fail(start, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fail(dec.InputOffset(), err)
	}
	return nil
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// LongBenchOptions configure LongBenchSuites.
type LongBenchOptions struct {
	// V1 and V2 are the items; N > 0 keeps the first N of each v1 dataset
	// and of v2.
	V1 []LongBenchItem
	V2 []LongBench2Item
	N  int
	// Context is the tokens a prompt and its generation may hold
	// (--max-context, else the model's context).
	Context int
	// Encode tokenizes with the model's BOS; Decode skips special tokens.
	Encode func(string) []int
	Decode func([]int) string
	// Chat applies the model's chat template (where LongBench does), and
	// ChatTokens are the tokens it adds around a message.
	Chat       bool
	ChatTokens int
}

// fit cuts prompt to max tokens (LongBenchTruncate), again with a smaller
// budget in the rare case that the decoded halves tokenize longer than
// they were (a merge across the cut); no cut without a context.
func (o *LongBenchOptions) fit(prompt string, max int, v2 bool) (string, bool) {
	if o.Context <= 0 {
		return prompt, false
	}
	out, cut := LongBenchTruncate(prompt, max, v2, o.Encode, o.Decode)
	for m := max; cut && m > 1; {
		over := len(o.Encode(out)) - max
		if over <= 0 {
			break
		}
		m -= over
		out, _ = LongBenchTruncate(prompt, m, v2, o.Encode, o.Decode)
	}
	return out, cut
}

// LongBenchSuites builds the v1 suite (one row per dataset, one per
// dataset and length bucket) and the v2 suite. A context too short for a
// dataset's generation budget is ErrOptions.
func LongBenchSuites(o LongBenchOptions) ([]Suite, error) {
	if o.Encode == nil || o.Decode == nil {
		return nil, fmt.Errorf("%w: LongBench needs the model's tokenizer (LongBenchOptions.Encode, Decode)", ErrOptions)
	}
	budget := func(maxGen int, chat bool) (int, error) {
		n := o.Context - maxGen
		if chat {
			n -= o.ChatTokens
		}
		if o.Context > 0 && n < 16 {
			return 0, fmt.Errorf("%w: a %d-token context leaves %d tokens for a LongBench prompt after the %d-token answer budget", ErrOptions, o.Context, n, maxGen)
		}
		return n, nil
	}
	var out []Suite
	if len(o.V1) > 0 {
		s := Suite{Name: SuiteLongBench, Kind: "long-context"}
		index := map[string]int{}
		var order []string
		byDataset := map[string][]LongBenchItem{}
		for _, it := range o.V1 {
			if _, ok := byDataset[it.Dataset]; !ok {
				order = append(order, it.Dataset)
			}
			byDataset[it.Dataset] = append(byDataset[it.Dataset], it)
		}
		for _, ds := range order {
			d, ok := longBenchDatasets[ds]
			if !ok {
				return nil, fmt.Errorf("%w: %w", ErrOptions, unknownLongBench(ds))
			}
			items := byDataset[ds]
			if o.N > 0 {
				items = items[:min(len(items), o.N)]
			}
			useChat := o.Chat && !LongBenchNoChat(ds)
			max, err := budget(d.maxGen, useChat)
			if err != nil {
				return nil, err
			}
			label := SuiteLongBench + ":" + ds
			for _, b := range []string{"0-4k", "4-8k", "8k+"} {
				s.Groups = append(s.Groups, label+" "+b)
			}
			for _, it := range items {
				prompt, err := LongBenchPrompt(ds, it)
				if err != nil {
					return nil, fmt.Errorf("%w: %w", ErrOptions, err)
				}
				prompt, cut := o.fit(prompt, max, false)
				ref, _ := json.Marshal(it.Answers)
				i := index[ds]
				index[ds]++
				id := it.ID
				if id == "" {
					id = label + "#" + strconv.Itoa(i)
				}
				t := Task{Suite: label, Index: i, ID: id, Prompt: prompt, Reference: string(ref), Metrics: []Metric{d.metric},
					MaxTokens: d.maxGen, Classes: it.AllClasses, FirstLine: longBenchFirstLine(ds),
					Groups: []string{label + " " + LongBenchBucket(it.Length)},
					Meta:   map[string]string{"dataset": ds, "length": strconv.Itoa(it.Length), "truncated": strconv.FormatBool(cut), "chat": strconv.FormatBool(useChat)}}
				if useChat {
					t.Messages = []chat.Message{{Role: "user", Content: prompt}}
				}
				s.Tasks = append(s.Tasks, t)
			}
		}
		if len(s.Tasks) > MaxExamples {
			return nil, fmt.Errorf("%w: %d LongBench items (at most %d)", ErrOptions, len(s.Tasks), MaxExamples)
		}
		out = append(out, s)
	}
	if len(o.V2) > 0 {
		items := o.V2
		if o.N > 0 {
			items = items[:min(len(items), o.N)]
		}
		if len(items) > MaxExamples {
			return nil, fmt.Errorf("%w: %d LongBench v2 items (at most %d)", ErrOptions, len(items), MaxExamples)
		}
		max, err := budget(LongBench2MaxTokens, o.Chat)
		if err != nil {
			return nil, err
		}
		s := Suite{Name: SuiteLongBench2, Kind: "long-context"}
		for _, g := range []string{"easy", "hard", "short", "medium", "long"} {
			s.Groups = append(s.Groups, SuiteLongBench2+" "+g)
		}
		for i, it := range items {
			prompt, cut := o.fit(LongBench2Prompt(it), max, true)
			id := it.ID
			if id == "" {
				id = SuiteLongBench2 + "#" + strconv.Itoa(i)
			}
			t := Task{Suite: SuiteLongBench2, Index: i, ID: id, Prompt: prompt, Reference: it.Answer, Metrics: []Metric{MetricChoice},
				MaxTokens: LongBench2MaxTokens, Groups: []string{SuiteLongBench2 + " " + it.Difficulty, SuiteLongBench2 + " " + it.Length},
				Meta: map[string]string{"domain": it.Domain, "sub_domain": it.SubDomain, "difficulty": it.Difficulty, "length": it.Length,
					"truncated": strconv.FormatBool(cut), "chat": strconv.FormatBool(o.Chat)}}
			if o.Chat {
				t.Messages = []chat.Message{{Role: "user", Content: prompt}}
			}
			s.Tasks = append(s.Tasks, t)
		}
		out = append(out, s)
	}
	return out, nil
}
