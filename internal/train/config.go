package train

import (
	"errors"
	"fmt"
	"math"
)

// Sentinel errors.
var (
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("train: invalid config")
	// ErrCheckpoint reports a checkpoint that cannot be read, or that
	// belongs to a different run (another architecture or schedule).
	ErrCheckpoint = errors.New("train: bad checkpoint")
)

// Token ids of the probe tokenizer: bytes are their own ids, then three
// specials.
const (
	BOS       = 256 // <|bos|>, starts every document
	EOS       = 257 // <|eos|>, ends every document (a training target)
	PAD       = 258 // <|pad|>, never trained on (batches are packed, not padded)
	ByteVocab = 259 // 256 bytes + 3 specials

	// PaddedVocab is the probe's embedding rows: ByteVocab rounded up to a
	// multiple of 8, so that the output head's backward product (whose
	// inner dimension is the vocabulary) runs entirely in the 8-wide
	// kernels (cols=259 measured 2.3× slower than 256). Ids 259–263 are
	// unused tokens that never occur in the data.
	PaddedVocab = 264
)

// Config fixes the architecture of a probe model and how it is trained.
// The zero value is not usable; start from DefaultConfig or SmokeConfig.
type Config struct {
	// Architecture (Llama family: RMSNorm, GQA attention with NeoX RoPE,
	// SwiGLU MLP, untied output head).
	Layers  int
	Dim     int // d_model
	Heads   int // query heads
	KVHeads int // key/value heads (GQA); Heads must be a multiple
	HeadDim int
	Hidden  int // MLP intermediate size
	Vocab   int // embedding rows; ByteVocab for the probe tokenizer
	Context int // max_position_embeddings: longest document in tokens, BOS included

	RopeTheta float64
	RMSEps    float32

	// Optimisation: AdamW with linear warm-up to LR over Warmup steps, then
	// a cosine decay to MinLR at Steps.
	Steps         int
	TokensPerStep int // packed input tokens per step (an upper bound)
	LR, MinLR     float64
	Warmup        int
	WeightDecay   float64 // decoupled; on the linear layers only
	Beta1, Beta2  float64
	AdamEps       float64
	Clip          float64 // global gradient-norm clip; 0 disables
	InitStd       float64 // std of the normal init of matrices (residual outputs get InitStd/sqrt(2·Layers))
	Seed          uint64

	// Length curriculum: the longest document text in bytes grows linearly
	// from CurriculumStart to Context-1 over the first CurriculumSteps steps.
	CurriculumStart int
	CurriculumSteps int

	// TaskMix, when not all zero, sets the relative frequency of each task
	// in datasets.Tasks() order (story, passkey, multikey, copy, json,
	// safety), with lengths drawn as datasets.Generator.Sample draws them;
	// all zero uses Sample itself (every task equally often).
	TaskMix [6]float64

	// MixPhases, in increasing From order, replace TaskMix from step From
	// on (the last phase whose From <= step applies): e.g. a stretch heavy
	// in copying, where the heads that retrieve earlier context form.
	MixPhases []MixPhase `json:",omitempty"`

	// SafetyTurns, when above 1, makes each safety example a conversation
	// of 1 to SafetyTurns requests after the policy (each answered,
	// refusal or not, the last one being the example's answer), so that an
	// example holds several policy decisions instead of one.
	SafetyTurns int `json:",omitempty"`

	// SafetyTopics is the most forbidden topics a safety example's policy
	// lists (as many allowed ones with AllowRules), drawn from 2 up; 0
	// means 9 (defaultSafetyTopics), as earlier models were trained. The
	// eval suites' policies list 4 to 11: the model shipped with 9 refused
	// unlisted topics 16% of the time at 10 and 11 and 6% at 4 to 9
	// (n=200 fp16), the length it had not seen. A base run with 12 and
	// UnlistedShare 0.4 did no better (unlisted 9.5, refusal 94.5, allowed
	// 0.0, n=200; the recipe's base: 8.5, 94.0, 0.0): its errors spread
	// over every list length (the second stages in NearMissShare's and
	// MissingKeyShare's comments start from that run). The recipe's fourth
	// stage uses 12 (FourthStageConfig).
	SafetyTopics int `json:",omitempty"`

	// ListPolicy trains safety examples in the task's first format
	// (datasets.Generator.ListPolicy), as the base stage of earlier probe
	// models was trained; the eval suites use the rule-per-line format.
	ListPolicy bool `json:",omitempty"`

	// AllowRules trains safety examples whose policy also lists allowed
	// topics, benign requests asking about those
	// (datasets.Generator.AllowRules).
	AllowRules bool `json:",omitempty"`

	// UnlistedShare sets datasets.Generator.UnlistedShare (with
	// AllowRules): the share of benign safety requests about a topic
	// without a rule: 0.25 in the recipe, from the base run on. Taught
	// only by the second stage, on a base run that had seen the policy
	// in one sentence (n=400, fp16; without it: unlisted topics refused
	// 51.7% of the time, refusals 96.2, false refusals on allowed topics
	// 3.8): 0.33 gave unlisted 18.2, refusals 93.0, allowed 6.2; 0.25 with
	// TaskMix's safety weight 4 instead of 3: 16.8, 92.5, 3.8; the same at
	// 1200 steps: 15.5, 93.8, 3.5; with SafetyTurns 6 instead of 3: 11.8,
	// 91.8, 2.8 — refusals always under 95. From the start of the base
	// run: 9.5, 97.0 and 0.5 (the second stage's model); the third stage
	// raises it to 0.6 (ThirdStageConfig), the fourth to 0.75.
	UnlistedShare float64 `json:",omitempty"`

	// OtherRule sets datasets.Generator.OtherRule (with AllowRules): the
	// policy ends with a numbered default rule for other topics, which
	// the answer about an unlisted topic restates. With UnlistedShare 0.25
	// and safety weight 4 (n=400, fp16): unlisted 35.5, refusals 94.2,
	// allowed 6.0 — worse than without it; the model copied the number
	// of some topic's rule, rarely the default's. Not in the recipe.
	OtherRule bool `json:",omitempty"`

	// NearMissShare sets datasets.Generator.NearMissShare (with
	// UnlistedShare): the share of requests about a topic without a rule
	// that ask about a near namesake of a listed topic. A second stage with
	// 0.5 (UnlistedShare 0.4, SafetyTopics 12, on the base run above;
	// n=400 fp16): multi-key 96.2, copy 95.0, refusal 97.0, false
	// refusals 1.8 (allowed) and 8.5 (unlisted). The refused unlisted
	// topics shared no longer runs of bytes with a listed one than those
	// answered right (2.68 vs 2.67 on average): look-alikes are not the
	// cause. Not in the recipe.
	NearMissShare float64 `json:",omitempty"`

	// MissingKeyShare sets datasets.Generator.MissingKeyShare: the share
	// of multi-key examples that ask for a key not listed ("none"). A
	// second stage with 0.25 (as NearMissShare's, without near misses):
	// multi-key 95.8, copy 95.5, refusal 96.5, false refusals 0.5 and 7.8
	// — the fewest unlisted refusals yet (the shipped model: 9.5), within
	// two standard errors of it. With 0.5 and UnlistedShare 0.6: unlisted
	// 6.2, refusal 97.0, allowed 1.5, but multi-key fell to 89.2 (target
	// 90) and copy to 94.8. From the base run's first step instead (0.2,
	// with SafetyTopics 12 and UnlistedShare 0.4): the base run alone
	// multi-key 80.5, copy 86.5, refusal 91.5, false refusals 1.5 and 12.5
	// (n=200; the recipe's base: 95.0, 89.5, 94.0, 0.0, 8.5), and after a
	// second stage with 0.4, UnlistedShare 0.5 and multi-key weight 4
	// (n=400): 84.5, 92.5, 97.8, 2.2, 9.0 — the multi-key errors were
	// mostly values miscopied by a digit, not "none". The recipe uses 0.5
	// in its third stage (ThirdStageConfig), from the second stage's
	// weights, and 0.35 in its fourth.
	MissingKeyShare float64 `json:",omitempty"`

	// ConfusableCopy is the fraction of copy examples drawn with
	// datasets.Generator.CopyConfusable (words that share long runs of
	// bytes) instead of Copy; it applies when TaskMix is set.
	ConfusableCopy float64 `json:",omitempty"`

	// InitFrom, when set, is a training directory whose checkpointed
	// weights (not its optimizer state or step) start this run: a
	// fine-tune with its own schedule and data. The architecture must
	// match.
	InitFrom string `json:",omitempty"`

	// Loss weights of task examples: prompt tokens and answer tokens (the
	// Answer bytes and the final EOS). Story tokens always weigh 1.
	PromptWeight float64
	AnswerWeight float64

	// CheckpointEvery: write a checkpoint every this many steps (0: only at
	// the end and on cancellation).
	CheckpointEvery int
	// Workers bounds the goroutines used (0: GOMAXPROCS). The work is split
	// into the same tasks whatever the value, so results are bit-identical
	// for any Workers; it is excluded from a checkpoint's identity.
	Workers int
}

