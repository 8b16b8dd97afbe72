package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/kvqlabs/kvq/datasets"
)

// RULER's qa tasks (scripts/data/synthetic/qa.py, synthetic.yaml): qa_1
// asks SQuAD v2's dev questions, qa_2 HotpotQA's dev distractor questions,
// each with its gold paragraphs among as many other paragraphs of the set
// as the length holds, and scores with string_match_part (any answer in
// the output). kvq reads the files RULER's download_qa_dataset.sh fetches
// (dev-v2.0.json, hotpot_dev_distractor_v1.json) from the user's disk.
//
//	documents  SQuAD: every distinct paragraph context; HotpotQA: every
//	           distinct "title\n" + its sentences joined; sorted, deduplicated
//	questions  SQuAD: the answerable ones (is_impossible false), answers their
//	           texts, gold its paragraph, "more" the other paragraphs of its
//	           article; HotpotQA: every one, answer its answer, gold its ten
//	           context paragraphs (two supporting, eight distractors)
//	haystack   with k documents fewer than the set's: the gold, then (when k
//	           leaves room for all of them) the article's other paragraphs
//	           and a sample of the rest, else a sample of the article's
//	           others; k at least the set's: the set repeated and cut to k;
//	           then shuffled, and written "Document {i}:\n{document}" joined
//	           by blank lines
//	prompt     RULER's qa template with {context} and {query}, then the answer
//	           prefix " Answer:"; 32 tokens of answer budget
//	example i  asks question i (file order, modulo the questions), with the
//	           most documents whose prompt plus the budget fit the length
//
// Where kvq differs: RULER bisects the number of documents once on the
// first question and steps each example down by 10 documents until it
// fits; kvq bisects for each example. RULER shuffles every haystack with
// one fixed random.Random(seed); kvq draws the sample and the shuffle from
// the example's seed. The random streams are kvq's, so the haystacks are
// not RULER's files, only made the same way.

// RULER's qa task names.
const (
	RulerQA1 = "qa_1"
	RulerQA2 = "qa_2"
)

const (
	rulerQATemplate = "Answer the question based on the given documents. Only give me the answer and do not output any other words.\n\nThe following are given documents.\n\n%s\n\nAnswer the question based on the given documents. Only give me the answer and do not output any other words.\n\nQuestion: %s"
	rulerQAPrefix   = " Answer:"
	// RulerQAMaxTokens is qa's tokens_to_generate.
	RulerQAMaxTokens = 32
)

// RulerQAData is a QA set read for RULER's qa tasks.
type RulerQAData struct {
	// Name is the file, for the report's data list.
	Name string
	// Docs are the distinct paragraphs, sorted.
	Docs []string
	QAs  []RulerQA
}

// RulerQA is one question with the documents it needs.
type RulerQA struct {
	Query   string
	Outputs []string
	// Gold and More index Docs: the question's paragraphs, and (SQuAD) the
	// other paragraphs of its article.
	Gold, More []int
}

type squadFile struct {
	Data []struct {
		Title      string `json:"title"`
		Paragraphs []struct {
			Context string `json:"context"`
			QAs     []struct {
				Question string `json:"question"`
				Answers  []struct {
					Text string `json:"text"`
				} `json:"answers"`
				IsImpossible bool `json:"is_impossible"`
			} `json:"qas"`
		} `json:"paragraphs"`
	} `json:"data"`
}

// ParseRulerSQuAD reads SQuAD v2's dev set (dev-v2.0.json) as RULER's
// read_squad does. A malformed file, a paragraph without context or an
// answerable question without answers is an ErrTasks naming the file and
// line (of the article); a file without answerable questions is one too.
func ParseRulerSQuAD(data []byte, name string) (*RulerQAData, error) {
	var f squadFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonFileError(data, name, err)
	}
	// Each article's line, for errors: the articles of "data" in order.
	lines := articleLines(data, "data")
	line := func(i int) int {
		if i < len(lines) {
			return lines[i]
		}
		return 1
	}
	var docs []string
	for ai, a := range f.Data {
		for pi, p := range a.Paragraphs {
			if strings.TrimSpace(p.Context) == "" {
				return nil, fmt.Errorf("%w: %s:%d: article %d paragraph %d has no context", ErrTasks, name, line(ai), ai+1, pi+1)
			}
			docs = append(docs, p.Context)
		}
	}
	d := &RulerQAData{Name: name, Docs: sortedUnique(docs)}
	idx := docIndex(d.Docs)
	for ai, a := range f.Data {
		var article []int
		for _, p := range a.Paragraphs {
			article = append(article, idx[p.Context])
		}
		for pi, p := range a.Paragraphs {
			gold := idx[p.Context]
			for qi, q := range p.QAs {
				if q.IsImpossible {
					continue
				}
				var outs []string
				for _, an := range q.Answers {
					if strings.TrimSpace(an.Text) != "" {
						outs = append(outs, an.Text)
					}
				}
				if strings.TrimSpace(q.Question) == "" || len(outs) == 0 {
					return nil, fmt.Errorf("%w: %s:%d: article %d paragraph %d question %d: an answerable question needs a question and answers", ErrTasks, name, line(ai), ai+1, pi+1, qi+1)
				}
				var more []int
				for _, k := range article {
					if k != gold {
						more = append(more, k)
					}
				}
				d.QAs = append(d.QAs, RulerQA{Query: q.Question, Outputs: outs, Gold: []int{gold}, More: more})
			}
		}
	}
	if len(d.QAs) == 0 {
		return nil, fmt.Errorf("%w: %s has no answerable SQuAD questions", ErrTasks, name)
	}
	return d, nil
}

