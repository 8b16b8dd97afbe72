package eval

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestLongBenchMetrics checks each LongBench metric (LongBench/metrics.py)
// on hand-made examples; the expected numbers are worked out in the
// comments.
func TestLongBenchMetrics(t *testing.T) {
	tests := []struct {
		name         string
		m            Metric
		pred, answer string
		classes      []string
		want         float64
	}{
		// normalize_answer: "cat sat on mat" (4) against "cat on mat" (3),
		// 3 shared: P 3/4, R 1, F1 = 2·0.75/1.75 = 6/7.
		{"qa-f1", MetricQAF1, "The cat sat on the mat.", "a cat on a mat", nil, 6.0 / 7},
		{"qa-f1 nothing shared", MetricQAF1, "dog", "cat", nil, 0},
		// 北 京 是 中 国 的 首 都 (。 removed): 8 tokens, 北 京 shared:
		// P 2/8, R 1, F1 = 2·0.25/1.25 = 0.4.
		{"qa-f1-zh", MetricQAF1Zh, "北京是中国的首都。", "北京", nil, 0.4},
		// 答 案 是 python3 against python3: P 1/4, R 1, F1 = 0.4.
		{"qa-f1-zh ascii run", MetricQAF1Zh, "答案是Python3", "python3", nil, 0.4},
		// Sentences [the cat sat] [the dog ran], reference [the cat ran]:
		// m = 3 distinct reference words, n = 5 distinct hypothesis words;
		// LCS with each sentence: {the cat}, {the ran}; union 3. R = 1,
		// P = 0.6, F = 2·(0.6/(1.6+1e-8)) ≈ 0.75.
		{"rouge summary level", MetricRouge, "the cat sat. the dog ran", "the cat ran", nil, 2 * (0.6 / (1.6 + 1e-8))},
		// Reference [a b], hypothesis [b a] [b]: the package walks back
		// from the end and drops from the hypothesis on ties, so LCS([a b],
		// [b a]) is {b}; with [b] also {b}: union 1, m = n = 2, R = P = 0.5,
		// F = 2·(0.25/(1+1e-8)).
		{"rouge LCS tie-break", MetricRouge, "b a. b", "a b", nil, 2 * (0.25 / (1 + 1e-8))},
		// "cat. " has the sentences [cat] and [""] (a piece of spaces):
		// n = 2, m = 1, union {cat}: R = 1, P = 0.5, F = 2·(0.5/1.5).
		{"rouge empty sentence", MetricRouge, "cat. ", "cat", nil, 2 * (0.5 / (1.5 + 1e-8))},
		{"rouge empty prediction", MetricRouge, "", "cat", nil, 0},
		{"rouge only periods", MetricRouge, "...", "cat", nil, 0},
		// 会 议 讨 论 了 预 算 (7) against 会 议 讨 论 预 算 (6): LCS 6,
		// R = 1, P = 6/7, F = 2·((6/7)/(13/7+1e-8)) ≈ 12/13.
		{"rouge-zh", MetricRougeZh, "会议讨论了预算", "会议讨论预算", nil, 2 * ((6.0 / 7) / (6.0/7 + 1 + 1e-8))},
		{"classification", MetricClassification, "Person", "Person", []string{"Location", "Person", "Number"}, 1},
		// Location and Person found; neither is inside "Person" but
		// different from it: 1/2.
		{"classification two found", MetricClassification, "Person or Location", "Person", []string{"Location", "Person", "Number"}, 0.5},
		{"classification wrong", MetricClassification, "Number", "Person", []string{"Location", "Person", "Number"}, 0},
		// Found [a ab b abc]; Python removes "a" (in "abc", not equal) and
		// then skips "ab", removes "b": [ab abc], score 1/2 (1 without the
		// skip).
		{"classification python skip", MetricClassification, "abc", "abc", []string{"a", "ab", "b", "abc"}, 0.5},
		{"retrieval", MetricRetrieval, "Paragraph 3", "Paragraph 3", nil, 1},
		{"retrieval two numbers", MetricRetrieval, "Paragraph 3, not 12", "Paragraph 3", nil, 0.5},
		{"retrieval no number", MetricRetrieval, "I cannot tell", "Paragraph 3", nil, 0},
		// Python's \d matches the full-width ２: numbers 5 and ２, one right.
		{"retrieval-zh", MetricRetrievalZh, "答案是段落5和段落２", "段落5", nil, 0.5},
		{"count", MetricCount, "There are 7 unique paragraphs, 7.", "7", nil, 1},
		{"count leading zero", MetricCount, "07", "7", nil, 0},
		{"count half", MetricCount, "5 or 7", "7", nil, 0.5},
		// First line without "#": "    return x + 1" (16) against
		// "    return x+1" (14): blocks "    return x", "+", "1", 14
		// matched, ratio 28/30, 93.33 → 93 → 0.93.
		{"code-sim", MetricCodeSim, "\n# comment\n    return x + 1\nfoo", "    return x+1", nil, 0.93},
		{"code-sim equal", MetricCodeSim, "x = 1", "x = 1", nil, 1},
		{"code-sim every line commented", MetricCodeSim, "// a\n# b", "x = 1", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LongBenchScore(tt.m, tt.pred, tt.answer, tt.classes); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("LongBenchScore(%s, %q, %q) = %.15g, want %.15g", tt.m, tt.pred, tt.answer, got, tt.want)
			}
		})
	}
}

