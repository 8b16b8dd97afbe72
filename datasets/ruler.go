package datasets

// RULER's synthetic tasks (Hsieh et al. 2024, github.com/NVIDIA/RULER,
// scripts/synthetic.yaml and scripts/data/synthetic/): needle-in-a-haystack
// variants, variable tracking, common and frequent word extraction. The
// templates, answer prefixes, needle formats, noise sentence, task
// parameters and generation budgets are RULER's; the code is kvq's, and so
// are the random streams (a RULER example and a kvq one never coincide),
// the word lists (RULER draws from the wonderwords package) and the essay
// haystack: RULER's is Paul Graham's essays, kvq's is prose of its own
// (RulerEssay). Each example is sized in tokens by the caller's counter,
// as RULER sizes with the model's tokenizer: the prompt plus the task's
// generation budget is at most the requested length, with as much
// haystack as fits.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// RULER task names (scripts/synthetic.yaml; qa_1 and qa_2 need SQuAD and
// HotpotQA and are not built in).
const (
	RulerNIAHSingle1    = "niah_single_1"
	RulerNIAHSingle2    = "niah_single_2"
	RulerNIAHSingle3    = "niah_single_3"
	RulerNIAHMultiKey1  = "niah_multikey_1"
	RulerNIAHMultiKey2  = "niah_multikey_2"
	RulerNIAHMultiKey3  = "niah_multikey_3"
	RulerNIAHMultiValue = "niah_multivalue"
	RulerNIAHMultiQuery = "niah_multiquery"
	RulerVT             = "vt"
	RulerCWE            = "cwe"
	RulerFWE            = "fwe"
)

// ErrRulerLength reports a length too short for a task's prompt without
// haystack plus its generation budget.
var ErrRulerLength = errors.New("datasets: RULER length too short")

// RulerTasks lists the built-in RULER tasks in RULER's order.
func RulerTasks() []string {
	return []string{RulerNIAHSingle1, RulerNIAHSingle2, RulerNIAHSingle3, RulerNIAHMultiKey1, RulerNIAHMultiKey2,
		RulerNIAHMultiKey3, RulerNIAHMultiValue, RulerNIAHMultiQuery, RulerVT, RulerCWE, RulerFWE}
}

// CheckRulerTask reports an error naming the RULER tasks when name is not
// one.
func CheckRulerTask(name string) error {
	if !slices.Contains(RulerTasks(), name) {
		return fmt.Errorf("unknown RULER task %q (have %s)", name, strings.Join(RulerTasks(), ", "))
	}
	return nil
}

// RULER's templates (scripts/data/synthetic/constants.py), each followed
// by its answer prefix, which ends the prompt. A niah example with one
// query and one value uses the singular forms RULER derives ("Some" → "A",
// "are all"/"are" → "is", "numbers" → "number").
const (
	rulerNIAHTemplate         = "Some special magic %[1]s are hidden within the following text. Make sure to memorize it. I will quiz you about the %[1]s afterwards.\n%[2]s\nWhat are all the special magic %[1]s for %[3]s mentioned in the provided text?"
	rulerNIAHPrefix           = " The special magic %[1]s for %[2]s mentioned in the provided text are"
	rulerNIAHTemplateSingular = "A special magic %[1]s is hidden within the following text. Make sure to memorize it. I will quiz you about the %[1]s afterwards.\n%[2]s\nWhat is the special magic %[1]s for %[3]s mentioned in the provided text?"
	rulerNIAHPrefixSingular   = " The special magic %[1]s for %[2]s mentioned in the provided text is"
	rulerNeedle               = "One of the special magic %s for %s is: %s."
	rulerVTTemplate           = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n%[1]s\nQuestion: Find all variables that are assigned the value %[2]s in the text above."
	rulerVTPrefix             = " Answer: According to the chain(s) of variable assignment in the text above, %[2]d variables are assigned the value %[1]s, they are: "
	rulerCWETemplate          = "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that appear most often.\n%s\nQuestion: What are the 10 most common words in the above list?"
	rulerCWEPrefix            = " Answer: The top 10 words that appear most often in the list are:"
	rulerFWETemplate          = "Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared coded words. %s\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently appeared words in the above coded text?"
	rulerFWEPrefix            = " Answer: According to the coded text above, the three most frequently appeared words are:"
	// RulerNoise is RULER's noise haystack sentence (also the passkey
	// filler of Landmark Attention).
	RulerNoise = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
)

