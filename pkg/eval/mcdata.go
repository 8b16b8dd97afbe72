package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
)

// Multiple-choice data sets, read from the user's local files: JSON Lines
// (one object per line) or Parquet (the files Hugging Face's datasets
// downloads, read with github.com/parquet-go/parquet-go), one item per
// line or row, through an adapter that maps the dump's fields to an MCDoc
// as lm-evaluation-harness's task does (lm_eval/tasks/*/*.yaml):
//
//	mc          {"context", "choices": [..], "gold": int}; doc_to_text
//	            is the context as given
//	mmlu        question, choices [4], answer (int, or a letter A–D),
//	            subject (optional); "{question.strip()}\nA. ..\nB. ..\n
//	            C. ..\nD. ..\nAnswer:" with the letters as choices
//	arc         question, choices {text: [..], label: [..]}, answerKey (one
//	            of the labels: a letter or a digit); "Question: {question}
//	            \nAnswer:" with the choice texts
//	hellaswag   activity_label, ctx_a and ctx_b (or ctx), endings [4],
//	            label (int or "0".."3"); lm-eval's preprocess
//	winogrande  sentence with "_", option1, option2, answer ("1" or "2");
//	            partial scoring
//	piqa        goal, sol1, sol2, label (0 or 1); "Question: {goal}\n
//	            Answer:" with the solutions

// MC data set names (--tasks NAME=FILE).
const (
	MCGeneric    = "mc"
	MCMMLU       = "mmlu"
	MCARC        = "arc"
	MCHellaSwag  = "hellaswag"
	MCWinogrande = "winogrande"
	MCPIQA       = "piqa"
)

// MCAdapters lists the multiple-choice data sets kvq reads.
func MCAdapters() []string {
	return []string{MCMMLU, MCARC, MCHellaSwag, MCWinogrande, MCPIQA, MCGeneric}
}

// MCMetrics are the rows lm-eval reports for data set name: acc alone for
// MMLU and Winogrande, acc and acc_norm for the others.
func MCMetrics(name string) []Metric {
	if name == MCMMLU || name == MCWinogrande {
		return []Metric{MetricAcc}
	}
	return []Metric{MetricAcc, MetricAccNorm}
}

// MMLUDescription is the line lm-eval's MMLU tasks put before the shots:
// "The following are multiple choice questions (with answers) about
// {subject, "_" as " "}.\n\n"; empty without a subject.
func MMLUDescription(d MCDoc) string {
	if d.Subject == "" {
		return ""
	}
	return "The following are multiple choice questions (with answers) about " + strings.ReplaceAll(d.Subject, "_", " ") + ".\n\n"
}

// record is one item's fields as JSON.
type mcRecord map[string]json.RawMessage

// fieldError is an adapter's complaint about one field.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return fmt.Sprintf("%q: %s", e.field, e.msg) }

func (r mcRecord) raw(f string) (json.RawMessage, error) {
	v, ok := r[f]
	if !ok || string(v) == "null" {
		return nil, &fieldError{f, "missing"}
	}
	return v, nil
}

func (r mcRecord) has(f string) bool {
	v, ok := r[f]
	return ok && string(v) != "null"
}

func (r mcRecord) str(f string) (string, error) {
	v, err := r.raw(f)
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", &fieldError{f, "not a string"}
	}
	return s, nil
}

func (r mcRecord) strs(f string) ([]string, error) {
	v, err := r.raw(f)
	if err != nil {
		return nil, err
	}
	var s []string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, &fieldError{f, "not a list of strings"}
	}
	return s, nil
}

// index reads an int, or a string of one ("3"), or (letters) a letter
// "A".. naming the index.
func (r mcRecord) index(f string, letters bool) (int, error) {
	v, err := r.raw(f)
	if err != nil {
		return 0, err
	}
	var n int
	if err := json.Unmarshal(v, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, &fieldError{f, "not an integer"}
	}
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	if letters && len(s) == 1 && s[0] >= 'A' && s[0] <= 'Z' {
		return int(s[0] - 'A'), nil
	}
	return 0, &fieldError{f, fmt.Sprintf("%q is not an integer", s)}
}

// checkDoc checks the choices and gold of d; goldField names gold's field.
func checkDoc(d MCDoc, choicesField, goldField string) error {
	if len(d.Choices) < 2 {
		return &fieldError{choicesField, fmt.Sprintf("%d choices (at least 2)", len(d.Choices))}
	}
	for i, c := range d.Choices {
		if utf8.RuneCountInString(c) == 0 {
			return &fieldError{choicesField, fmt.Sprintf("choice %d is empty (acc_norm divides by its length)", i)}
		}
	}
	if d.Gold < 0 || d.Gold >= len(d.Choices) {
		return &fieldError{goldField, fmt.Sprintf("%d is not the index of one of the %d choices (an unlabelled test split?)", d.Gold, len(d.Choices))}
	}
	return nil
}

