package train

import (
	"cmp"
	"math/rand/v2"
	"sort"

	"github.com/kvqlabs/kvq/datasets"
)

// minDocBytes is the smallest text budget the trainer asks the generator
// for: every task but stories and policies of numbered rules
// (Config.AllowRules) has examples that fit in 256 bytes, and the mixer
// draws another task when one does not fit (see maxDraws).
const minDocBytes = 256

// doc is one packed document: inputs [start, start+n) of the batch.
type doc struct{ start, n int }

// batch is one step's token stream: documents packed back to back with no
// padding. A document is BOS, the example's bytes and EOS; its inputs are
// all but the last token and its targets all but the first, and
// attention never crosses a document boundary (positions restart at 0).
type batch struct {
	ids     []int32   // input token per position
	targets []int32   // next token per position, -1 for none
	weights []float32 // loss weight per position
	pos     []int32   // position inside its document
	docs    []doc
	wsum    float64 // Σ weights
	bytes   int     // the step's longest allowed text, in bytes
}

func (b *batch) nt() int { return len(b.ids) }

// addDoc appends tokens (BOS ... EOS) as one document. weights[k] is the
// weight of predicting tokens[k+1]; nil means the document has no targets
// (inference).
func (b *batch) addDoc(tokens []int32, weights []float32) {
	n := len(tokens) - 1
	if weights == nil {
		n = len(tokens)
	}
	b.docs = append(b.docs, doc{start: len(b.ids), n: n})
	for k := 0; k < n; k++ {
		b.ids = append(b.ids, tokens[k])
		b.pos = append(b.pos, int32(k))
		if weights == nil {
			b.targets = append(b.targets, -1)
			b.weights = append(b.weights, 0)
			continue
		}
		b.targets = append(b.targets, tokens[k+1])
		b.weights = append(b.weights, weights[k])
		b.wsum += float64(weights[k])
	}
}

// exampleTokens turns an example into BOS, its bytes, EOS and the weight of
// each target: 1 for stories; promptW for a task's prompt bytes and
// answerW for its answer bytes and the EOS.
func exampleTokens(e datasets.Example, promptW, answerW float32) ([]int32, []float32) {
	text := e.Text()
	toks := make([]int32, 0, len(text)+2)
	toks = append(toks, BOS)
	for i := 0; i < len(text); i++ {
		toks = append(toks, int32(text[i]))
	}
	toks = append(toks, EOS)
	w := make([]float32, len(toks)-1)
	for k := range w { // target k is text byte k, or EOS when k == len(text)
		switch {
		case e.Task == datasets.TaskStory:
			w[k] = 1
		case k < len(e.Prompt):
			w[k] = promptW
		default:
			w[k] = answerW
		}
	}
	return toks, w
}

// seqBytes is the curriculum's longest document text at step s.
func (c *Config) seqBytes(s int) int {
	end := c.Context - 1
	if c.CurriculumSteps == 0 || s >= c.CurriculumSteps {
		return end
	}
	return c.CurriculumStart + (end-c.CurriculumStart)*s/c.CurriculumSteps
}

