package datasets

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// byteCount counts tokens as the probe model's byte-level tokenizer does,
// with a BOS.
func byteCount(s string) int { return len(s) + 1 }

func TestRulerDeterministic(t *testing.T) {
	for _, task := range RulerTasks() {
		t.Run(task, func(t *testing.T) {
			a, err := Ruler(task, 2048, 7, byteCount)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Ruler(task, 2048, 7, byteCount)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("Ruler(%s, 2048, 7) differs between two calls", task)
			}
			c, _ := Ruler(task, 2048, 8, byteCount)
			if a.Prompt == c.Prompt {
				t.Errorf("Ruler(%s, 2048, 7) and seed 8 give the same prompt", task)
			}
		})
	}
}

// TestRulerFits: the prompt plus the answer budget fits the length, and
// one more haystack unit would not (the haystack is as large as fits).
func TestRulerFits(t *testing.T) {
	// A byte counter, as the probe model's tokenizer, and a word counter,
	// closer to a BPE tokenizer's rate, for RULER's lengths from 4K on
	// (where cwe repeats its words more).
	wordCount := func(s string) int { return len(strings.Fields(s)) + 1 }
	counters := []struct {
		name    string
		count   func(string) int
		lengths []int
	}{{"bytes", byteCount, []int{2048, 3000}}, {"words", wordCount, []int{4096, 8192}}}
	for _, task := range RulerTasks() {
		for _, c := range counters {
			for _, length := range c.lengths {
				t.Run(fmt.Sprintf("%s/%s/%d", task, c.name, length), func(t *testing.T) {
					testRulerFits(t, task, length, c.count)
				})
			}
		}
	}
}

func testRulerFits(t *testing.T, task string, length int, count func(string) int) {
	ex, err := Ruler(task, length, 3, count)
	if err != nil {
		t.Fatal(err)
	}
	if got := count(ex.Prompt) + ex.MaxTokens; ex.Tokens != got || got > length {
		t.Errorf("Tokens = %d, prompt+budget = %d, want equal and ≤ %d", ex.Tokens, got, length)
	}
	build, gen, _, _ := rulerBuilder(task, length, 3, count)
	if more := build(ex.Haystack + 1); count(more.Prompt)+gen <= length {
		t.Errorf("haystack %d fits, but Ruler chose %d", ex.Haystack+1, ex.Haystack)
	}
	if !strings.HasSuffix(ex.Prompt, ex.AnswerPrefix) || ex.AnswerPrefix == "" {
		t.Errorf("prompt does not end with its answer prefix %q", ex.AnswerPrefix)
	}
	for _, o := range ex.Outputs {
		if !strings.Contains(strings.TrimSuffix(ex.Prompt, ex.AnswerPrefix), o) && task != RulerCWE {
			t.Errorf("answer %q is not in the prompt", o)
		}
	}
}

// TestRulerCounts: sizing a long prompt counts it a few times, not
// log2(length) times.
func TestRulerCounts(t *testing.T) {
	for _, task := range []string{RulerNIAHSingle2, RulerNIAHSingle1, RulerFWE} {
		calls := 0
		count := func(s string) int { calls++; return len(strings.Fields(s)) + 1 }
		ex, err := Ruler(task, 131072, 1, count)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Tokens > 131072 || calls > 12 {
			t.Errorf("Ruler(%s, 131072): %d tokens after %d counts, want ≤ 131072 after ≤ 12", task, ex.Tokens, calls)
		}
		testRulerFits(t, task, 131072, func(s string) int { return len(strings.Fields(s)) + 1 })
	}
}

func TestRulerTooShort(t *testing.T) {
	_, err := Ruler(RulerNIAHSingle1, 256, 1, byteCount)
	if !errors.Is(err, ErrRulerLength) || !strings.Contains(err.Error(), "niah_single_1") {
		t.Errorf("Ruler(niah_single_1, 256) error = %v, want ErrRulerLength naming the task", err)
	}
	if err := CheckRulerTask("qa_1"); err == nil || !strings.Contains(err.Error(), "niah_multikey_3") {
		t.Errorf("CheckRulerTask(qa_1) = %v, want an error listing the tasks", err)
	}
}