type hotpotItem struct {
	Question string            `json:"question"`
	Answer   string            `json:"answer"`
	Context  []json.RawMessage `json:"context"`
}

// ParseRulerHotpotQA reads HotpotQA's dev distractor set
// (hotpot_dev_distractor_v1.json, a JSON array) as RULER's read_hotpotqa
// does. An item without a question, answer or context, or a context entry
// other than [title, [sentences]], is an ErrTasks naming the file and
// line.
func ParseRulerHotpotQA(data []byte, name string) (*RulerQAData, error) {
	type item struct {
		hotpotItem
		docs []string
	}
	var items []item
	err := eachJSONElement(data, name, func(_ int, raw []byte) error {
		var it item
		if err := json.Unmarshal(raw, &it.hotpotItem); err != nil {
			return fmt.Errorf("not a HotpotQA item: %w", err)
		}
		switch {
		case strings.TrimSpace(it.Question) == "":
			return fmt.Errorf(`no "question"`)
		case strings.TrimSpace(it.Answer) == "":
			return fmt.Errorf(`no "answer"`)
		case len(it.Context) == 0:
			return fmt.Errorf(`no "context"`)
		}
		for _, c := range it.Context {
			var pair []json.RawMessage
			var title string
			var sents []string
			if json.Unmarshal(c, &pair) != nil || len(pair) != 2 || json.Unmarshal(pair[0], &title) != nil || json.Unmarshal(pair[1], &sents) != nil {
				return fmt.Errorf("a context entry is not [title, [sentences]]: %.60s", c)
			}
			it.docs = append(it.docs, title+"\n"+strings.Join(sents, ""))
		}
		items = append(items, it)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: %s has no HotpotQA items", ErrTasks, name)
	}
	var docs []string
	for _, it := range items {
		docs = append(docs, it.docs...)
	}
	d := &RulerQAData{Name: name, Docs: sortedUnique(docs)}
	idx := docIndex(d.Docs)
	for _, it := range items {
		q := RulerQA{Query: it.Question, Outputs: []string{it.Answer}}
		for _, doc := range it.docs {
			q.Gold = append(q.Gold, idx[doc])
		}
		d.QAs = append(d.QAs, q)
	}
	return d, nil
}

// sortedUnique is sorted(set(s)) (Python sorts str by code point, as Go
// sorts by bytes for valid UTF-8).
func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}

func docIndex(docs []string) map[string]int {
	m := make(map[string]int, len(docs))
	for i, d := range docs {
		m[d] = i
	}
	return m
}

// jsonFileError is a JSON decoding error of a whole file as an ErrTasks
// naming the file and the line of the error.
func jsonFileError(data []byte, name string, err error) error {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	return fmt.Errorf("%w: %s:%d: %w", ErrTasks, name, lineAt(data, off), err)
}

// articleLines are the lines on which the elements of the top-level
// object's array key start (nil when the file is not shaped so).
func articleLines(data []byte, key string) []int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		if k != key {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil
		}
		var lines []int
		for dec.More() {
			off := dec.InputOffset()
			off += int64(len(data[off:]) - len(bytes.TrimLeft(data[off:], ", \t\r\n")))
			lines = append(lines, lineAt(data, off))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return lines
			}
		}
		return lines
	}
	return nil
}