// mcAdapt maps record r to an MCDoc for data set name.
func mcAdapt(name string, r mcRecord) (MCDoc, error) {
	var d MCDoc
	var err error
	switch name {
	case MCGeneric:
		if d.Query, err = r.str("context"); err != nil {
			return d, err
		}
		if d.Choices, err = r.strs("choices"); err != nil {
			return d, err
		}
		if d.Gold, err = r.index("gold", false); err != nil {
			return d, err
		}
		return d, checkDoc(d, "choices", "gold")
	case MCMMLU:
		q, err := r.str("question")
		if err != nil {
			return d, err
		}
		opts, err := r.strs("choices")
		if err != nil {
			return d, err
		}
		if d.Gold, err = r.index("answer", true); err != nil {
			return d, err
		}
		if r.has("subject") {
			if d.Subject, err = r.str("subject"); err != nil {
				return d, err
			}
		}
		if len(opts) > 26 {
			return d, &fieldError{"choices", fmt.Sprintf("%d choices (at most 26 letters)", len(opts))}
		}
		var b strings.Builder
		b.WriteString(strings.TrimSpace(q))
		for i, o := range opts {
			l := string(rune('A' + i))
			b.WriteString("\n" + l + ". " + o)
			d.Choices = append(d.Choices, l)
		}
		b.WriteString("\nAnswer:")
		d.Query = b.String()
		return d, checkDoc(d, "choices", "answer")
	case MCARC:
		q, err := r.str("question")
		if err != nil {
			return d, err
		}
		raw, err := r.raw("choices")
		if err != nil {
			return d, err
		}
		var ch struct {
			Text  []string `json:"text"`
			Label []string `json:"label"`
		}
		if err := json.Unmarshal(raw, &ch); err != nil || ch.Text == nil || ch.Label == nil {
			return d, &fieldError{"choices", `not {"text": [..], "label": [..]}`}
		}
		if len(ch.Text) != len(ch.Label) {
			return d, &fieldError{"choices", fmt.Sprintf("%d texts and %d labels", len(ch.Text), len(ch.Label))}
		}
		key, err := r.str("answerKey")
		if err != nil {
			return d, err
		}
		d.Gold = slices.Index(ch.Label, key)
		if d.Gold < 0 {
			return d, &fieldError{"answerKey", fmt.Sprintf("%q is not one of the labels %q", key, ch.Label)}
		}
		d.Query, d.Choices = "Question: "+q+"\nAnswer:", ch.Text
		return d, checkDoc(d, "choices", "answerKey")
	case MCHellaSwag:
		var ctx string
		if r.has("ctx_a") || r.has("ctx_b") {
			a, err := r.str("ctx_a")
			if err != nil {
				return d, err
			}
			b, err := r.str("ctx_b")
			if err != nil {
				return d, err
			}
			ctx = a + " " + pyCapitalize(b)
		} else if ctx, err = r.str("ctx"); err != nil {
			return d, &fieldError{"ctx", `missing (and no "ctx_a", "ctx_b")`}
		}
		if r.has("activity_label") {
			label, err := r.str("activity_label")
			if err != nil {
				return d, err
			}
			ctx = label + ": " + ctx
		}
		endings, err := r.strs("endings")
		if err != nil {
			return d, err
		}
		d.Query = HellaSwagPreprocess(ctx)
		for _, e := range endings {
			d.Choices = append(d.Choices, HellaSwagPreprocess(e))
		}
		if d.Gold, err = r.index("label", false); err != nil {
			return d, err
		}
		return d, checkDoc(d, "endings", "label")
	case MCWinogrande:
		s, err := r.str("sentence")
		if err != nil {
			return d, err
		}
		i := strings.Index(s, "_")
		if i < 0 {
			return d, &fieldError{"sentence", `no "_" to fill`}
		}
		var opts [2]string
		for k, f := range []string{"option1", "option2"} {
			if opts[k], err = r.str(f); err != nil {
				return d, err
			}
		}
		ans, err := r.index("answer", false)
		if err != nil {
			return d, err
		}
		if ans != 1 && ans != 2 {
			return d, &fieldError{"answer", fmt.Sprintf("%d (want \"1\" or \"2\")", ans)}
		}
		d.Query, d.Partial, d.Gold = s, true, ans-1
		d.Target = strings.TrimSpace(s[i+1:])
		d.Choices = []string{s[:i] + opts[0], s[:i] + opts[1]}
		return d, checkDoc(d, "option1", "answer")
	case MCPIQA:
		goal, err := r.str("goal")
		if err != nil {
			return d, err
		}
		for _, f := range []string{"sol1", "sol2"} {
			s, err := r.str(f)
			if err != nil {
				return d, err
			}
			d.Choices = append(d.Choices, s)
		}
		if d.Gold, err = r.index("label", false); err != nil {
			return d, err
		}
		d.Query = "Question: " + goal + "\nAnswer:"
		return d, checkDoc(d, "sol1", "label")
	}
	return d, fmt.Errorf("%w: unknown multiple-choice data set %q (valid: %s)", ErrOptions, name, strings.Join(MCAdapters(), ", "))
}