// stepSeed mixes the run's seed and a step number (SplitMix64), so that
// every step draws its data from its own generator: a resumed run sees
// the same data as an uninterrupted one without saving generator state.
func stepSeed(seed uint64, step int) uint64 {
	z := seed + 0x9e3779b97f4a7c15*uint64(step+1)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// makeBatch draws step s's documents until TokensPerStep inputs are
// filled: documents of up to seqBytes(s) bytes, and at the end shorter ones
// to use up the budget (down to minDocBytes).
func (c *Config) makeBatch(s int) *batch {
	seed := stepSeed(c.Seed, s)
	g := datasets.New(datasets.Train, seed)
	g.ListPolicy, g.AllowRules, g.UnlistedShare, g.OtherRule = c.ListPolicy, c.AllowRules, c.UnlistedShare, c.OtherRule
	g.NearMissShare, g.MissingKeyShare = c.NearMissShare, c.MissingKeyShare
	mix := newMixer(c.mixAt(s), seed)
	if mix != nil {
		mix.safetyTurns, mix.confusable = c.SafetyTurns, c.ConfusableCopy
		mix.safetyTopics = c.SafetyTopics
	}
	b := &batch{bytes: c.seqBytes(s)}
	for {
		// A document of k text bytes takes k+1 input positions.
		room := min(b.bytes, c.TokensPerStep-b.nt()-1)
		if room < minDocBytes {
			break
		}
		var e datasets.Example
		if mix == nil {
			e = g.Sample(room)
		} else if e = mix.sample(g, room); e.Task == "" {
			break // no task of this step's mix fits the room left
		}
		toks, w := exampleTokens(e, float32(c.PromptWeight), float32(c.AnswerWeight))
		b.addDoc(toks, w)
	}
	return b
}

// attnTask is one unit of attention work: a document and a KV head (with
// all the query heads that share it, so that its K/V gradients are
// summed inside one task).
type attnTask struct{ doc, kvHead int }

// attnTasks lists the batch's attention tasks, longest documents first
// so that the queue ends with small tasks. The order only affects load
// balance, not the results.
func (b *batch) attnTasks(kvHeads int) []attnTask {
	order := make([]int, len(b.docs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return b.docs[order[i]].n > b.docs[order[j]].n })
	var ts []attnTask
	for _, d := range order {
		for h := 0; h < kvHeads; h++ {
			ts = append(ts, attnTask{d, h})
		}
	}
	return ts
}

// mixer draws examples with chosen task frequencies. Its own generator
// (seeded from the step) picks the task and the lengths, with the rules of
// datasets.Generator.Sample.
type mixer struct {
	rng          *rand.Rand
	cum          [6]float64
	safetyTurns  int     // see Config.SafetyTurns
	safetyTopics int     // see Config.SafetyTopics
	confusable   float64 // see Config.ConfusableCopy
}

func newMixer(w [6]float64, seed uint64) *mixer {
	var m mixer
	var sum float64
	for i, v := range w {
		sum += v
		m.cum[i] = sum
	}
	if sum == 0 {
		return nil
	}
	m.rng = rand.New(rand.NewPCG(seed, 0x6d6978)) // "mix"
	return &m
}

// defaultSafetyTopics is the most topics a policy lists when
// Config.SafetyTopics is 0.
const defaultSafetyTopics = 9

// maxDraws bounds mixer.sample's draws: a mix whose tasks cannot fit the
// room left (an all-safety mix with numbered rules at a batch's tail) gets
// nothing instead of drawing forever. Mixes with a task that fits (every
// shipped one) find it within a few draws, so the bound never changes
// their data.
const maxDraws = 1000

// sample draws an example of a task of the mix, in proportion to the
// weights, that fits in maxBytes; the zero Example when maxDraws draws
// found none.
func (m *mixer) sample(g *datasets.Generator, maxBytes int) datasets.Example {
	r := m.rng
	for range maxDraws {
		room := max(64, maxBytes-200)
		x := r.Float64() * m.cum[5]
		task := 0
		for task < 5 && x >= m.cum[task] {
			task++
		}
		var e datasets.Example
		switch task {
		case 0:
			e = g.Story()
		case 1:
			e = g.Passkey(r.IntN(room), r.Float64())
		case 2:
			e = g.MultiKey(2 + r.IntN(max(1, min(40, room/20))))
		case 3:
			n := 3 + r.IntN(max(1, min(40, room/20)))
			if m.confusable > 0 && r.Float64() < m.confusable {
				e = g.CopyConfusable(n)
			} else {
				e = g.Copy(n)
			}
		case 4:
			e = g.JSONRecord()
		default:
			forbidden, topics, pad := r.IntN(2) == 0, 2+r.IntN(cmp.Or(m.safetyTopics, defaultSafetyTopics)-1), r.IntN(room)
			if m.safetyTurns > 1 {
				e = g.SafetyChat(forbidden, topics, pad, 1+r.IntN(m.safetyTurns))
			} else {
				e = g.Safety(forbidden, topics, pad)
			}
		}
		if len(e.Text()) <= maxBytes {
			return e
		}
	}
	return datasets.Example{}
}