// RulerQAPrompt is the qa prompt of query over docs: RULER's template with
// the documents numbered from 1, then the answer prefix.
func RulerQAPrompt(docs []string, query string) string {
	parts := make([]string, len(docs))
	for i, d := range docs {
		parts[i] = fmt.Sprintf("Document %d:\n%s", i+1, d)
	}
	return fmt.Sprintf(rulerQATemplate, strings.Join(parts, "\n\n"), query) + rulerQAPrefix
}

// Haystack is the documents of example q with k documents, drawn from
// seed (see the file comment): the gold paragraphs always among them.
func (d *RulerQAData) Haystack(q RulerQA, k int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, uint64(k)))
	sample := func(from []int, n int) []int {
		from = slices.Clone(from)
		for i := 0; i < n; i++ {
			j := i + rng.IntN(len(from)-i)
			from[i], from[j] = from[j], from[i]
		}
		return from[:n]
	}
	var ids []int
	if k < len(d.Docs) {
		if k-len(q.Gold) > len(q.More) {
			used := map[int]bool{}
			for _, i := range append(slices.Clone(q.Gold), q.More...) {
				used[i] = true
			}
			var rest []int
			for i := range d.Docs {
				if !used[i] {
					rest = append(rest, i)
				}
			}
			ids = append(append(slices.Clone(q.Gold), q.More...), sample(rest, max(0, k-len(q.Gold)-len(q.More)))...)
		} else {
			ids = append(slices.Clone(q.Gold), sample(q.More, max(0, k-len(q.Gold)))...)
		}
	} else {
		for i := 0; i < k; i++ {
			ids = append(ids, i%len(d.Docs))
		}
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = d.Docs[id]
	}
	return out
}

// RulerQAExample is RULER's qa example i at length tokens: question i
// (modulo the questions) with the most documents whose prompt, counted by
// count, plus the 32-token budget fit length. The error wraps
// datasets.ErrRulerLength when the gold paragraphs alone do not fit.
func RulerQAExample(task string, d *RulerQAData, i, length int, seed uint64, count func(string) int) (datasets.RulerExample, error) {
	q := d.QAs[i%len(d.QAs)]
	least := max(1, len(q.Gold))
	build := func(k int) datasets.RulerExample {
		p := RulerQAPrompt(d.Haystack(q, k, seed), q.Query)
		return datasets.RulerExample{Task: task, Prompt: p, AnswerPrefix: rulerQAPrefix, Outputs: q.Outputs, MaxTokens: RulerQAMaxTokens,
			Tokens: count(p) + RulerQAMaxTokens, Haystack: k}
	}
	best := build(least)
	if best.Tokens > length {
		return datasets.RulerExample{}, fmt.Errorf("%w: %s needs %d tokens with its gold paragraphs alone (%d of them the answer's budget), more than %d",
			datasets.ErrRulerLength, task, best.Tokens, RulerQAMaxTokens, length)
	}
	// Grow k by doubling until it does not fit (or every token would be a
	// document), then bisect between the last fit and the first miss.
	lo, hi := least, 0
	for k := 2 * least; ; k *= 2 {
		if k > length {
			hi = length + 1
			break
		}
		ex := build(k)
		if ex.Tokens > length {
			hi = k
			break
		}
		lo, best = k, ex
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ex := build(mid); ex.Tokens <= length {
			lo, best = mid, ex
		} else {
			hi = mid
		}
	}
	return best, nil
}

// rulerQATask reports whether task is one of the qa tasks.
func rulerQATask(task string) bool { return task == RulerQA1 || task == RulerQA2 }

// rulerQAData is the set of qa task, nil when not given.
func (o *SuiteOptions) rulerQAData(task string) *RulerQAData {
	if task == RulerQA1 {
		return o.RulerSQuAD
	}
	return o.RulerHotpotQA
}

// rulerQAExample is item i of qa task at length n as a report task.
func (o *SuiteOptions) rulerQAExample(task string, n, i int) (datasets.RulerExample, error) {
	d := o.rulerQAData(task)
	if d == nil {
		flag := "--ruler-squad"
		if task == RulerQA2 {
			flag = "--ruler-hotpotqa"
		}
		return datasets.RulerExample{}, fmt.Errorf("%w: ruler:%s reads your local copy of its data set (%s FILE)", ErrOptions, task, flag)
	}
	return RulerQAExample(task, d, i, n, rulerSeed(o.Seed, task, n, i), o.Tokens)
}

// rulerAverageLabel is the row of RULER's average over the tasks at a
// length: "ruler:average 4K".
func rulerAverageLabel(length int) string { return RulerLabel("average", length) }