// hellaswagBrackets are the bracketed WikiHow artefacts lm-eval removes.
var hellaswagBrackets = regexp.MustCompile(`\[.*?\]`)

// HellaSwagPreprocess is lm-eval's hellaswag preprocess: spaces trimmed,
// " [title]" replaced by ". ", any other "[...]" removed, then each "  "
// replaced by " " (one pass, left to right).
func HellaSwagPreprocess(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, " [title]", ". ")
	s = hellaswagBrackets.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "  ", " ")
}

// pyCapitalize is Python's str.capitalize: the first character upper
// case, the rest lower case.
func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

// IsParquet reports whether data is a Parquet file (its "PAR1" magic).
func IsParquet(data []byte) bool {
	return len(data) >= 8 && string(data[:4]) == "PAR1" && string(data[len(data)-4:]) == "PAR1"
}

// ParseMC reads data set name's items from data, JSON Lines or Parquet
// (by its magic); file names the file in errors. A malformed line, row or
// field is an ErrTasks naming the file and the line (JSON Lines) or the
// row, counted from 1, and column (Parquet); blank lines are skipped.
func ParseMC(name string, data []byte, file string) ([]MCDoc, error) {
	if !slices.Contains(MCAdapters(), name) {
		return nil, fmt.Errorf("%w: unknown multiple-choice data set %q (valid: %s)", ErrOptions, name, strings.Join(MCAdapters(), ", "))
	}
	var out []MCDoc
	add := func(rec mcRecord, where func(field string) string) error {
		d, err := mcAdapt(name, rec)
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return fmt.Errorf("%w: %s: %s", ErrTasks, where(fe.field), fe.msg)
			}
			return err
		}
		out = append(out, d)
		return nil
	}
	if IsParquet(data) {
		if err := parquetRecords(data, file, add); err != nil {
			return nil, err
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), maxTaskLine)
		ln := 0
		for sc.Scan() {
			ln++
			text := bytes.TrimSpace(sc.Bytes())
			if len(text) == 0 {
				continue
			}
			var rec mcRecord
			if err := json.Unmarshal(text, &rec); err != nil || rec == nil {
				if err == nil {
					err = errors.New("null")
				}
				return nil, fmt.Errorf("%w: %s:%d: not a JSON object: %w", ErrTasks, file, ln, err)
			}
			if err := add(rec, func(f string) string { return fmt.Sprintf("%s:%d: %q", file, ln, f) }); err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: %s:%d: a line longer than %d MiB", ErrTasks, file, ln+1, maxTaskLine>>20)
		} else if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrTasks, file, err)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s has no items", ErrTasks, file)
	}
	return out, nil
}

// parquetRecords calls add with each row of a Parquet file as JSON
// values, and where, which names the row and a column in errors. A file
// the reader cannot read, or panics on, is an ErrTasks.
func parquetRecords(data []byte, file string, add func(mcRecord, func(string) string) error) (err error) {
	row := 0
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: row %d: unreadable Parquet: %v", ErrTasks, file, row, p)
		}
	}()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("%w: %s: not a readable Parquet file: %w", ErrTasks, file, err)
	}
	pr := parquet.NewReader(f)
	defer pr.Close()
	for row = 1; ; row++ {
		m := map[string]any{}
		if err := pr.Read(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%w: %s: row %d: %w", ErrTasks, file, row, err)
		}
		rec := mcRecord{}
		for k, v := range m {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("%w: %s: row %d, column %q: %w", ErrTasks, file, row, k, err)
			}
			rec[k] = b
		}
		if err := add(rec, func(f string) string { return fmt.Sprintf("%s: row %d, column %q", file, row, f) }); err != nil {
			return err
		}
	}
}