// Needle types.
const (
	needleWords   = "words"
	needleNumbers = "numbers"
	needleUUIDs   = "uuids"
)

// Haystacks.
const (
	hayNoise  = "noise"
	hayEssay  = "essay"
	hayNeedle = "needle"
)

// niahSpec is one niah task's configuration (scripts/synthetic.yaml).
type niahSpec struct {
	hay          string
	typeK, typeV string
	numK, numV   int
	numQ         int
}

var niahSpecs = map[string]niahSpec{
	RulerNIAHSingle1:    {hayNoise, needleWords, needleNumbers, 1, 1, 1},
	RulerNIAHSingle2:    {hayEssay, needleWords, needleNumbers, 1, 1, 1},
	RulerNIAHSingle3:    {hayEssay, needleWords, needleUUIDs, 1, 1, 1},
	RulerNIAHMultiKey1:  {hayEssay, needleWords, needleNumbers, 4, 1, 1},
	RulerNIAHMultiKey2:  {hayNeedle, needleWords, needleNumbers, 1, 1, 1},
	RulerNIAHMultiKey3:  {hayNeedle, needleUUIDs, needleUUIDs, 1, 1, 1},
	RulerNIAHMultiValue: {hayEssay, needleWords, needleNumbers, 1, 4, 1},
	RulerNIAHMultiQuery: {hayEssay, needleWords, needleNumbers, 1, 1, 4},
}

// RulerGenTokens are RULER's generation budgets (tokens_to_generate) per
// task family; they count towards the length.
const (
	rulerNIAHGen = 128
	rulerVTGen   = 30
	rulerCWEGen  = 120
	rulerFWEGen  = 50
)

// Variable tracking: one chain of four hops (synthetic.yaml), a few-shot
// example of rulerVTExample tokens (at most a quarter of the length: RULER
// runs at 4K and more, where 500 tokens always fit).
const (
	rulerVTChains  = 1
	rulerVTHops    = 4
	rulerVTExample = 500
)

// Common words: 10 common words (RULER's num_cw) and their repeats.
const rulerCWECommon = 10

// Frequent words: Zipf's alpha, and the coded words' length.
const (
	rulerFWEAlpha   = 2.0
	rulerFWEWordLen = 6
)

// RulerExample is one RULER sample.
type RulerExample struct {
	Task string
	// Prompt is the input followed by the answer prefix.
	Prompt       string
	AnswerPrefix string
	// Outputs are the strings the answer must contain (string_match_all).
	Outputs []string
	// MaxTokens is RULER's generation budget for the task.
	MaxTokens int
	// Tokens is the prompt's count plus MaxTokens (RULER's "length"), at
	// most the length asked for.
	Tokens int
	// Haystack is the haystack's size in its units: essay words, noise or
	// needle lines, list words, coded words.
	Haystack int
}