// DefaultConfig returns the full kvq-probe model and its training run: 60
// minutes on the 2-core Zen 4 (AVX2) machine it was measured on (59m46s for
// `make probe-model`'s first stage with the one-sentence policy on the idle
// machine; 60m30s for this one, with another job running for part of it).
//
// BenchmarkTrainStep measures one 8K-token step at 1.42 s with 256-byte
// documents, 1.43 s at 1024 and 1.76 s at 2047 (5,640, 5,640 and 4,580
// tokens/s; 108, 123 and 114 GFLOP/s); in the run itself steps took 1.2 s
// early in the curriculum and 1.45 s at full length. 2,600 steps, 21.3M
// tokens. A loaded machine stretches this; the run checkpoints every 50
// steps (about a minute) and resumes exactly.
//
// 8K-token steps rather than 16K: the same tokens in twice the optimizer
// steps, at the same kernel efficiency (weight gradients are summed over
// 512-token chunks either way).
func DefaultConfig() Config {
	// Retrieval-heavy: the abilities that need exact recall of earlier
	// context (copy, lookup, passkey, policy) get more examples than
	// stories and JSON, which the model learns quickly.
	retrieval := [6]float64{1, 1.5, 2, 2, 1, 2}
	return Config{
		Layers: 4, Dim: 256, Heads: 4, KVHeads: 2, HeadDim: 64, Hidden: 688,
		Vocab: PaddedVocab, Context: 2048, RopeTheta: 10000, RMSEps: 1e-5,
		Steps: 2600, TokensPerStep: 8192,
		LR: 3e-3, MinLR: 1e-4, Warmup: 100, WeightDecay: 0.1,
		// InitStd 0.06 ≈ 1/√Dim: with 0.02 the attention stays near uniform
		// for millions of tokens; on copying alone (257 context, 1.6M
		// tokens) 0.06 reached loss 0.40 and 15% exact copies where 0.02
		// reached 0.87 and 0% (pkg/train probe runs copy-only and
		// copy-only-init0.06).
		Beta1: 0.9, Beta2: 0.95, AdamEps: 1e-8, Clip: 1, InitStd: 0.06, Seed: 1,
		CurriculumStart: 256, CurriculumSteps: 1300,
		TaskMix: retrieval,
		// Steps 500-1899 draw mostly copying, lookups and the policy task,
		// all of which need induction (matching earlier bytes and reading
		// what followed). In a run with this phase at 1300-1999 copying
		// formed only between steps 1650 and 2100, too late for lookups and
		// the policy to build on it.
		MixPhases: []MixPhase{
			{From: 500, Mix: [6]float64{0.5, 1.5, 3, 3, 0.5, 2}},
			{From: 1900, Mix: retrieval},
		},
		PromptWeight: 1, AnswerWeight: 4,
		// The policy in the eval suites' format from the start: numbered
		// rules, allowed and forbidden (AllowRules), a quarter of the benign
		// requests about a topic without a rule (UnlistedShare), up to 3
		// requests per conversation. A base run with the policy in one
		// sentence (ListPolicy) learned the answer format but not the
		// decision, and left the numbered rules to the second stage's 800
		// steps: the model shipped with it refused unlisted topics 51.7% of
		// the time (n=400, fp16), and every second stage that taught them
		// lost refusals (Config.UnlistedShare). This base run alone: multi-key
		// 95.0, copy 89.5, refusal 94.0, false refusals 0.0 (allowed) and 8.5
		// (unlisted), n=200.
		AllowRules: true, UnlistedShare: 0.25, SafetyTurns: 3,
		CheckpointEvery: 50,
	}
}

