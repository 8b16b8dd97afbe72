package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LongBench's metrics (github.com/THUDM/LongBench, LongBench/metrics.py and
// eval.py's dataset2metric), one prediction against one answer; an item
// scores the best over its answers, as eval.py's scorer does, and a row is
// the items' mean ×100. Each is also a Score with Pass = Value ≥ 0.5 (the
// f1 and rouge-l threshold), which the flips and McNemar's test count; the
// row's drop and its bootstrap interval use the values.
//
//	qa-f1-score           SQuAD's token F1 after normalize_answer (lowercase,
//	                      remove string.punctuation and the articles a/an/the,
//	                      collapse white space): TokenF1
//	qa-f1-zh-score        token F1 over zhTokens, each token lowercased, stripped
//	                      of ASCII and Chinese punctuation and white space, empty
//	                      tokens dropped
//	rouge-score           ROUGE-L F of the `rouge` package (pltrdy/rouge 1.0.1,
//	                      summary level, exclusive): LongBenchRouge
//	rouge-zh-score        rouge-score of the zhTokens joined by spaces
//	classification-score  the classes (all_classes) found in the prediction,
//	                      less those inside the answer but not equal to it (with
//	                      Python's skip-after-remove iteration): 1/|found| when the
//	                      answer is among them, else 0
//	retrieval-score       the share of the prediction's numbers (\d+) equal to N of
//	                      the answer's "Paragraph N"; 0 without numbers
//	retrieval-zh-score    the same with "段落N"
//	count-score           the share of the prediction's numbers equal to the answer
//	code-sim-score        fuzzywuzzy's fuzz.ratio/100 of the prediction's first line
//	                      without "`", "#" or "//" (after leading newlines) and the
//	                      answer: difflib's SequenceMatcher ratio ×100 rounded half
//	                      to even, 100 for equal strings, 0 when one is empty
//
// Differences from LongBench:
//   - Chinese is tokenized without jieba (no Go port): zhTokens makes every
//     character its own token except runs of ASCII letters and digits, which
//     stay whole (jieba's words are mostly one to three characters), so the
//     zh scores differ from LongBench's a little;
//   - the rouge package reconstructs each LCS recursively, and Python's
//     recursion limit makes it fail, and LongBench score 0, when a sentence
//     pair holds about 1,000 words together; kvq scores those pairs;
//   - Python's \d matches every Unicode decimal digit; kvq's \p{Nd} does too.
//
// The reference of the v1 metrics is a JSON array of the answers (kept as
// written: code answers keep their indentation), with the classes and the
// first-line rule of the task in ScoreOptions.
const (
	MetricQAF1           Metric = "qa-f1-score"
	MetricQAF1Zh         Metric = "qa-f1-zh-score"
	MetricRouge          Metric = "rouge-score"
	MetricRougeZh        Metric = "rouge-zh-score"
	MetricClassification Metric = "classification-score"
	MetricRetrieval      Metric = "retrieval-score"
	MetricRetrievalZh    Metric = "retrieval-zh-score"
	MetricCount          Metric = "count-score"
	MetricCodeSim        Metric = "code-sim-score"
	// MetricChoice is LongBench v2's judge: the letter extracted from the
	// output (ExtractLongBench2Answer) equals the reference letter.
	MetricChoice Metric = "choice-accuracy"
)

// longBenchMetric reports whether m is one of LongBench's v1 metrics.
func longBenchMetric(m Metric) bool {
	switch m {
	case MetricQAF1, MetricQAF1Zh, MetricRouge, MetricRougeZh, MetricClassification, MetricRetrieval, MetricRetrievalZh, MetricCount, MetricCodeSim:
		return true
	}
	return false
}

// LongBenchScore is LongBench's metric m of prediction against one answer
// (ground_truth); classes are the dataset's all_classes (classification).
func LongBenchScore(m Metric, prediction, answer string, classes []string) float64 {
	switch m {
	case MetricQAF1:
		return TokenF1(prediction, answer)
	case MetricQAF1Zh:
		return tokensF1(zhNormalizedTokens(prediction), zhNormalizedTokens(answer))
	case MetricRouge:
		return LongBenchRouge(prediction, answer)
	case MetricRougeZh:
		return LongBenchRouge(strings.Join(zhTokens(prediction), " "), strings.Join(zhTokens(answer), " "))
	case MetricClassification:
		return classificationScore(prediction, answer, classes)
	case MetricRetrieval, MetricRetrievalZh:
		id := retrievalID(m, answer)
		if id == "" {
			return 0
		}
		return numberShare(prediction, id)
	case MetricCount:
		return numberShare(prediction, answer)
	case MetricCodeSim:
		return codeSim(prediction, answer)
	}
	return 0
}