var (
	needleRe = regexp.MustCompile(`One of the special magic (numbers|uuids) for ([a-z]+-[a-z]+|[0-9a-f-]{36}) is: ([0-9]{7}|[0-9a-f-]{36})\.`)
	uuidRe   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// TestRulerNIAHTemplates checks the niah prompts against RULER's
// template, needle and answer prefix (scripts/data/synthetic/constants.py
// and niah.py), written out by hand.
func TestRulerNIAHTemplates(t *testing.T) {
	t.Run("niah_single_2", func(t *testing.T) {
		ex, err := Ruler(RulerNIAHSingle2, 2048, 11, byteCount)
		if err != nil {
			t.Fatal(err)
		}
		ns := needleRe.FindAllStringSubmatch(ex.Prompt, -1)
		if len(ns) != 1 || ns[0][1] != "numbers" {
			t.Fatalf("needles %q, want one of numbers", ns)
		}
		key, value := ns[0][2], ns[0][3]
		if want := []string{value}; !reflect.DeepEqual(ex.Outputs, want) {
			t.Errorf("Outputs = %q, want %q", ex.Outputs, want)
		}
		head := "A special magic number is hidden within the following text. Make sure to memorize it. I will quiz you about the number afterwards.\n"
		tail := "\nWhat is the special magic number for " + key + " mentioned in the provided text? The special magic number for " + key + " mentioned in the provided text is"
		if !strings.HasPrefix(ex.Prompt, head) || !strings.HasSuffix(ex.Prompt, tail) {
			t.Errorf("prompt = %.200q … %q, want %q … %q", ex.Prompt, ex.Prompt[max(0, len(ex.Prompt)-200):], head, tail)
		}
		if ex.AnswerPrefix != " The special magic number for "+key+" mentioned in the provided text is" {
			t.Errorf("AnswerPrefix = %q", ex.AnswerPrefix)
		}
		// The essay haystack: prose, sentences joined by spaces, no newline.
		body := strings.TrimSuffix(strings.TrimPrefix(ex.Prompt, head), tail)
		if strings.Contains(body, "\n") || strings.Contains(body, RulerNoise) || len(strings.Fields(body)) < 100 {
			t.Errorf("essay haystack %.300q: want one line of prose", body)
		}
	})
	t.Run("niah_single_1 noise", func(t *testing.T) {
		ex, _ := Ruler(RulerNIAHSingle1, 1024, 2, byteCount)
		lines := strings.Split(ex.Prompt, "\n")
		needles, noise := 0, 0
		for _, l := range lines[1 : len(lines)-1] {
			switch {
			case l == RulerNoise:
				noise++
			case needleRe.MatchString(l):
				needles++
			default:
				t.Errorf("haystack line %q is neither noise nor a needle", l)
			}
		}
		if needles != 1 || noise < 2 || noise != ex.Haystack {
			t.Errorf("%d needles and %d noise lines (haystack %d), want 1 and the haystack", needles, noise, ex.Haystack)
		}
	})
	t.Run("niah_single_3 uuids", func(t *testing.T) {
		ex, _ := Ruler(RulerNIAHSingle3, 2048, 2, byteCount)
		if len(ex.Outputs) != 1 || !uuidRe.MatchString(ex.Outputs[0]) || !strings.HasPrefix(ex.Prompt, "A special magic uuid is hidden") {
			t.Errorf("Outputs = %q, prompt %.40q: want one UUID and the singular uuid template", ex.Outputs, ex.Prompt)
		}
	})
	t.Run("niah_multikey_1", func(t *testing.T) {
		ex, _ := Ruler(RulerNIAHMultiKey1, 2048, 2, byteCount)
		if ns := needleRe.FindAllStringSubmatch(ex.Prompt, -1); len(ns) != 4 || len(ex.Outputs) != 1 {
			t.Errorf("%d needles, %d outputs, want 4 keys and 1 answer", len(ns), len(ex.Outputs))
		}
	})
	t.Run("niah_multikey_3", func(t *testing.T) {
		ex, _ := Ruler(RulerNIAHMultiKey3, 2048, 2, byteCount)
		ns := needleRe.FindAllStringSubmatch(ex.Prompt, -1)
		if len(ns) != ex.Haystack+1 {
			t.Errorf("%d needle lines, want the haystack %d plus the needle", len(ns), ex.Haystack)
		}
		for _, n := range ns {
			if !uuidRe.MatchString(n[2]) || !uuidRe.MatchString(n[3]) {
				t.Errorf("needle %q: want UUID key and value", n[0])
			}
		}
	})
	t.Run("niah_multivalue", func(t *testing.T) {
		ex, _ := Ruler(RulerNIAHMultiValue, 2048, 5, byteCount)
		ns := needleRe.FindAllStringSubmatch(ex.Prompt, -1)
		if len(ns) != 4 || len(ex.Outputs) != 4 {
			t.Fatalf("%d needles, %d outputs, want 4 and 4", len(ns), len(ex.Outputs))
		}
		key := ns[0][2]
		head := "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you about the numbers afterwards.\n"
		tail := "\nWhat are all the special magic numbers for " + key + " mentioned in the provided text? The special magic numbers for " + key + " mentioned in the provided text are"
		if !strings.HasPrefix(ex.Prompt, head) || !strings.HasSuffix(ex.Prompt, tail) {
			t.Errorf("prompt %.150q … %q: want the plural template", ex.Prompt, ex.Prompt[len(ex.Prompt)-150:])
		}
	})
	t.Run("niah_multiquery", func(t *testing.T) {
		ex, _ := Ruler(RulerNIAHMultiQuery, 2048, 5, byteCount)
		ns := needleRe.FindAllStringSubmatch(ex.Prompt, -1)
		if len(ns) != 4 || len(ex.Outputs) != 4 {
			t.Fatalf("%d needles, %d outputs, want 4 and 4", len(ns), len(ex.Outputs))
		}
		q := regexp.MustCompile(`for ([a-z-]+), ([a-z-]+), ([a-z-]+), and ([a-z-]+) mentioned in the provided text\?`)
		if !q.MatchString(ex.Prompt) {
			t.Errorf("prompt %q: want the query \"a, b, c, and d\"", ex.Prompt[len(ex.Prompt)-250:])
		}
	})
}

func TestRulerVT(t *testing.T) {
	ex, err := Ruler(RulerVT, 2048, 4, byteCount)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Outputs) != 5 {
		t.Fatalf("Outputs = %q, want the chain's 5 variables", ex.Outputs)
	}
	m := regexp.MustCompile(`VAR ` + ex.Outputs[0] + ` = (\d{5})\n`).FindStringSubmatch(ex.Prompt)
	if m == nil {
		t.Fatalf("no line VAR %s = NNNNN", ex.Outputs[0])
	}
	for i := 1; i < 5; i++ {
		if l := "VAR " + ex.Outputs[i] + " = VAR " + ex.Outputs[i-1] + " \n"; !strings.Contains(ex.Prompt, l) {
			t.Errorf("prompt lacks the hop %q", l)
		}
	}
	q := "\nQuestion: Find all variables that are assigned the value " + m[1] + " in the text above. Answer: According to the chain(s) of variable assignment in the text above, 5 variables are assigned the value " + m[1] + ", they are: "
	if !strings.HasSuffix(ex.Prompt, q) {
		t.Errorf("prompt ends %q, want %q", ex.Prompt[len(ex.Prompt)-200:], q)
	}
	// The few-shot example comes first, with its answer: 5 three-letter
	// variables.
	tmpl := "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
	if !strings.HasPrefix(ex.Prompt, tmpl) || strings.Count(ex.Prompt, tmpl) != 2 ||
		!regexp.MustCompile(`they are:  [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3}\n\n`+regexp.QuoteMeta(tmpl)).MatchString(ex.Prompt) {
		t.Errorf("prompt %.600q: want the few-shot example with its answer first", ex.Prompt)
	}
}