// Ruler makes the example of task for a length of length tokens, drawn
// from seed: the prompt, counted by count, plus the task's generation
// budget is at most length, with the largest haystack that fits (RULER
// finds it by bisection, Ruler by interpolation). The same arguments give
// the same example. The error
// wraps ErrRulerLength when even the smallest haystack does not fit.
func Ruler(task string, length int, seed uint64, count func(string) int) (RulerExample, error) {
	if err := CheckRulerTask(task); err != nil {
		return RulerExample{}, err
	}
	build, gen, least, most := rulerBuilder(task, length, seed, count)
	fits := func(n int) (RulerExample, bool) {
		ex := build(n)
		ex.Task, ex.MaxTokens, ex.Haystack = task, gen, n
		ex.Tokens = count(ex.Prompt) + gen
		return ex, ex.Tokens <= length
	}
	best, ok := fits(least)
	if !ok {
		return RulerExample{}, fmt.Errorf("%w: %s needs %d tokens with its smallest haystack (%d of them the answer's budget), more than %d",
			ErrRulerLength, task, best.Tokens, gen, length)
	}
	// most units never fit. The search keeps lo (fits) and hi (does not)
	// with their counts, and guesses the boundary from the tokens per
	// unit (of a probe of 1/64 of the length at first), testing the guess
	// and its neighbour: near-linear counts end in a few rounds, so long
	// prompts are counted a few times rather than log2(length). A round
	// that does not halve the bracket makes the next one a bisection.
	lo, hi := least, most
	t0, tLo, tHi := best.Tokens, best.Tokens, 0 // tHi 0: not counted
	try := func(n int) bool {
		ex, ok := fits(n)
		if ok {
			lo, best, tLo = n, ex, ex.Tokens
		} else {
			hi, tHi = n, ex.Tokens
		}
		return ok
	}
	if p := lo + max(16, length/64); p < hi {
		try(p)
	}
	bisect := false
	for lo+1 < hi {
		width := hi - lo
		m := lo + width/2
		var rate float64
		switch {
		case bisect:
		case tHi > 0:
			rate = float64(tHi-tLo) / float64(hi-lo)
		case lo > least:
			rate = float64(tLo-t0) / float64(lo-least)
		}
		if rate > 0 {
			m = min(max(lo+int(float64(length-tLo)/rate), lo+1), hi-1)
		}
		if try(m) {
			if m+1 < hi {
				try(m + 1)
			}
		} else if m-1 > lo {
			try(m - 1)
		}
		bisect = hi-lo > width/2
	}
	return best, nil
}

// rulerBuilder returns task's example for a haystack of n units (each call
// draws from a fresh stream of seed, so sizes differ only in haystack),
// its generation budget, its smallest haystack and a haystack too large
// for length: every unit adds at least a token (a word, a line, a list
// entry), except fwe's, where n is the Zipf draw's nominal size and the
// text has at least (n·Σk⁻²/ζ(2) − vocab) ≥ 0.86n − vocab words.
func rulerBuilder(task string, length int, seed uint64, count func(string) int) (build func(n int) RulerExample, gen, least, most int) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(seed, 0x52554c4552)) }
	switch task {
	case RulerVT:
		// The few-shot example is fixed first, sized on its own.
		budget := min(rulerVTExample, length/4)
		icl := rulerVTShot(rand.New(rand.NewPCG(seed, 0x49434c)), budget, count)
		return func(n int) RulerExample {
			p, prefix, out := rulerVT(rng(), n, 5)
			return RulerExample{Prompt: icl + "\n" + p, AnswerPrefix: prefix, Outputs: out}
		}, rulerVTGen, rulerVTHops + 1, length + 1
	case RulerCWE:
		return func(n int) RulerExample { return rulerCWE(rng(), n, length) }, rulerCWEGen, rulerCWECommon, length + 1
	case RulerFWE:
		vocab := max(4, (length-rulerFWEGen)/50)
		return func(n int) RulerExample { return rulerFWE(rng(), n, vocab) }, rulerFWEGen, 15, 2 * (length + 1 + vocab)
	}
	s := niahSpecs[task]
	least = 0
	if s.hay != hayEssay {
		least = max(s.numK, s.numQ) * s.numV // noise and needle lines: one per needle at least
	}
	return func(n int) RulerExample { return s.build(rng(), n) }, rulerNIAHGen, least, length + 1
}

// rulerDepths are RULER's 40 needle depths: round(linspace(0, 100, 40)).
func rulerDepths() []int {
	d := make([]int, 40)
	for i := range d {
		d[i] = int(math.Round(float64(i) * 100 / 39))
	}
	return d
}

// sample draws k distinct values of [0, n) in draw order (Python's
// random.sample(range(n), k)); k <= n.
func sample(r *rand.Rand, n, k int) []int {
	return r.Perm(n)[:k]
}