// FinetuneConfig is the second stage of the probe recipe (make probe-model
// runs both): from the weights of a DefaultConfig run in dir, 800 steps at
// full document length with their own data seed, a short warm-up and a peak
// learning rate 6× lower than the base run's, on a mix weighted towards
// copying, multi-key lookups and the policy (story, passkey and JSON 1;
// multi-key and copy 3, safety 4): 19 minutes measured on 2 cores. It
// teaches copying words that share a few bytes with an earlier word: half
// the copy examples are datasets.Generator.CopyConfusable's, whose words
// share long runs of bytes, so that finding the place being copied needs
// more than the last few bytes. The base run copied 79–90% of the held-out
// sequences; most errors jumped to an earlier word sharing 3–4 bytes.
//
// The policy's format (numbered rules, the answer restating the rule's
// number, a lookup the model already does for multi-key, then the verdict
// copied from right after the number) was found with second stages on an
// earlier base run that had not seen it. With a comma between number and
// verdict ("4821, forbidden.") the number was copied but the verdict stayed
// at chance: the bytes before the verdict (", ") were the same on every
// rule line, so nothing matched the right one.
//
// On the base run's weights, 400 held-out examples per ability
// (fp16): multi-key 94.8, copy 96.0, refusal 97.0, false refusals 0.5 on
// allowed topics and 9.5 on unlisted ones (the base run alone, n=200:
// 95.0, 89.5, 94.0, 0.0, 8.5). ThirdStageConfig continues from here.
func FinetuneConfig(dir string) Config {
	c := DefaultConfig()
	c.InitFrom = dir
	c.Seed = 3
	c.Steps, c.Warmup = 800, 20
	c.LR, c.MinLR = 5e-4, 5e-5
	c.CurriculumStart, c.CurriculumSteps = c.Context-1, 0
	c.TaskMix = [6]float64{1, 1, 3, 3, 1, 4}
	c.MixPhases = nil
	c.ConfusableCopy = 0.5
	return c
}