func TestRulerCWE(t *testing.T) {
	ex, err := Ruler(RulerCWE, 2048, 4, byteCount)
	if err != nil {
		t.Fatal(err)
	}
	const q = "\nQuestion: What are the 10 most common words in the above list? Answer: The top 10 words that appear most often in the list are:"
	if strings.Count(ex.Prompt, q) != 2 || !strings.HasSuffix(ex.Prompt, q) || len(ex.Outputs) != 10 {
		t.Fatalf("want the few-shot and the asked list, each ending %q, and 10 answers (%d)", q, len(ex.Outputs))
	}
	list := ex.Prompt[strings.LastIndex(ex.Prompt, "Below is a numbered list"):]
	counts := map[string]int{}
	for _, f := range regexp.MustCompile(`\d+\. ([a-z]+)`).FindAllStringSubmatch(list, -1) {
		counts[f[1]]++
	}
	// Below 4096 tokens, RULER repeats the common words 6 times, the others once.
	for w, c := range counts {
		want := 1
		for _, o := range ex.Outputs {
			if o == w {
				want = 6
			}
		}
		if c != want {
			t.Errorf("%q appears %d times, want %d", w, c, want)
		}
	}
	if len(counts) != ex.Haystack {
		t.Errorf("%d distinct words, want the haystack %d", len(counts), ex.Haystack)
	}
}