func (s niahSpec) build(r *rand.Rand, n int) RulerExample {
	numK := max(s.numK, s.numQ)
	keys := make([]string, numK)
	values := make([][]string, numK)
	var needles []string
	for i := range keys {
		keys[i] = rulerValue(r, s.typeK)
		for range s.numV {
			v := rulerValue(r, s.typeV)
			values[i] = append(values[i], v)
			needles = append(needles, fmt.Sprintf(rulerNeedle, s.typeV, keys[i], v))
		}
	}
	r.Shuffle(len(needles), func(i, j int) { needles[i], needles[j] = needles[j], needles[i] })
	var context string
	if s.hay == hayEssay {
		sents := essaySentences(RulerEssay(n))
		depths := rulerDepths()
		var pos []int
		for _, d := range sample(r, len(depths), len(needles)) {
			pos = append(pos, len(sents)*depths[d]/100)
		}
		slices.Sort(pos)
		pos = append([]int{0}, append(pos, len(sents))...)
		var parts []string
		for i := 1; i < len(pos); i++ {
			parts = append(parts, strings.Join(sents[pos[i-1]:pos[i]], " "))
			if i-1 < len(needles) {
				parts = append(parts, needles[i-1])
			}
		}
		context = strings.Join(parts, " ")
	} else {
		lines := make([]string, n)
		for i := range lines {
			if s.hay == hayNoise {
				lines[i] = RulerNoise
			} else {
				lines[i] = fmt.Sprintf(rulerNeedle, s.typeV, rulerValue(r, s.typeK), rulerValue(r, s.typeV))
			}
		}
		idx := sample(r, n, len(needles))
		slices.Sort(idx)
		slices.Reverse(idx)
		for i, at := range idx {
			lines = slices.Insert(lines, at, needles[i])
		}
		context = strings.Join(lines, "\n")
	}
	var queries, answers []string
	for _, i := range sample(r, numK, s.numQ) {
		queries = append(queries, keys[i])
		answers = append(answers, values[i]...)
	}
	query := queries[0]
	if len(queries) > 1 {
		query = strings.Join(queries[:len(queries)-1], ", ") + ", and " + queries[len(queries)-1]
	}
	tmpl, pre, typ := rulerNIAHTemplate, rulerNIAHPrefix, s.typeV
	if s.numQ*s.numV == 1 {
		tmpl, pre, typ = rulerNIAHTemplateSingular, rulerNIAHPrefixSingular, strings.TrimSuffix(typ, "s")
	}
	prefix := fmt.Sprintf(pre, typ, query)
	return RulerExample{Prompt: fmt.Sprintf(tmpl, typ, context, query) + prefix, AnswerPrefix: prefix, Outputs: answers}
}

// rulerValue is a random needle key or value: an adjective-noun word pair,
// a 7-digit number or a version-4 UUID.
func rulerValue(r *rand.Rand, typ string) string {
	switch typ {
	case needleWords:
		return rulerAdjectives[r.IntN(len(rulerAdjectives))] + "-" + rulerNouns[r.IntN(len(rulerNouns))]
	case needleNumbers:
		return fmt.Sprint(1_000_000 + r.IntN(9_000_000))
	case needleUUIDs:
		hi, lo := r.Uint64(), r.Uint64()
		hi = hi&^0xf000 | 0x4000     // version 4
		lo = lo&^(0xc<<60) | 0x8<<60 // RFC 4122 variant
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", hi>>32, hi>>16&0xffff, hi&0xffff, lo>>48, lo&0xffffffffffff)
	}
	panic("datasets: unknown RULER needle type " + typ) // niahSpecs and this switch disagree
}

// rulerVT is a variable-tracking prompt over n noise lines with chain
// variables of letters uppercase letters: its text, answer prefix and the
// chain's variables.
func rulerVT(r *rand.Rand, n, letters int) (prompt, prefix string, vars []string) {
	seen := map[string]bool{}
	for len(vars) < rulerVTHops+1 {
		b := make([]byte, letters)
		for i := range b {
			b[i] = byte('A' + r.IntN(26))
		}
		if v := string(b); !seen[v] {
			seen[v] = true
			vars = append(vars, v)
		}
	}
	value := fmt.Sprint(10000 + r.IntN(89999))
	chain := []string{"VAR " + vars[0] + " = " + value}
	for j := 0; j < rulerVTHops; j++ {
		chain = append(chain, "VAR "+vars[j+1]+" = VAR "+vars[j]+" ")
	}
	lines := make([]string, n)
	for i := range lines {
		lines[i] = RulerNoise
	}
	pos := sample(r, n, len(chain))
	slices.Sort(pos)
	for j, p := range pos {
		lines = slices.Insert(lines, p+j, chain[j])
	}
	context := strings.ReplaceAll(strings.Join(lines, "\n"), ". \n", ".\n")
	prefix = fmt.Sprintf(rulerVTPrefix, value, rulerVTHops+1)
	return fmt.Sprintf(rulerVTTemplate, context, value) + prefix, prefix, vars
}