// LongBenchFirstLine is eval.py's post-processing of trec, triviaqa, samsum
// and lsht: prediction.lstrip('\n').split('\n')[0].
func LongBenchFirstLine(s string) string {
	s = strings.TrimLeft(s, "\n")
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// scoreLongBench scores output with LongBench metric m against reference,
// a JSON array of answers: the best over the answers.
func scoreLongBench(m Metric, output, reference string, o ScoreOptions) (Score, error) {
	var answers []string
	if err := json.Unmarshal([]byte(reference), &answers); err != nil || len(answers) == 0 {
		return Score{}, fmt.Errorf("%w: %s needs a JSON array of answers, got %.40q", ErrReference, m, reference)
	}
	if o.FirstLine {
		output = LongBenchFirstLine(output)
	}
	best, arg := 0.0, 0
	for i, a := range answers {
		if v := LongBenchScore(m, output, a, o.Classes); v > best {
			best, arg = v, i
		}
	}
	detail := fmt.Sprintf("%s %.3f", m, best)
	if len(answers) > 1 {
		detail += fmt.Sprintf(" (best of %d answers: %q)", len(answers), answers[arg])
	}
	return Score{Pass: best >= DefaultThreshold-1e-12, Value: best, Detail: detail}, nil
}

// tokensF1 is LongBench's f1_score of two token lists: 2PR/(P+R) of the
// multiset overlap, 0 when nothing is shared.
func tokensF1(pred, ref []string) float64 {
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

// zhPunctuation is normalize_zh_answer's cn_punctuation; ASCII punctuation
// (string.punctuation) is removed as well.
const zhPunctuation = "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."

// normalizeZh is normalize_zh_answer: lowercase, remove ASCII and Chinese
// punctuation, remove every white space.
func normalizeZh(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r < utf8.RuneSelf && strings.ContainsRune(asciiPunctuation, r) || strings.ContainsRune(zhPunctuation, r) {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// zhTokens stands in for jieba.cut: runs of ASCII letters and digits are
// one token each, white space separates, and every other character is a
// token of its own.
func zhTokens(s string) []string {
	var out []string
	asciiWord := func(r rune) bool { return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) }
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			i += n
		case asciiWord(r):
			j := i + n
			for j < len(s) && asciiWord(rune(s[j])) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			out = append(out, s[i:i+n])
			i += n
		}
	}
	return out
}

// zhNormalizedTokens are qa_f1_zh_score's tokens: zhTokens, each
// normalized, the empty ones dropped.
func zhNormalizedTokens(s string) []string {
	var out []string
	for _, t := range zhTokens(s) {
		if t = normalizeZh(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// classificationScore is LongBench's classification_score.
func classificationScore(prediction, answer string, classes []string) float64 {
	var found []string
	for _, c := range classes {
		if strings.Contains(prediction, c) {
			found = append(found, c)
		}
	}
	// Python removes from the list it iterates: the element after a
	// removed one is skipped. The index walks on regardless, as Python's
	// list iterator does.
	for i := 0; i < len(found); i++ {
		if t := found[i]; strings.Contains(answer, t) && t != answer {
			k := slices.Index(found, t)
			found = slices.Delete(found, k, k+1)
		}
	}
	if slices.Contains(found, answer) {
		return 1 / float64(len(found))
	}
	return 0
}

var (
	// pyDigits is Python's \d+ in a str pattern: Unicode decimal digits.
	pyDigits      = regexp.MustCompile(`\p{Nd}+`)
	retrievalEnRE = regexp.MustCompile(`Paragraph (\p{Nd}+)`)
	retrievalZhRE = regexp.MustCompile(`段落(\p{Nd}+)`)
)

// retrievalID is the paragraph number of a retrieval answer ("Paragraph
// 12", "段落12"), "" when it has none.
func retrievalID(m Metric, answer string) string {
	re := retrievalEnRE
	if m == MetricRetrievalZh {
		re = retrievalZhRE
	}
	if g := re.FindStringSubmatch(answer); g != nil {
		return g[1]
	}
	return ""
}

// numberShare is the share of the numbers in prediction that equal want
// as strings (count_score, retrieval_score): 0 without numbers.
func numberShare(prediction, want string) float64 {
	nums := pyDigits.FindAllString(prediction, -1)
	if len(nums) == 0 {
		return 0
	}
	right := 0
	for _, n := range nums {
		if n == want {
			right++
		}
	}
	return float64(right) / float64(len(nums))
}

// codeSim is code_sim_score: the first line of prediction (after leading
// newlines) without "`", "#" or "//", or "" when none, against answer by
// fuzz.ratio / 100.
func codeSim(prediction, answer string) float64 {
	line := ""
	for _, l := range strings.Split(strings.TrimLeft(prediction, "\n"), "\n") {
		if !strings.Contains(l, "`") && !strings.Contains(l, "#") && !strings.Contains(l, "//") {
			line = l
			break
		}
	}
	return float64(FuzzRatio(line, answer)) / 100
}

// FuzzRatio is fuzzywuzzy's fuzz.ratio without python-Levenshtein (which
// LongBench's requirements do not install): 100 when the strings are equal,
// 0 when either is empty, else difflib.SequenceMatcher(None, a,
// b).ratio() ×100 rounded as Python's round (half to even). The strings
// are compared as sequences of code points.
func FuzzRatio(a, b string) int {
	if a == b {
		return 100
	}
	if a == "" || b == "" {
		return 0
	}
	return int(math.RoundToEven(100 * SequenceMatcherRatio([]rune(a), []rune(b))))
}

// SequenceMatcherRatio is Python's difflib.SequenceMatcher(None, a,
// b).ratio(): 2M/T with M the matched elements of get_matching_blocks and
// T = len(a)+len(b) (1 when both are empty), with difflib's autojunk rule:
// when b has 200 elements or more, an element occurring more than
// len(b)/100+1 times in b is "popular" and starts no match (a match may
// still extend over it).
func SequenceMatcherRatio(a, b []rune) float64 {
	if len(a)+len(b) == 0 {
		return 1
	}
	b2j := map[rune][]int{}
	for j, r := range b {
		b2j[r] = append(b2j[r], j)
	}
	if n := len(b); n >= 200 {
		ntest := n/100 + 1
		for r, idx := range b2j {
			if len(idx) > ntest {
				delete(b2j, r)
			}
		}
	}
	longest := func(alo, ahi, blo, bhi int) (int, int, int) {
		besti, bestj, bestsize := alo, blo, 0
		j2len := map[int]int{}
		for i := alo; i < ahi; i++ {
			next := map[int]int{}
			for _, j := range b2j[a[i]] {
				if j < blo {
					continue
				}
				if j >= bhi {
					break
				}
				k := j2len[j-1] + 1
				next[j] = k
				if k > bestsize {
					besti, bestj, bestsize = i-k+1, j-k+1, k
				}
			}
			j2len = next
		}
		// No junk (isjunk is None): extend over equal elements, popular
		// ones included, on both sides.
		for besti > alo && bestj > blo && a[besti-1] == b[bestj-1] {
			besti, bestj, bestsize = besti-1, bestj-1, bestsize+1
		}
		for besti+bestsize < ahi && bestj+bestsize < bhi && a[besti+bestsize] == b[bestj+bestsize] {
			bestsize++
		}
		return besti, bestj, bestsize
	}
	matches := 0
	queue := [][4]int{{0, len(a), 0, len(b)}}
	for len(queue) > 0 {
		q := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		alo, ahi, blo, bhi := q[0], q[1], q[2], q[3]
		i, j, k := longest(alo, ahi, blo, bhi)
		if k == 0 {
			continue
		}
		matches += k
		if alo < i && blo < j {
			queue = append(queue, [4]int{alo, i, blo, j})
		}
		if i+k < ahi && j+k < bhi {
			queue = append(queue, [4]int{i + k, ahi, j + k, bhi})
		}
	}
	return 2.0 * float64(matches) / float64(len(a)+len(b))
}

// LongBenchRouge is LongBench's rouge_score: the `rouge` package's
// (pltrdy/rouge 1.0.1) ROUGE-L F at summary level, 0 where the package
// raises (an empty hypothesis or reference). Both texts are split into
// sentences at "." (empty pieces dropped, each piece's white space
// collapsed to single spaces), the sentences into words at " ". With m and
// n the distinct words of the reference and the hypothesis, and U the
// union over every reference sentence r and hypothesis sentence c of the
// set of words of LCS(r, c) (reconstructed as the package does), R = |U|/m,
// P = |U|/n and F = 2·(P·R/(P+R+1e-8)).
func LongBenchRouge(prediction, reference string) float64 {
	hyp, ref := rougeSentences(prediction), rougeSentences(reference)
	if len(hyp) == 0 || len(ref) == 0 {
		return 0
	}
	distinct := func(sents [][]string) int {
		set := map[string]bool{}
		for _, s := range sents {
			for _, w := range s {
				set[w] = true
			}
		}
		return len(set)
	}
	m, n := distinct(ref), distinct(hyp)
	union := map[string]bool{}
	for _, r := range ref {
		for _, c := range hyp {
			for _, w := range reconLCS(r, c) {
				union[w] = true
			}
		}
	}
	llcs := float64(len(union))
	rl, pl := llcs/float64(m), llcs/float64(n)
	return 2.0 * ((pl * rl) / (pl + rl + 1e-8))
}

// rougeSentences is the rouge package's preprocessing: split at ".", drop
// empty pieces, collapse each piece's white space (a piece of spaces
// becomes the empty sentence, whose one word is ""), split at " ".
func rougeSentences(s string) [][]string {
	var out [][]string
	for _, p := range strings.Split(s, ".") {
		if p == "" {
			continue
		}
		out = append(out, strings.Split(strings.Join(strings.Fields(p), " "), " "))
	}
	return out
}

// reconLCS is the rouge package's _recon_lcs(x, y): the words of one
// longest common subsequence, walking back from the end and preferring to
// drop from x only when that keeps a strictly longer LCS.
func reconLCS(x, y []string) []string {
	n, m := len(x), len(y)
	t := make([][]int32, n+1)
	for i := range t {
		t[i] = make([]int32, m+1)
	}
	for i := 1; i <= n; i++ {
		for j := 1; j <= m; j++ {
			if x[i-1] == y[j-1] {
				t[i][j] = t[i-1][j-1] + 1
			} else {
				t[i][j] = max(t[i-1][j], t[i][j-1])
			}
		}
	}
	var out []string
	for i, j := n, m; i > 0 && j > 0; {
		switch {
		case x[i-1] == y[j-1]:
			out = append(out, x[i-1])
			i, j = i-1, j-1
		case t[i-1][j] > t[i][j-1]:
			i--
		default:
			j--
		}
	}
	return out
}

// v2's answer extraction (LongBench v2's pred.py extract_answer): "*"
// removed, then the first "The correct answer is (X)", else the first "The
// correct answer is X", X one of A–D; "" when neither occurs.
var (
	lb2Paren = regexp.MustCompile(`The correct answer is \(([A-D])\)`)
	lb2Bare  = regexp.MustCompile(`The correct answer is ([A-D])`)
)

// ExtractLongBench2Answer is the letter LongBench v2 reads from a
// response (its output trimmed), "" when none.
func ExtractLongBench2Answer(response string) string {
	response = strings.ReplaceAll(strings.TrimSpace(response), "*", "")
	if g := lb2Paren.FindStringSubmatch(response); g != nil {
		return g[1]
	}
	if g := lb2Bare.FindStringSubmatch(response); g != nil {
		return g[1]
	}
	return ""
}

func scoreChoice(output, reference string) (Score, error) {
	if len(reference) != 1 || reference[0] < 'A' || reference[0] > 'D' {
		return Score{}, fmt.Errorf("%w: %s needs a reference letter A-D, got %q", ErrReference, MetricChoice, reference)
	}
	got := ExtractLongBench2Answer(output)
	if got == reference {
		return Score{Pass: true, Value: 1, Detail: "answer " + got}, nil
	}
	if got == "" {
		return Score{Detail: fmt.Sprintf("no answer letter, want %s", reference)}, nil
	}
	return Score{Detail: fmt.Sprintf("answer %s, want %s", got, reference)}, nil
}