// TestFuzzRatio checks fuzz.ratio's rounding and difflib's matching
// blocks and autojunk rule (numbers from Python's difflib).
func TestFuzzRatio(t *testing.T) {
	// One match in 16 elements: 2/16 = 0.125, ×100 = 12.5, which Python's
	// round takes to the even 12.
	if got := FuzzRatio("abcdefgh", "ijklmnoa"); got != 12 {
		t.Errorf(`FuzzRatio("abcdefgh", "ijklmnoa") = %d, want 12 (half to even)`, got)
	}
	// b has 210 elements: "a" (150 times) and "b" (60) are popular (more
	// than 210/100+1 = 3) and start no match, but the empty match at the
	// start extends over a[0] = b[0] = "a": 1 matched of 216.
	b := []rune(strings.Repeat("a", 150) + strings.Repeat("b", 60))
	if got, want := SequenceMatcherRatio([]rune("ababab"), b), 2.0/216; got != want {
		t.Errorf("SequenceMatcherRatio with popular elements = %v, want %v", got, want)
	}
	if got := FuzzRatio("", "x"); got != 0 {
		t.Errorf(`FuzzRatio("", "x") = %d, want 0`, got)
	}
	if got := FuzzRatio("", ""); got != 100 {
		t.Errorf(`FuzzRatio("", "") = %d, want 100 (equal strings)`, got)
	}
}

// TestLongBenchScoreOutput: the best over the answers of a JSON array,
// the first-line rule, and Pass at 0.5.
func TestLongBenchScoreOutput(t *testing.T) {
	sc, err := ScoreOutput(MetricQAF1, "Paris", `["London", "Paris, France"]`, ScoreOptions{})
	// "paris" against "paris france": P 1, R 1/2, F1 2/3.
	if err != nil || math.Abs(sc.Value-2.0/3) > 1e-12 || !sc.Pass {
		t.Errorf("qa-f1 over two answers = %+v, %v; want 2/3, pass", sc, err)
	}
	sc, err = ScoreOutput(MetricRouge, "\n\nthe cat ran\nDialogue: more", `["the cat ran"]`, ScoreOptions{FirstLine: true})
	if err != nil || sc.Value < 0.99 {
		t.Errorf("rouge-score of the first line = %+v, %v; want about 1", sc, err)
	}
	sc, err = ScoreOutput(MetricClassification, "Number", `["Number"]`, ScoreOptions{Classes: []string{"Number", "Person"}})
	if err != nil || sc.Value != 1 {
		t.Errorf("classification with classes = %+v, %v; want 1", sc, err)
	}
	sc, err = ScoreOutput(MetricCount, "5 or 7", `["7"]`, ScoreOptions{})
	if err != nil || sc.Value != 0.5 || !sc.Pass {
		t.Errorf("count 0.5 = %+v, %v; want Value 0.5, Pass", sc, err)
	}
	if _, err := ScoreOutput(MetricQAF1, "x", "Paris", ScoreOptions{}); !errors.Is(err, ErrReference) {
		t.Errorf("qa-f1 with a reference that is not a JSON array: %v, want ErrReference", err)
	}
}

// TestExtractLongBench2Answer checks v2's extract_answer cases.
func TestExtractLongBench2Answer(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"The correct answer is (B).", "B"},
		{"**The correct answer is (C)**", "C"},
		{"The correct answer is D", "D"},
		{"I think The correct answer is A, no: The correct answer is (B)", "B"},
		{"the correct answer is (A)", ""},
		{"The correct answer is (E)", ""},
		{"The correct answer is (insert answer here)", ""},
		{"The correct answer is *(A)*", "A"},
		{"", ""},
	} {
		if got := ExtractLongBench2Answer(tc.in); got != tc.want {
			t.Errorf("ExtractLongBench2Answer(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	sc, err := ScoreOutput(MetricChoice, "The correct answer is (B)", "B", ScoreOptions{})
	if err != nil || !sc.Pass || sc.Value != 1 {
		t.Errorf("choice-accuracy right = %+v, %v", sc, err)
	}
	sc, err = ScoreOutput(MetricChoice, "The correct answer is (A)", "B", ScoreOptions{})
	if err != nil || sc.Pass || sc.Value != 0 {
		t.Errorf("choice-accuracy wrong = %+v, %v", sc, err)
	}
	if _, err := ScoreOutput(MetricChoice, "x", "E", ScoreOptions{}); !errors.Is(err, ErrReference) {
		t.Errorf("choice-accuracy with reference E: %v, want ErrReference", err)
	}
}
