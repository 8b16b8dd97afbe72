package eval_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/kvqlabs/kvq/pkg/eval"
)

// Parquet rows shaped as Hugging Face's dumps store them: every column
// optional (as pyarrow writes them), lists as Parquet LIST columns, ARC's
// choices a struct of two lists; MMLU's with required columns and an
// int64 answer.
type arcChoicesRow struct {
	Text  []*string `parquet:"text,optional,list"`
	Label []*string `parquet:"label,optional,list"`
}

type arcRow struct {
	ID        *string        `parquet:"id,optional"`
	Question  *string        `parquet:"question,optional"`
	Choices   *arcChoicesRow `parquet:"choices,optional"`
	AnswerKey *string        `parquet:"answerKey,optional"`
}

func ptrs(s ...string) []*string {
	out := make([]*string, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

func ptr(s string) *string { return &s }

type mmluRow struct {
	Question string   `parquet:"question"`
	Subject  string   `parquet:"subject"`
	Choices  []string `parquet:"choices,list"`
	Answer   int64    `parquet:"answer"`
}

// writeParquet is rows as a Parquet file's bytes.
func writeParquet[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := parquet.Write(&b, rows); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParseMCParquet: a Parquet file of the same items reads as the JSON
// Lines fixture does.
func TestParseMCParquet(t *testing.T) {
	arc := readMC(t, eval.MCARC, "arc.jsonl")
	rows := []arcRow{
		{ptr("kvq-arc-1"), ptr("A girl puts a cold spoon into hot soup. What happens to the spoon?"),
			&arcChoicesRow{ptrs("It gets warmer.", "It gets colder.", "It turns to water.", "It gets lighter."), ptrs("A", "B", "C", "D")}, ptr("A")},
		{ptr("kvq-arc-2"), ptr("Which part of a plant takes in water from the soil?"),
			&arcChoicesRow{ptrs("the flower", "the roots", "the leaves", "the seeds"), ptrs("A", "B", "C", "D")}, ptr("B")},
		{ptr("kvq-arc-3"), ptr("What do bees carry from flower to flower?"), &arcChoicesRow{ptrs("sand", "pollen", "rain"), ptrs("1", "2", "3")}, ptr("2")},
	}
	data := writeParquet(t, rows)
	if !eval.IsParquet(data) {
		t.Fatal("IsParquet = false on a Parquet file")
	}
	got, err := eval.ParseMC(eval.MCARC, data, "arc.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, arc[:3]) {
		t.Errorf("arc.parquet:\n%#v\nwant\n%#v", got, arc[:3])
	}
	mmlu := readMC(t, eval.MCMMLU, "mmlu.jsonl")
	got, err = eval.ParseMC(eval.MCMMLU, writeParquet(t, []mmluRow{
		{"What is 7 + 5?", "elementary_mathematics", []string{"10", "11", "12", "13"}, 2},
		{"  How many sides does a triangle have? ", "elementary_mathematics", []string{"2", "3", "4", "5"}, 1},
	}), "mmlu.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, mmlu[:2]) {
		t.Errorf("mmlu.parquet:\n%#v\nwant\n%#v", got, mmlu[:2])
	}
	// A bad row names the row (from 1) and the column.
	rows[1].AnswerKey = ptr("E")
	_, err = eval.ParseMC(eval.MCARC, writeParquet(t, rows), "bad.parquet")
	if want := `bad.parquet: row 2, column "answerKey": "E" is not one of the labels`; !errors.Is(err, eval.ErrTasks) || !strings.Contains(err.Error(), want) {
		t.Errorf("bad row: %v, want ErrTasks %q", err, want)
	}
	rows[2].AnswerKey = nil // a null
	rows[1].AnswerKey = ptr("B")
	_, err = eval.ParseMC(eval.MCARC, writeParquet(t, rows), "null.parquet")
	if want := `null.parquet: row 3, column "answerKey": missing`; !errors.Is(err, eval.ErrTasks) || !strings.Contains(err.Error(), want) {
		t.Errorf("null answerKey: %v, want ErrTasks %q", err, want)
	}
	// An MMLU file read as PIQA: the missing column.
	_, err = eval.ParseMC(eval.MCPIQA, writeParquet(t, []mmluRow{{"q", "s", []string{"a", "b"}, 0}}), "mmlu.parquet")
	if want := `mmlu.parquet: row 1, column "goal": missing`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("wrong adapter: %v, want %q", err, want)
	}
}

// TestParseMCErrors: bad files name the file and line; unknown adapters
// list the known ones.
func TestParseMCErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{eval.MCARC, `{"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "A"}` + "\n{oops\n", "f.jsonl:2: not a JSON object"},
		{eval.MCARC, "\n" + `{"choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "A"}`, `f.jsonl:2: "question": missing`},
		{eval.MCARC, `{"question": "q", "choices": ["a", "b"], "answerKey": "A"}`, `f.jsonl:1: "choices": not {"text": [..], "label": [..]}`},
		{eval.MCMMLU, `{"question": "q", "choices": ["a", "b"], "answer": 2}`, `f.jsonl:1: "answer": 2 is not the index of one of the 2 choices`},
		{eval.MCMMLU, `{"question": "q", "choices": "a b", "answer": 0}`, `f.jsonl:1: "choices": not a list of strings`},
		{eval.MCHellaSwag, `{"activity_label": "x", "ctx": "c", "endings": ["a", "b"], "label": ""}`, `f.jsonl:1: "label": "" is not an integer`},
		{eval.MCHellaSwag, `{"activity_label": "x", "endings": ["a", "b"], "label": 0}`, `f.jsonl:1: "ctx": missing`},
		{eval.MCWinogrande, `{"sentence": "no blank", "option1": "a", "option2": "b", "answer": "1"}`, `f.jsonl:1: "sentence": no "_" to fill`},
		{eval.MCWinogrande, `{"sentence": "a _ b", "option1": "a", "option2": "b", "answer": "3"}`, `f.jsonl:1: "answer": 3`},
		{eval.MCPIQA, `{"goal": "g", "sol1": "a", "sol2": "b", "label": -1}`, `f.jsonl:1: "label": -1 is not the index`},
		{eval.MCGeneric, `{"context": "c", "choices": ["a", ""], "gold": 0}`, `f.jsonl:1: "choices": choice 1 is empty`},
		{eval.MCGeneric, `{"context": "c", "choices": ["a"], "gold": 0}`, `f.jsonl:1: "choices": 1 choices (at least 2)`},
		{eval.MCGeneric, "\n\n", "f.jsonl has no items"},
		{eval.MCGeneric, "PAR1 not really a parquet file PAR1", "f.jsonl: not a readable Parquet file"},
	} {
		_, err := eval.ParseMC(tc.name, []byte(tc.data), "f.jsonl")
		if !errors.Is(err, eval.ErrTasks) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMC(%s, %q) = %v, want ErrTasks %q", tc.name, tc.data, err, tc.want)
		}
	}
	_, err := eval.ParseMC("mmlu-pro", []byte(`{}`), "f.jsonl")
	if !errors.Is(err, eval.ErrOptions) || !strings.Contains(err.Error(), "valid: mmlu, arc, hellaswag, winogrande, piqa, mc") {
		t.Errorf("unknown adapter: %v", err)
	}
	// Every fixture reads with its own adapter.
	for _, f := range []string{"arc", "arc_train", "mmlu", "mmlu_dev", "hellaswag", "winogrande", "winogrande_train", "piqa", "mc"} {
		name, _, _ := strings.Cut(f, "_")
		p := filepath.Join("testdata", "mc", f+".jsonl")
		if _, err := eval.ParseMC(name, readFile(t, p), p); err != nil {
			t.Error(err)
		}
	}
}