// rulerVTShot is variable tracking's few-shot example: a prompt with
// three-letter variables whose text fits budget tokens, followed by its
// answer and a newline, as RULER prepends it.
func rulerVTShot(r *rand.Rand, budget int, count func(string) int) string {
	state := r.Uint64()
	shot := func(n int) (string, []string) {
		p, _, vars := rulerVT(rand.New(rand.NewPCG(state, 1)), n, 3)
		return p, vars
	}
	n := rulerVTHops + 1
	for {
		if p, _ := shot(n + 1); count(p) > budget {
			break
		}
		n++
	}
	p, vars := shot(n)
	return p + " " + strings.Join(vars, " ") + "\n"
}

// rulerCWE is a common-words prompt whose list has n distinct words, after
// one few-shot example; below 4096 tokens RULER repeats the common words
// 6 times in the list and 3 in the example (30 and 10 from 4096 on), each
// uncommon word once (3 from 4096 on).
func rulerCWE(r *rand.Rand, n, length int) RulerExample {
	shotN, shotC, shotU, cRep, uRep := 20, 3, 1, 6, 1
	if length >= 4096 {
		shotN, shotC, shotU, cRep, uRep = 40, 10, 3, 30, 3
	}
	list := func(n, cr, ur int) (string, []string) {
		var pool []string
		if n <= len(rulerWords) {
			pool = rulerWords
		} else {
			pool = words(0x525557, 2*n, 2, 3)
		}
		ws := make([]string, 0, n)
		for _, i := range sample(r, len(pool), n) {
			ws = append(ws, pool[i])
		}
		common := ws[:min(rulerCWECommon, n)]
		var all []string
		for range cr {
			all = append(all, common...)
		}
		for range ur {
			all = append(all, ws[len(common):]...)
		}
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		return numbered(all), common
	}
	shotCtx, shotAns := list(shotN, shotC, shotU)
	ctx, ans := list(n, cRep, uRep)
	shot := fmt.Sprintf(rulerCWETemplate, shotCtx) + rulerCWEPrefix + " " + numbered(shotAns)
	return RulerExample{Prompt: shot + "\n" + fmt.Sprintf(rulerCWETemplate, ctx) + rulerCWEPrefix, AnswerPrefix: rulerCWEPrefix, Outputs: ans}
}

// numbered writes words as RULER's list: "1. a 2. b".
func numbered(ws []string) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d. %s", i+1, w)
	}
	return b.String()
}

// rulerFWE is a frequent-words prompt: n words drawn as Zipf's law with
// alpha 2 over vocab invented six-letter words (word k appears
// floor(n·k^-α/ζ(α)) times), the most frequent one replaced by "...",
// which the question says to ignore; the answer is the next three.
func rulerFWE(r *rand.Rand, n, vocab int) RulerExample {
	seen := map[string]bool{}
	var vs []string
	for len(vs) < vocab {
		b := make([]byte, rulerFWEWordLen)
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			vs = append(vs, w)
		}
	}
	slices.Sort(vs)
	r.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
	vs[0] = "..."
	zeta := math.Pi * math.Pi / 6 // ζ(2)
	var text []string
	for k, w := range vs {
		c := int(float64(n) * math.Pow(float64(k+1), -rulerFWEAlpha) / zeta)
		for range c {
			text = append(text, w)
		}
	}
	r.Shuffle(len(text), func(i, j int) { text[i], text[j] = text[j], text[i] })
	return RulerExample{Prompt: fmt.Sprintf(rulerFWETemplate, strings.Join(text, " ")) + rulerFWEPrefix, AnswerPrefix: rulerFWEPrefix,
		Outputs: slices.Clone(vs[1:4])}
}