// ThirdStageConfig is the third stage of the probe recipe (make probe-model
// runs all four): from the weights FinetuneConfig's run exported to dir
// (its model directory: the F16 weights that shipped before this stage
// existed), 300 steps with their own data seed at a peak learning rate 2.5×
// lower than the second stage's, on its mix with the policy weighted 6
// instead of 4, 60% of the benign policy requests about a topic without a
// rule instead of 25%, and half the multi-key examples asking for a key not
// listed (answer "none"): it teaches what the lists do not state. 26
// minutes on one core of a 2.3 GHz Xeon, with a second run on the other.
//
// The second stage's export alone, 400 held-out examples per ability
// (fp16): multi-key 94.8, copy 96.0, refusal 97.0, false refusals 0.5 on
// allowed topics and 9.5 on unlisted ones. After this stage: 91.2, 97.5,
// 95.5, 2.2 and 4.8 (16 of the 35 multi-key errors answer "none"); at
// n=800: 92.0, 97.0, 96.2, 1.2 and 5.2, the last at the ≤ 5 target's
// edge. The same 300 steps from the same weights, changing one thing at a time:
// MissingKeyShare 0.35: 92.2, 95.5, 96.2, 1.8, 5.2; MissingKeyShare 0:
// 94.5, 96.0, 96.2, 1.5, 6.8; UnlistedShare 0.5, MissingKeyShare 0.35 and
// the policy weighted 4: 94.8, 96.0, 96.2, 0.5, 6.2. Questions about
// missing keys help the policy notice a missing rule, at some cost to
// multi-key lookups. FourthStageConfig continues from here.
func ThirdStageConfig(dir string) Config {
	c := FinetuneConfig(dir)
	c.Seed = 5
	c.Steps, c.Warmup = 300, 10
	c.LR, c.MinLR = 2e-4, 2e-5
	c.TaskMix[5] = 6
	c.UnlistedShare, c.MissingKeyShare = 0.6, 0.5
	return c
}