func TestRulerFWE(t *testing.T) {
	ex, err := Ruler(RulerFWE, 2048, 4, byteCount)
	if err != nil {
		t.Fatal(err)
	}
	const tail = "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently appeared words in the above coded text? Answer: According to the coded text above, the three most frequently appeared words are:"
	const head = "Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared coded words. "
	if !strings.HasPrefix(ex.Prompt, head) || !strings.HasSuffix(ex.Prompt, tail) {
		t.Fatalf("prompt %.150q: want RULER's fwe template", ex.Prompt)
	}
	counts := map[string]int{}
	for _, w := range strings.Fields(strings.TrimSuffix(strings.TrimPrefix(ex.Prompt, head), tail)) {
		counts[w]++
	}
	// Zipf with α = 2: word k appears floor(n/(k²ζ(2))) times.
	n := ex.Haystack
	for k, w := range append([]string{"..."}, ex.Outputs...) {
		if want := int(float64(n) / float64((k+1)*(k+1)) / 1.6449340668482264); counts[w] != want {
			t.Errorf("word %d %q appears %d times, want %d", k+1, w, counts[w], want)
		}
	}
}

func TestRulerEssay(t *testing.T) {
	a, b := RulerEssay(300), RulerEssay(5000)
	if !strings.HasPrefix(b, a) || len(strings.Fields(a)) != 300 {
		t.Errorf("RulerEssay(300) is not a 300-word prefix of RulerEssay(5000)")
	}
	sents := essaySentences(b)
	if len(sents) < 100 {
		t.Fatalf("%d sentences in 5000 words", len(sents))
	}
	for _, s := range sents[:len(sents)-1] {
		if !strings.ContainsAny(s[len(s)-1:], ".?!") || s[0] < 'A' || s[0] > 'Z' {
			t.Errorf("sentence %q: want a capital and an end mark", s)
		}
	}
	if strings.Contains(b, " a a") || strings.Contains(b, " a e") || strings.Contains(b, "A a") {
		t.Errorf("essay has \"a\" before a vowel")
	}
}
