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
	// means 9 (defaultSafetyTopics). The fourth stage uses 12, so that the
	// model sees policies as long as the eval suites' (4 to 11 topics).
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
	// without a rule. The recipe uses 0.25 from the base run on (taught
	// only in a fine-tune, it cost refusals), 0.6 in the third stage and
	// 0.75 in the fourth.
	UnlistedShare float64 `json:",omitempty"`

	// OtherRule sets datasets.Generator.OtherRule (with AllowRules): the
	// policy ends with a numbered default rule for other topics, which
	// the answer about an unlisted topic restates. Not in the recipe: it
	// did worse than without it.
	OtherRule bool `json:",omitempty"`

	// NearMissShare sets datasets.Generator.NearMissShare (with
	// UnlistedShare): the share of requests about a topic without a rule
	// that ask about a near namesake of a listed topic. Not in the recipe:
	// an experiment, which showed look-alikes are not why unlisted topics
	// get refused.
	NearMissShare float64 `json:",omitempty"`

	// MissingKeyShare sets datasets.Generator.MissingKeyShare: the share
	// of multi-key examples that ask for a key not listed ("none"). The
	// recipe uses 0.5 in its third stage and 0.35 in its fourth (0
	// before): questions about missing keys help the policy notice a
	// missing rule, at some cost to multi-key lookups.
	MissingKeyShare float64 `json:",omitempty"`

	// ConfusableCopy is the fraction of copy examples drawn with
	// datasets.Generator.CopyConfusable (words that share long runs of
	// bytes) instead of Copy; it applies when TaskMix is set. 0 in the base
	// run, 0.5 from the second stage on.
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

// DefaultConfig returns the full kvq-probe model and the first stage of its
// recipe, the base run: 2,600 steps of 8K tokens (21.3M tokens), about 60
// minutes on 2 cores, checkpointed every 50 steps. docs/probe-model.md has
// the timings and the experiments behind its choices.
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
		// for millions of tokens.
		Beta1: 0.9, Beta2: 0.95, AdamEps: 1e-8, Clip: 1, InitStd: 0.06, Seed: 1,
		CurriculumStart: 256, CurriculumSteps: 1300,
		TaskMix: retrieval,
		// Steps 500-1899 draw mostly copying, lookups and the policy task,
		// all of which need induction (matching earlier bytes and reading
		// what followed); with the phase later, copying formed too late for
		// lookups and the policy to build on it.
		MixPhases: []MixPhase{
			{From: 500, Mix: [6]float64{0.5, 1.5, 3, 3, 0.5, 2}},
			{From: 1900, Mix: retrieval},
		},
		PromptWeight: 1, AnswerWeight: 4,
		// The policy in the eval suites' format from the start: numbered
		// rules, allowed and forbidden (AllowRules), a quarter of the benign
		// requests about a topic without a rule (UnlistedShare), up to 3
		// requests per conversation.
		AllowRules: true, UnlistedShare: 0.25, SafetyTurns: 3,
		CheckpointEvery: 50,
	}
}

// FinetuneConfig is the second stage of the probe recipe (make probe-model
// runs all four): from the weights of a DefaultConfig run in dir, 800 steps
// at full document length with their own data seed, a short warm-up and a
// peak learning rate 6× lower than the base run's, on a mix weighted
// towards copying, multi-key lookups and the policy (story, passkey and
// JSON 1; multi-key and copy 3, safety 4). Half the copy examples are
// datasets.Generator.CopyConfusable's, whose words share long runs of
// bytes: the base run's copy errors jumped to an earlier word sharing a few
// bytes. ThirdStageConfig continues from its export.
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

// ThirdStageConfig is the third stage of the probe recipe: from the
// weights FinetuneConfig's run exported to dir (its model directory), 300
// steps with their own data seed at a peak learning rate 2.5× lower than
// the second stage's, on its mix with the policy weighted 6 instead of 4,
// 60% of the benign policy requests about a topic without a rule instead
// of 25%, and half the multi-key examples asking for a key not listed
// (answer "none"): it teaches what the lists do not state.
// FourthStageConfig continues from its export.
func ThirdStageConfig(dir string) Config {
	c := FinetuneConfig(dir)
	c.Seed = 5
	c.Steps, c.Warmup = 300, 10
	c.LR, c.MinLR = 2e-4, 2e-5
	c.TaskMix[5] = 6
	c.UnlistedShare, c.MissingKeyShare = 0.6, 0.5
	return c
}

// FourthStageConfig is the last stage of the probe recipe: from the
// weights ThirdStageConfig's run exported to dir, 200 more steps with their
// own data seed, the third stage's mix and learning rate, 75% of the benign
// policy requests about a topic without a rule instead of 60%, multi-key
// questions about a missing key at 35% instead of 50% (they cost lookups),
// and policies of up to 12 forbidden topics (the eval suites list 4 to 11;
// earlier stages trained 2 to 9).
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