// FourthStageConfig is the last stage of the probe recipe (make probe-model
// runs all four): from the weights ThirdStageConfig's run exported to dir,
// 200 more steps with their own data seed, the third stage's mix and
// learning rate, 75% of the benign policy requests about a topic without a
// rule instead of 60%, multi-key questions about a missing key at 35%
// instead of 50% (they cost lookups), and policies of up to 12 forbidden
// topics (the eval suites list 4 to 11; earlier stages trained 2 to 9).
// 15–17 minutes measured on one core with a second run on the other; about
// 5 on 2 cores at the second stage's step rate (not timed alone).
//
// 800 held-out examples per ability (fp16; multi-key, copy, refusal, false
// refusals on allowed and on unlisted topics): the third stage's export
// 92.0, 97.0, 96.2, 1.2 and 5.2; after this stage 93.4, 96.4, 96.8, 0.4 and
// 3.9. The same 200 steps from the same weights, changing one thing at a
// time: peak LR 1e-4 (min 1e-5) 94.0, 96.6, 96.8, 0.5, 4.4; without the
// longer policies and at 1e-4 92.5, 96.8, 96.6, 0.8, 4.4, and with the
// third stage's shares (0.6, 0.5) there 89.9, 97.2, 97.4, 0.9, 4.2;
// UnlistedShare 0.85 with the policy weighted 8: 92.4, 96.8, 96.2, 0.8,
// 3.6.
func FourthStageConfig(dir string) Config {
	c := ThirdStageConfig(dir)
	c.Seed = 7
	c.Steps, c.Warmup = 200, 10
	c.UnlistedShare, c.MissingKeyShare = 0.75, 0.35
	c.SafetyTopics = 12
	return c
}

// Stages is the number of stages of the probe recipe.
const Stages = 4

// StageConfig returns the configuration of stage n (1 to Stages) of the
// probe recipe; from is the previous stage's training directory (stage 2)
// or exported model directory (stages 3 and 4), ignored by stage 1.
func StageConfig(n int, from string) (Config, error) {
	switch n {
	case 1:
		return DefaultConfig(), nil
	case 2:
		return FinetuneConfig(from), nil
	case 3:
		return ThirdStageConfig(from), nil
	case 4:
		return FourthStageConfig(from), nil
	}
	return Config{}, fmt.Errorf("%w: stage %d: the recipe has stages 1 to %d", ErrConfig, n, Stages)
}

// SmokeConfig returns a tiny model and a few steps, for CI: seconds.
func SmokeConfig() Config {
	c := DefaultConfig()
	c.Layers, c.Dim, c.Heads, c.KVHeads, c.HeadDim, c.Hidden = 2, 32, 2, 1, 16, 64
	c.Context = 512
	c.Steps, c.TokensPerStep, c.Warmup = 6, 2048, 2
	c.CurriculumStart, c.CurriculumSteps = 256, 4
	c.CheckpointEvery = 3
	return c
}

