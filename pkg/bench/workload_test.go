package bench_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/bench"
)

func TestFixed(t *testing.T) {
	tok := &byteTok{}
	reqs, err := bench.Fixed(tok, 20, 64, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 20 {
		t.Fatalf("%d requests, want 20", len(reqs))
	}
	for i, r := range reqs {
		if r.Index != i || len(r.Prompt) != 64 || r.MaxTokens != 16 || !r.IgnoreEOS {
			t.Errorf("request %d: index %d, %d prompt tokens, max tokens %d, ignore EOS %v; want %d, 64, 16, true",
				i, r.Index, len(r.Prompt), r.MaxTokens, r.IgnoreEOS, i)
		}
		if r.Prompt[0] != bosID {
			t.Errorf("request %d does not start with BOS: %v", i, r.Prompt[:4])
		}
		if slices.Contains(r.Prompt[1:], bosID) || slices.Contains(r.Prompt, eosID) {
			t.Errorf("request %d holds a special id after BOS", i)
		}
		if got := tok.Encode(r.Text); !slices.Equal(got, r.Prompt) {
			t.Errorf("request %d: Encode(Text) differs from Prompt", i)
		}
	}
	if slices.Equal(reqs[0].Prompt, reqs[1].Prompt) {
		t.Error("requests 0 and 1 have the same prompt")
	}
}

func TestRandomLengths(t *testing.T) {
	tok := &byteTok{}
	const n, in, out, r = 200, 101, 40, 0.5
	reqs, err := bench.Random(tok, n, in, out, r, 5)
	if err != nil {
		t.Fatal(err)
	}
	// The prompt's own tokens (the BOS aside) in [⌊100·0.5⌋, ⌈100·1.5⌉],
	// outputs in [⌊40·0.5⌋, ⌈40·1.5⌉].
	inLo, inHi := 1+50, 1+150
	outLo, outHi := 20, 60
	seenIn, seenOut := map[int]bool{}, map[int]bool{}
	minIn, maxIn, minOut, maxOut := math.MaxInt, 0, math.MaxInt, 0
	for i, q := range reqs {
		l := len(q.Prompt)
		if l < inLo || l > inHi || q.MaxTokens < outLo || q.MaxTokens > outHi {
			t.Errorf("request %d: %d prompt tokens, %d output; want [%d, %d] and [%d, %d]", i, l, q.MaxTokens, inLo, inHi, outLo, outHi)
		}
		seenIn[l], seenOut[q.MaxTokens] = true, true
		minIn, maxIn, minOut, maxOut = min(minIn, l), max(maxIn, l), min(minOut, q.MaxTokens), max(maxOut, q.MaxTokens)
	}
	// Uniform over the range: 200 draws reach near both ends.
	if minIn > inLo+10 || maxIn < inHi-10 || minOut > outLo+4 || maxOut < outHi-4 || len(seenIn) < 50 {
		t.Errorf("lengths do not spread over the range: prompts %d..%d (%d distinct), outputs %d..%d", minIn, maxIn, len(seenIn), minOut, maxOut)
	}
	again, _ := bench.Random(tok, n, in, out, r, 5)
	if !reflect.DeepEqual(reqs, again) {
		t.Error("the same seed gives different requests")
	}
	other, _ := bench.Random(tok, n, in, out, r, 6)
	if reflect.DeepEqual(reqs, other) {
		t.Error("seeds 5 and 6 give the same requests")
	}
}

func TestRandomOutputAtLeastOne(t *testing.T) {
	reqs, err := bench.Random(&byteTok{}, 50, 20, 1, 0.9, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.MaxTokens < 1 || r.MaxTokens > 2 {
			t.Fatalf("output length %d, want in [1, 2]", r.MaxTokens)
		}
	}
}

func TestRandomWithoutSpecials(t *testing.T) {
	// No BOS and no SpecialTokens: every id of the vocabulary may be drawn,
	// and the prompt is exactly inputLen ids.
	reqs, err := bench.Fixed(plainTok{}, 3, 400, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, r := range reqs {
		if len(r.Prompt) != 400 {
			t.Errorf("%d prompt tokens, want 400", len(r.Prompt))
		}
		for _, id := range r.Prompt {
			if id < 0 || id >= 300 {
				t.Fatalf("id %d outside the vocabulary", id)
			}
			seen[id] = true
		}
	}
	if len(seen) < 250 {
		t.Errorf("%d distinct ids of 300 drawn", len(seen))
	}
}

func TestRandomErrors(t *testing.T) {
	tok := &byteTok{}
	for _, c := range []struct {
		name       string
		tok        bench.Tokenizer
		n, in, out int
		ratio      float64
	}{
		{"no tokenizer", nil, 1, 10, 10, 0},
		{"no requests", tok, 0, 10, 10, 0},
		{"only the BOS", tok, 1, 1, 10, 0},
		{"ratio 1", tok, 1, 10, 10, 1},
		{"negative ratio", tok, 1, 10, 10, -0.1},
		{"NaN ratio", tok, 1, 10, 10, math.NaN()},
		{"ratio empties prompts", tok, 1, 2, 10, 0.5},
		{"no output", tok, 1, 10, 0, 0},
	} {
		if _, err := bench.Random(c.tok, c.n, c.in, c.out, c.ratio, 1); !errors.Is(err, bench.ErrWorkload) {
			t.Errorf("%s: err = %v, want ErrWorkload", c.name, err)
		}
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromFilePrompts(t *testing.T) {
	tok := &byteTok{}
	path := writeFile(t, "prompts.jsonl", `{"prompt": "hello there", "max_tokens": 5}

{"prompt": "second", "output_len": 7, "extra": 1}
{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "max_tokens": 3}
`)
	reqs, err := bench.FromFile(tok, path, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	chat := "<system>be brief\n<user>hi\n<assistant>"
	want := []bench.Request{
		{Index: 0, Prompt: tok.Encode("hello there"), Text: "hello there", MaxTokens: 5},
		{Index: 1, Prompt: tok.Encode("second"), Text: "second", MaxTokens: 7},
		{Index: 2, Prompt: tok.Encode(chat), Text: chat, MaxTokens: 3,
			Messages: []bench.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}},
	}
	if !reflect.DeepEqual(reqs, want) {
		t.Errorf("FromFile:\ngot  %+v\nwant %+v", reqs, want)
	}
	// outputLen overrides; n > len repeats in order; n < len truncates.
	reqs, err = bench.FromFile(tok, path, 5, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, r := range reqs {
		if r.MaxTokens != 9 || r.Index != i {
			t.Errorf("request %d: max tokens %d, index %d; want 9, %d", i, r.MaxTokens, r.Index, i)
		}
		texts = append(texts, r.Text)
	}
	if want := []string{"hello there", "second", chat, "hello there", "second"}; !slices.Equal(texts, want) {
		t.Errorf("n = 5: texts %q, want %q", texts, want)
	}
	if reqs, _ := bench.FromFile(tok, path, 2, 0, 1); len(reqs) != 2 || reqs[1].Text != "second" {
		t.Errorf("n = 2: %+v", reqs)
	}
}

func TestFromFileErrors(t *testing.T) {
	tok := &byteTok{}
	for _, c := range []struct {
		name, text string
		tok        bench.Tokenizer
		outputLen  int
		want       string // in the message, after the path
	}{
		{"bad JSON", "{\"prompt\": \"a\", \"max_tokens\": 1}\n\n{\"prompt\": \n", tok, 0, ":3: "},
		{"no max_tokens", "{\"prompt\": \"a\", \"max_tokens\": 1}\n{\"prompt\": \"b\"}\n", tok, 0, ":2: no max_tokens"},
		{"no kind", "{\"text\": \"a\"}\n", tok, 5, ":1: no \"prompt\""},
		{"two kinds", "{\"prompt\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}\n", tok, 5, ":1: more than one"},
		{"empty prompt", "\n\n{\"prompt\": \"\"}\n", tok, 5, ":3: empty \"prompt\""},
		{"zero max_tokens", "{\"prompt\": \"a\", \"max_tokens\": 0}\n", tok, 0, ":1: \"max_tokens\" 0"},
		{"wrong type", "{\"prompt\": 5}\n", tok, 5, ":1: \"prompt\": want a string, not a JSON number"},
		{"no chat template", "{\"prompt\": \"a\"}\n{\"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}\n", &byteTok{noTemplate: true}, 5, ":2: rendering messages"},
		{"mixed kinds", "{\"prompt\": \"a\"}\n{\"conversations\": []}\n", tok, 5, ":2: mixes"},
		{"empty", "\n  \n", tok, 5, " has no entries"},
		{"array element", "[\n  {\"prompt\": \"a\"},\n  {\"prompt\": \"b\",\n   \"max_tokens\": -2}\n]\n", tok, 0, ":3: \"max_tokens\" -2"},
		{"array syntax", "[\n  {\"prompt\": \"a\"},\n\n  {\"prompt\" \"b\"}\n]\n", tok, 5, ":4: "},
		{"array no max_tokens", "[\n {\"prompt\": \"a\", \"max_tokens\": 2},\n\n {\"prompt\": \"b\"}\n]", tok, 0, ":4: no max_tokens"},
		{"after array", "[{\"prompt\": \"a\"}]\n{}\n", tok, 5, ":2: data after the array"},
	} {
		path := writeFile(t, "w.jsonl", c.text)
		_, err := bench.FromFile(c.tok, path, 0, c.outputLen, 1)
		if !errors.Is(err, bench.ErrWorkload) || !strings.Contains(err.Error(), path+c.want) {
			t.Errorf("%s: err = %v, want ErrWorkload with %q", c.name, err, path+c.want)
		}
	}
	if _, err := bench.FromFile(tok, filepath.Join(t.TempDir(), "missing.jsonl"), 0, 5, 1); !errors.Is(err, bench.ErrWorkload) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrWorkload and os.ErrNotExist", err)
	}
	if _, err := bench.FromFile(&byteTok{noTemplate: true}, writeFile(t, "c.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}\n"), 0, 5, 1); !errors.Is(err, errNoTemplate) {
		t.Errorf("chat error not wrapped: %v", err)
	}
}

// shareGPT is a pretty-printed ShareGPT file: conversation a is valid,
// b has one turn, c a 2-byte prompt (3 tokens with BOS), d a 2-byte reply.
const shareGPT = `[
  {"id": "a", "conversations": [
    {"from": "human", "value": "What is a cache?"},
    {"from": "gpt", "value": "A place to keep things."}]},
  {"id": "b", "conversations": [{"from": "human", "value": "lonely turn"}]},
  {"id": "c", "conversations": [
    {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello, how can I help?"}]},
  {"id": "d", "conversations": [
    {"from": "human", "value": "Say ok please."}, {"from": "gpt", "value": "ok"}]},
  {"id": "e", "conversations": [
    {"from": "human", "value": "Name a color."}, {"from": "gpt", "value": "Blue, like the sky."}, {"from": "human", "value": "more"}]}
]
`

func TestFromFileShareGPT(t *testing.T) {
	tok := &byteTok{}
	path := writeFile(t, "sharegpt.json", shareGPT)
	reqs, err := bench.FromFile(tok, path, 0, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range reqs {
		got[r.Text] = r.MaxTokens
		if !slices.Equal(r.Prompt, tok.Encode(r.Text)) || r.IgnoreEOS {
			t.Errorf("%q: prompt ids or IgnoreEOS wrong", r.Text)
		}
	}
	// Output lengths count the reply's tokens, BOS included, as vLLM does.
	want := map[string]int{"What is a cache?": 1 + 23, "Name a color.": 1 + 19}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ShareGPT requests (prompt → output length) = %v, want %v", got, want)
	}
	// --sharegpt-output-len: the short reply no longer matters.
	reqs, err = bench.FromFile(tok, path, 0, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 {
		t.Errorf("with an output length: %d requests, want 3 (a, d, e)", len(reqs))
	}
	// The shuffle follows the seed.
	order := func(seed uint64) []string {
		reqs, err := bench.FromFile(tok, path, 0, 8, seed)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, r := range reqs {
			s = append(s, r.Text)
		}
		return s
	}
	if !slices.Equal(order(3), order(3)) {
		t.Error("the same seed gives different orders")
	}
	distinct := map[string]bool{}
	for seed := range uint64(8) {
		distinct[strings.Join(order(seed), "|")] = true
	}
	if len(distinct) < 2 {
		t.Error("eight seeds give one order: no shuffle")
	}
}

func TestFromFileShareGPTLines(t *testing.T) {
	tok := &byteTok{}
	long := strings.Repeat("x", 1100) // over vLLM's 1024-token prompt limit
	path := writeFile(t, "sharegpt.jsonl", `{"conversations": [{"from": "human", "value": "Tell me a story."}, {"from": "gpt", "value": "Once upon a time."}]}
{"conversations": [{"from": "human", "value": "`+long+`"}, {"from": "gpt", "value": "too long to ask"}]}
`)
	reqs, err := bench.FromFile(tok, path, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].Text != "Tell me a story." || reqs[0].MaxTokens != 18 {
		t.Errorf("JSONL ShareGPT = %+v, want the first conversation only, 18 output tokens", reqs)
	}
	if _, err := bench.FromFile(tok, writeFile(t, "none.jsonl", `{"conversations": [{"from": "human", "value": "solo"}]}`), 0, 0, 1); !errors.Is(err, bench.ErrWorkload) {
		t.Errorf("no usable conversation: err = %v, want ErrWorkload", err)
	}
}

func TestBuiltIn(t *testing.T) {
	tok := &byteTok{}
	reqs, err := bench.BuiltIn(tok, 12, 32, 4)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for i, r := range reqs {
		if r.Index != i || r.MaxTokens != 32 || !r.IgnoreEOS || len(r.Prompt) < 20 {
			t.Errorf("request %d: index %d, max tokens %d, ignore EOS %v, %d prompt tokens", i, r.Index, r.MaxTokens, r.IgnoreEOS, len(r.Prompt))
		}
		if !slices.Equal(tok.Encode(r.Text), r.Prompt) {
			t.Errorf("request %d: Prompt is not Encode(Text)", i)
		}
		distinct[r.Text] = true
	}
	if len(distinct) != 12 {
		t.Errorf("%d distinct prompts of 12", len(distinct))
	}
	if !strings.Contains(reqs[4].Text, "pass key") || !strings.Contains(reqs[1].Text, "keys and their values") {
		t.Errorf("request 4 is not a passkey or 1 not a multi-key lookup: %.60q, %.60q", reqs[4].Text, reqs[1].Text)
	}
	again, _ := bench.BuiltIn(tok, 12, 32, 4)
	if !reflect.DeepEqual(reqs, again) {
		t.Error("the same seed gives different requests")
	}
	other, _ := bench.BuiltIn(tok, 12, 32, 5)
	if reflect.DeepEqual(reqs, other) {
		t.Error("seeds 4 and 5 give the same requests")
	}
	for _, c := range []struct{ n, out int }{{0, 5}, {5, 0}} {
		if _, err := bench.BuiltIn(tok, c.n, c.out, 1); !errors.Is(err, bench.ErrWorkload) {
			t.Errorf("BuiltIn(%d, %d): err = %v, want ErrWorkload", c.n, c.out, err)
		}
	}
}