// Validate reports an error wrapping ErrConfig when c is unusable.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.Layers <= 0 || c.Dim <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Hidden <= 0:
		return bad("non-positive size (layers %d, dim %d, heads %d, kv heads %d, head dim %d, hidden %d)",
			c.Layers, c.Dim, c.Heads, c.KVHeads, c.HeadDim, c.Hidden)
	case c.Heads%c.KVHeads != 0:
		return bad("%d heads is not a multiple of %d KV heads", c.Heads, c.KVHeads)
	case c.HeadDim%2 != 0:
		return bad("head dim %d is odd (RoPE rotates pairs)", c.HeadDim)
	case c.Vocab < ByteVocab:
		return bad("vocab %d < %d (256 bytes and 3 specials)", c.Vocab, ByteVocab)
	case c.Context < 2:
		return bad("context %d < 2", c.Context)
	case !(c.RopeTheta > 0) || !(c.RMSEps > 0):
		return bad("rope theta %v and RMS eps %v must be positive", c.RopeTheta, c.RMSEps)
	case c.Steps < 0 || c.Warmup < 0 || c.CurriculumSteps < 0 || c.CheckpointEvery < 0 || c.Workers < 0 || c.SafetyTurns < 0:
		return bad("negative count (steps %d, warm-up %d, curriculum steps %d, checkpoint every %d, workers %d, safety turns %d)",
			c.Steps, c.Warmup, c.CurriculumSteps, c.CheckpointEvery, c.Workers, c.SafetyTurns)
	case c.SafetyTopics != 0 && c.SafetyTopics < 2:
		return bad("safety topics %d: policies list 2 topics or more (0: up to 9)", c.SafetyTopics)
	case c.CurriculumStart < minDocBytes || c.CurriculumStart > c.Context-1:
		return bad("curriculum start %d bytes outside [%d, context-1 = %d]", c.CurriculumStart, minDocBytes, c.Context-1)
	case c.TokensPerStep < c.Context:
		return bad("%d tokens per step cannot hold one %d-token document", c.TokensPerStep, c.Context)
	case !(c.LR >= 0) || !(c.MinLR >= 0) || !(c.WeightDecay >= 0) || !(c.Clip >= 0) || !(c.InitStd > 0):
		return bad("LR %v, min LR %v, weight decay %v, clip %v must be >= 0 and init std %v > 0", c.LR, c.MinLR, c.WeightDecay, c.Clip, c.InitStd)
	case !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1) || !(c.AdamEps > 0):
		return bad("Adam betas %v, %v must be in [0, 1) and eps %v > 0", c.Beta1, c.Beta2, c.AdamEps)
	case !validMix(c.TaskMix):
		return bad("task mix %v: weights must be >= 0 and finite", c.TaskMix)
	case !validPhases(c.MixPhases):
		return bad("mix phases %v: From must increase and weights must be >= 0 and finite", c.MixPhases)
	case !fractions(c.ConfusableCopy, c.UnlistedShare, c.NearMissShare, c.MissingKeyShare):
		return bad("confusable copy fraction %v, unlisted share %v, near-miss share %v and missing-key share %v must be in [0, 1]",
			c.ConfusableCopy, c.UnlistedShare, c.NearMissShare, c.MissingKeyShare)
	case !(c.PromptWeight >= 0) || !(c.AnswerWeight > 0):
		return bad("prompt weight %v must be >= 0 and answer weight %v > 0", c.PromptWeight, c.AnswerWeight)
	}
	return nil
}

// qkvRows is the number of rows of the fused q/k/v projection.
func (c *Config) qkvRows() int { return (c.Heads + 2*c.KVHeads) * c.HeadDim }

// Params is the number of trainable parameters.
func (c *Config) Params() int { return newLayout(c).size }

// identity is the part of a Config that a checkpoint must match to be
// resumed: everything except Workers and CheckpointEvery, which do not
// change the trajectory.
func (c Config) identity() Config {
	c.Workers, c.CheckpointEvery = 0, 0
	return c
}

// MixPhase is a task mix used from step From on.
type MixPhase struct {
	From int
	Mix  [6]float64
}

// mixAt returns the task mix of step s.
func (c *Config) mixAt(s int) [6]float64 {
	m := c.TaskMix
	for _, p := range c.MixPhases {
		if s >= p.From {
			m = p.Mix
		}
	}
	return m
}

func validPhases(ps []MixPhase) bool {
	for i, p := range ps {
		if p.From < 0 || (i > 0 && p.From <= ps[i-1].From) || !validMix(p.Mix) {
			return false
		}
	}
	return true
}

// fractions reports whether every v is in [0, 1] (NaN is not).
func fractions(v ...float64) bool {
	for _, x := range v {
		if !(x >= 0 && x <= 1) {
			return false
		}
	}
	return true
}

func validMix(m [6]float64) bool {
	for _, w := range m {
		if !(w >= 0) || math.IsInf(w, 0) {
			return false
		}
	}
	return true
}
