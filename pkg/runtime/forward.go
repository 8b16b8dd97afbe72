package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/cpu"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
	"github.com/kvqlabs/kvq/pkg/tensor"
)

// Input errors of a forward step: a server maps errors.Is(err, ErrInput) to
// HTTP 400. An unknown sequence is also kvcache.ErrNoSequence; a full cache
// is a *kvcache.FullError (kvcache.ErrFull), not an input error.
var (
	ErrInput      = errors.New("runtime: bad input")
	ErrEmptyBatch = fmt.Errorf("%w: empty batch", ErrInput)
	ErrBatch      = fmt.Errorf("%w: malformed batch", ErrInput)
	ErrTokenID    = fmt.Errorf("%w: token id out of range", ErrInput)
	ErrContext    = fmt.Errorf("%w: past the model's context", ErrInput)
	// ErrEmptyPrompt: Generate needs at least one prompt token. An empty
	// text encodes to none with a tokenizer that adds no BOS token.
	ErrEmptyPrompt = fmt.Errorf("%w: empty prompt (no tokens)", ErrInput)
)

// MaxPositions bounds a sequence whose model states no context length:
// positions are int32 on every backend.
const MaxPositions = math.MaxInt32

// MaxSeqLen is the longest sequence the model runs: its context length, or
// MaxPositions when the checkpoint states none.
func (m *Model) MaxSeqLen() int {
	if m.ContextLen > 0 {
		return m.ContextLen
	}
	return MaxPositions
}

// Logits selects which positions of an entry return logits.
type Logits int

// Logit selections.
const (
	LastLogits Logits = iota // the entry's last token
	AllLogits                // every token of the entry
	NoLogits                 // none (prefill only)
)

// Entry is one sequence's share of a batch: tokens appended at the end of
// sequence Seq of Cache. Entries of one batch may belong to different
// caches (an fp16 baseline and candidate formats, side by side): the dense
// layers then run over all of them at once, reading the weights once.
type Entry struct {
	Cache  *kvcache.Cache
	Seq    kvcache.SeqID
	Tokens []int
	Logits Logits
	// Exact makes the entry's tokens attend to each other's exact keys and
	// values instead of the cache's encoding of them (Hugging Face
	// QuantizedCache's prefill); earlier positions are read as cached.
	Exact bool
}

// LogitsFunc receives the logits the entries asked for: row i of entry e
// (i = 0 for LastLogits, the token's index in the entry for AllLogits),
// Vocab values. Rows come in order of i, then of e: entries over the same
// tokens (a baseline cache and candidates) deliver their rows for one
// position one after another. The slice belongs to the runner and is valid
// only during the call: copy or reduce it there.
type LogitsFunc func(e, i int, logits []float32) error

// KVObserver receives the keys and values of every token a forward step
// writes (calibration records them).
type KVObserver interface {
	ObserveKV(o *KVObservation)
}

// KVObservation is one entry's keys and values in one layer. The slices
// belong to the runner and are valid only during the call.
type KVObservation struct {
	Layer int
	Cache *kvcache.Cache
	Seq   kvcache.SeqID
	// Pos is the position of the first of N tokens.
	Pos, N int
	// KPre holds the keys before RoPE, K after, V the values: N rows of
	// KVHeads·HeadDim values each.
	KPre, K, V []float32
}

// Runner evaluates a model on a backend. It holds the uploaded weights and
// the step's activations and is not safe for concurrent use; make one
// Runner per goroutine (they share the Model).
type Runner struct {
	m      *Model
	be     backend.Backend
	w      *weights
	obs    KVObserver
	buf    buffers
	family *Family         // the model layer's definition of the model
	geo    []LayerGeometry // per layer
	// ropes are the distinct RoPE frequency tables of the layers;
	// ropeOf[li] indexes layer li's.
	ropes  [][]float64
	ropeOf []int
	step   Step // the step's view for the blocks
	// invariant is RunnerOptions.BatchInvariant; alone, AsAlone.
	invariant, alone bool
	shared, whole    int // steps whose entries shared their first layer's work, every layer's (tests)
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Backend runs the compute; nil means a CPU backend with Workers
	// goroutines.
	Backend backend.Backend
	// Workers bounds the goroutines of the default CPU backend (0:
	// GOMAXPROCS).
	Workers int
	// Observer, when set, sees the keys and values of every token written
	// (at no cost when nil).
	Observer KVObserver
	// BatchInvariant makes an entry's results independent of the other
	// entries of its step, bit for bit, on a backend that implements
	// backend.RowGroups (the CPU one; others ignore it): the matrix
	// products of a step run over each entry's rows as if the entry were
	// alone (the rows of one-token entries, decodes, each with the one-row
	// kernel), and every logits row is computed as if alone. A serving
	// engine sets it, so that a request's logits do not depend on the
	// load; it costs a pass over the weights per multi-token entry and the
	// 4-token kernel's reuse for decode rows.
	BatchInvariant bool
	// AsAlone gives every entry of a step the bits it has in a step of
	// its own, logits included, on a backend that implements
	// backend.RowGroups (the CPU one; others ignore it): the matrix
	// products run over each entry's rows as if the entry were alone, and
	// its logits rows in the chunks its own step would take. Eval sets it
	// so that caches side by side score as each would alone. Entries over
	// the same tokens at the same positions (caches side by side) then
	// share the embedding and the first layer's work before its
	// attention, and an Exact step of empty sequences every layer
	// (alone.go).
	AsAlone bool
	// F32Activations runs the default CPU backend with float32
	// activations in every matrix product (cpu.Backend.F32Activations):
	// quantized weights (Q8_0, the K-quants, the legacy types) are then
	// multiplied with the activations as they are, not quantized to Q8_0
	// or Q8_K as llama.cpp does, which takes the activations' rounding out
	// of a comparison of caches (and prefill runs slower). A Backend given
	// keeps its own arithmetic.
	F32Activations bool
}

// weights are the model's weights on the backend.
type weights struct {
	embed, output backend.Matrix
	norm          backend.Tensor
	layers        []LayerWeights
}

// NewRunner makes a runner for m, uploading its weights to the backend
// (the CPU backend uses them in place).
func NewRunner(m *Model, opts RunnerOptions) (*Runner, error) {
	be := opts.Backend
	if be == nil {
		c := cpu.New(opts.Workers)
		be = c
		if opts.F32Activations {
			be = c.F32Activations()
		}
	}
	f, geo, err := m.layerGeometry()
	if err != nil {
		return nil, err
	}
	if _, ok := be.(backend.MoE); m.Experts > 0 && !ok {
		return nil, fmt.Errorf("%w: the %s backend does not run mixture-of-experts layers", ErrUnsupported, be.Name())
	}
	if f.Needs != nil {
		if err := f.Needs(be); err != nil {
			return nil, err
		}
	}
	if err := gptossNeeds(m, be); err != nil {
		return nil, err
	}
	w, err := upload(m, be)
	if err != nil {
		return nil, fmt.Errorf("runtime: %s backend: %w", be.Name(), err)
	}
	r := &Runner{m: m, be: be, w: w, obs: opts.Observer, family: f, geo: geo, invariant: opts.BatchInvariant, alone: opts.AsAlone}
	for _, g := range geo {
		i := 0
		for i < len(r.ropes) && !sameFreqs(r.ropes[i], g.InvFreq) {
			i++
		}
		if i == len(r.ropes) {
			r.ropes = append(r.ropes, g.InvFreq)
		}
		r.ropeOf = append(r.ropeOf, i)
	}
	return r, nil
}

// sameFreqs reports whether a and b are the same table.
func sameFreqs(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func upload(m *Model, be backend.Backend) (*weights, error) {
	var errs []error
	mat := func(w *tensor.Weight) backend.Matrix {
		if w == nil { // an expert layer's dense MLP
			return nil
		}
		x, err := be.Upload(w)
		errs = append(errs, err)
		return x
	}
	vec := func(v []float32) backend.Tensor {
		if v == nil {
			return nil
		}
		x, err := be.UploadF32(v)
		errs = append(errs, err)
		return x
	}
	w := &weights{embed: mat(m.Embed), norm: vec(m.Norm)}
	w.output = w.embed
	if m.Output != m.Embed {
		w.output = mat(m.Output)
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		w.layers = append(w.layers, LayerWeights{
			AttnNorm: vec(l.AttnNorm), FFNNorm: vec(l.FFNNorm), PostAttnNorm: vec(l.PostAttnNorm), PostFFNNorm: vec(l.PostFFNNorm),
			Bq: vec(l.Bq), Bk: vec(l.Bk), Bv: vec(l.Bv), QNorm: vec(l.QNorm), KNorm: vec(l.KNorm),
			Wq: mat(l.Wq), Wk: mat(l.Wk), Wv: mat(l.Wv), Wo: mat(l.Wo), Gate: mat(l.Gate), Up: mat(l.Up), Down: mat(l.Down),
			Bo: vec(l.Bo), RouterBias: vec(l.RouterBias), Sinks: l.Sinks,
		})
		if l.QScale != nil {
			w.layers[i].QScale = mat(l.QScale)
		}
		prepareExperts(be, l)
		errs = append(errs, uploadExperts(be, l, &w.layers[i]))
		errs = append(errs, uploadExpertExtras(be, &m.Config, l, &w.layers[i]))
	}
	return w, errors.Join(errs...)
}

// Model returns the runner's model.
func (r *Runner) Model() *Model { return r.m }

// Backend returns the runner's backend.
func (r *Runner) Backend() backend.Backend { return r.be }

// Close frees the runner's activations on the backend.
func (r *Runner) Close() {
	r.buf.free(r.be)
}

// NewCache makes a cache for this model in layout l, its storage on the
// runner's backend. opts.Storage and opts.RoPE are filled in.
func (r *Runner) NewCache(l *kvcache.Layout, opts kvcache.Options) (*kvcache.Cache, error) {
	m := r.m
	if g := m.Geometry(); l.Geometry != g {
		return nil, fmt.Errorf("%w: cache layout of %s does not match the model's %s", kvcache.ErrGeometry, geometry(l.Geometry), geometry(g))
	}
	for i := range l.Layers {
		for _, s := range []*kvcache.Side{&l.Layers[i].K, &l.Layers[i].V} {
			if err := r.be.SupportsKV(s.Format); err != nil {
				return nil, err
			}
		}
	}
	opts.Storage = r.be
	if l.AnyPreRoPE() {
		// Re-rotation knows one table: the layers that keep pre-RoPE keys
		// must share it (Gemma 3's global layers do; its local layers
		// rotate by another table and must keep post-RoPE keys, e.g.
		// kvquant4,sliding=fp16).
		var g *LayerGeometry
		for li := range l.Layers {
			if !l.PreRoPE(li) {
				continue
			}
			if g != nil && !sameFreqs(g.InvFreq, r.geo[li].InvFreq) {
				return nil, fmt.Errorf("%w: pre-RoPE keys in layers that rotate by %d RoPE tables (re-rotation knows one: keep the keys of the sliding layers post-RoPE, e.g. with sliding=fp16)", kvcache.ErrGeometry, len(r.ropes))
			}
			if g == nil {
				g = &r.geo[li]
			}
		}
		maxPos := m.ContextLen
		if maxPos <= 0 {
			maxPos = 1 << 22
		}
		opts.RoPE = cpu.NewKeyRoPE(g.HeadDim, g.InvFreq, g.RopeNeoX, maxPos).Rows
		opts.RoPEFreqs, opts.RoPENeoX = g.InvFreq, g.RopeNeoX
	}
	return kvcache.New(l, opts)
}

// buffers are a step's activations on the backend.
type buffers struct {
	nt                                     int // token rows they hold
	x, xn, q, k, v, kpre, att, o, gate, up backend.Tensor
	router, route                          backend.Tensor   // expert layers' (nil without)
	angles                                 []backend.Tensor // per RoPE table: [cos | sin] rows
	ids, pos, rows                         []int32
	sizes, ones                            []int      // the entries' row counts, and 1s (RowGroups)
	host                                   hostKV     // observer copies
	entries                                []observed // the step's entries, for the observer
	groups                                 []*group   // the step's groups, for Step
	lg                                     logitsBuffers
}

type hostKV struct{ kpre, k, v []float32 }

// observed is an entry of the step as the observer sees it.
type observed struct {
	cache *kvcache.Cache
	seq   kvcache.SeqID
	n     int
}

// logitsBuffers hold a chunk of logits rows.
type logitsBuffers struct {
	n      int            // rows they hold
	x, out backend.Tensor // normed hidden rows, logits
	host   []float32      // host copy of out
}

func freeAll(be backend.Backend, ts ...backend.Tensor) {
	for _, t := range ts {
		if t != nil {
			be.Free(t)
		}
	}
}

func (b *buffers) free(be backend.Backend) {
	freeAll(be, b.x, b.xn, b.q, b.k, b.v, b.kpre, b.att, b.o, b.gate, b.up, b.router, b.route, b.lg.x, b.lg.out)
	freeAll(be, b.angles...)
	*b = buffers{}
}

// ensure sizes the token buffers for nt rows and the RoPE tables ropes.
func (b *buffers) ensure(be backend.Backend, c *Config, ropes [][]float64, nt int) {
	if nt <= b.nt {
		return
	}
	freeAll(be, b.x, b.xn, b.q, b.k, b.v, b.kpre, b.att, b.o, b.gate, b.up, b.router, b.route)
	freeAll(be, b.angles...)
	b.nt = nt
	b.router, b.route = nil, nil
	if c.Experts > 0 {
		b.router, b.route = be.Alloc(nt*c.Experts), be.Alloc(nt*2*c.ExpertsUsed)
	}
	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	b.x, b.xn, b.o = be.Alloc(nt*c.Dim), be.Alloc(nt*c.Dim), be.Alloc(nt*c.Dim)
	b.q, b.att = be.Alloc(nt*qd), be.Alloc(nt*qd)
	b.k, b.v, b.kpre = be.Alloc(nt*kvd), be.Alloc(nt*kvd), be.Alloc(nt*kvd)
	b.gate, b.up = be.Alloc(nt*c.Hidden), be.Alloc(nt*c.Hidden)
	b.angles = b.angles[:0]
	for _, f := range ropes {
		b.angles = append(b.angles, be.Alloc(nt*2*len(f)))
	}
}

// ensure sizes the logits buffers for n rows.
func (l *logitsBuffers) ensure(be backend.Backend, c *Config, n int) {
	if n <= l.n {
		return
	}
	freeAll(be, l.x, l.out)
	l.n = n
	l.x, l.out = be.Alloc(n*c.Dim), be.Alloc(n*c.Vocab)
	l.host = make([]float32, n*c.Vocab)
}

// logitsChunk is how many logits rows are computed at a time: about 4M
// values (16 MiB), whatever the vocabulary, so that no step holds
// tokens × vocab floats.
func logitsChunk(vocab, rows int) int { return max(1, min(rows, (1<<22)/max(1, vocab))) }

// group is one cache's part of a batch.
type group struct {
	cache   *kvcache.Cache
	appends []kvcache.Append
	plan    *kvcache.Plan
}

// Stream appends the entries' tokens to their sequences, runs the model and
// hands fn the logits the entries asked for, a chunk at a time (fn may be
// nil when none are asked for). It either succeeds, with every entry's
// tokens in its cache, or returns an error and leaves every cache as it
// was: the step is reserved, computed, and committed only at the end
// (on an input error, a full cache, cancellation or an error from fn it is
// rolled back). Input errors wrap ErrInput.
func (r *Runner) Stream(ctx context.Context, batch []Entry, fn LogitsFunc) (err error) {
	m, c := r.m, &r.m.Config
	if len(batch) == 0 {
		return ErrEmptyBatch
	}
	var groups []*group
	nt := 0
	for i, e := range batch {
		if e.Cache == nil {
			return fmt.Errorf("%w: entry %d has no cache", ErrBatch, i)
		}
		if len(e.Tokens) == 0 {
			return fmt.Errorf("%w: empty entry for sequence %d", ErrBatch, e.Seq)
		}
		for _, t := range e.Tokens {
			if t < 0 || t >= c.Vocab {
				return fmt.Errorf("%w: token id %d outside vocabulary of %d", ErrTokenID, t, c.Vocab)
			}
		}
		if !e.Cache.Has(e.Seq) {
			return fmt.Errorf("%w: %w: %d", ErrInput, kvcache.ErrNoSequence, e.Seq)
		}
		if n := e.Cache.Len(e.Seq) + len(e.Tokens); n > m.MaxSeqLen() {
			return fmt.Errorf("%w: sequence %d would hold %d tokens (%d + %d), the model's context is %d", ErrContext, e.Seq, n, e.Cache.Len(e.Seq), len(e.Tokens), m.MaxSeqLen())
		}
		if g := e.Cache.Layout().Geometry; g != m.Geometry() {
			return fmt.Errorf("%w: entry %d: cache layout of %s does not match the model's %s", ErrBatch, i, geometry(g), geometry(m.Geometry()))
		}
		var g *group
		for _, h := range groups {
			if h.cache == e.Cache {
				g = h
			}
		}
		if g == nil {
			g = &group{cache: e.Cache}
			groups = append(groups, g)
		}
		g.appends = append(g.appends, kvcache.Append{Seq: e.Seq, Row: nt, N: len(e.Tokens), Exact: e.Exact})
		nt += len(e.Tokens)
	}
	for k, g := range groups {
		p, err := g.cache.Reserve(g.appends)
		if err != nil {
			for _, h := range groups[:k] {
				h.cache.Rollback(h.plan)
			}
			if errors.Is(err, kvcache.ErrSequence) {
				return fmt.Errorf("%w: %w", ErrBatch, err)
			}
			return err
		}
		g.plan = p
	}
	defer func() {
		for _, g := range groups {
			if err != nil {
				g.cache.Rollback(g.plan)
			} else {
				g.cache.Commit(g.plan)
			}
		}
	}()
	// A backend that can stop part way does so when ctx ends, so that a
	// long prefill is not cancelled only at the end of a layer.
	be := r.be
	if ib, ok := be.(backend.Interruptible); ok && ctx.Done() != nil {
		be = ib.Interruptible(ctx.Done())
	}
	lbe := be // the logits' products take their own row groups
	if rg, ok := be.(backend.RowGroups); ok && (r.invariant || r.alone) && len(batch) > 1 {
		b := &r.buf
		b.sizes = b.sizes[:0]
		for _, e := range batch {
			b.sizes = append(b.sizes, len(e.Tokens))
		}
		be = rg.RowGroups(b.sizes)
	}
	if err := r.layers(ctx, be, batch, groups, nt); err != nil {
		return err
	}
	if _, ok := lbe.(backend.RowGroups); ok && r.alone && !r.invariant && len(batch) > 1 {
		return r.logitsAlone(ctx, lbe, batch, fn)
	}
	return r.logits(ctx, lbe, batch, fn)
}

// layers runs the embedding and every layer's block over the batch's nt
// tokens on be (r.be, or its interruptible view: ctx is checked after each
// op that may have stopped early, before its output is written or
// observed).
func (r *Runner) layers(ctx context.Context, be backend.Backend, batch []Entry, groups []*group, nt int) error {
	c, b := &r.m.Config, &r.buf
	b.ensure(be, c, r.ropes, nt)
	b.ids, b.pos = b.ids[:0], b.pos[:0]
	for _, e := range batch {
		p0 := e.Cache.Len(e.Seq) - len(e.Tokens) // reserved: Len counts the step
		for j, t := range e.Tokens {
			b.ids = append(b.ids, int32(t))
			b.pos = append(b.pos, int32(p0+j))
		}
	}
	shared, whole := r.sharedRows(be, batch) // > 0: entries over the same tokens (alone.go)
	if shared > 0 {
		r.shared++
		if whole {
			r.whole++
		}
		be.Embed(b.x, r.w.embed, b.ids[:shared])
		replicate(be, b.x, shared*c.Dim, nt/shared)
	} else {
		be.Embed(b.x, r.w.embed, b.ids)
	}
	for i, f := range r.ropes {
		be.RoPEAngles(b.angles[i], b.pos, f)
	}
	s := &r.step // reused: a step allocates no Step
	*s = Step{Ops: be, NT: nt, Config: c, X: b.x, XN: b.xn, O: b.o, Q: b.q, K: b.k, V: b.v, Att: b.att, Gate: b.gate, Up: b.up, Router: b.router, Route: b.route,
		r: r, ctx: ctx}
	// The step's view holds copies of the batch and groups in the runner's
	// buffers, not the callers' slices, which then stay on their stacks.
	b.groups = append(b.groups[:0], groups...)
	s.groups = b.groups
	b.entries = b.entries[:0]
	for _, e := range batch {
		b.entries = append(b.entries, observed{cache: e.Cache, seq: e.Seq, n: len(e.Tokens)})
	}
	defer func() {
		*s = Step{}
		clear(b.groups)
		clear(b.entries)
	}()
	if r.family.Embedded != nil {
		r.family.Embedded(s)
	}
	for li := range r.w.layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("runtime: forward stopped before layer %d: %w", li, err)
		}
		s.Layer, s.Weights = &r.geo[li], &r.w.layers[li]
		if li == 0 && shared > 0 {
			s.Ops = &sharedOps{Backend: be, per: shared, n: nt / shared, nt: nt, on: true, whole: whole, attWidth: c.Heads * c.HeadDim, attLayer: -1}
		}
		err := r.family.Block(s, li)
		if !whole {
			s.Ops = be
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// observe shows the observer layer li's keys and values (kt, vt; the keys
// before RoPE in the runner's kpre buffer), entry by entry.
func (r *Runner) observe(be backend.Backend, li int, nt int, kt, vt backend.Tensor) error {
	c, b := &r.m.Config, &r.buf
	kvd := c.KVHeads * c.HeadDim
	var kpre, k, v []float32
	if hm, ok := be.(backend.HostMemory); ok {
		kpre, k, v = hm.Host(b.kpre), hm.Host(kt), hm.Host(vt)
	} else {
		h := &b.host
		for _, x := range []struct {
			dst *[]float32
			src backend.Tensor
		}{{&h.kpre, b.kpre}, {&h.k, kt}, {&h.v, vt}} {
			if cap(*x.dst) < nt*kvd {
				*x.dst = make([]float32, nt*kvd)
			}
			*x.dst = (*x.dst)[:nt*kvd]
			if err := be.Download(*x.dst, x.src, 0); err != nil {
				return err
			}
		}
		kpre, k, v = h.kpre, h.k, h.v
	}
	row := 0
	for _, e := range b.entries {
		n := e.n
		lo, hi := row*kvd, (row+n)*kvd
		r.obs.ObserveKV(&KVObservation{Layer: li, Cache: e.cache, Seq: e.seq, Pos: e.cache.Len(e.seq) - n, N: n,
			KPre: kpre[lo:hi:hi], K: k[lo:hi:hi], V: v[lo:hi:hi]})
		row += n
	}
	return nil
}

// logits computes the rows the entries asked for, a chunk at a time, and
// hands them to fn.
func (r *Runner) logits(ctx context.Context, be backend.Backend, batch []Entry, fn LogitsFunc) error {
	c, b := &r.m.Config, &r.buf
	type want struct{ e, i int }
	var wants []want
	b.rows = b.rows[:0]
	// Rows go out by token index, then entry: side-by-side caches over the
	// same text hand over their rows for one position together, so that a
	// consumer comparing them (KL divergence to a baseline) keeps one row,
	// not the whole text.
	first := make([]int, len(batch)) // each entry's first activation row
	most, row := 0, 0
	for ei, e := range batch {
		first[ei] = row
		row += len(e.Tokens)
		switch e.Logits {
		case LastLogits:
			most = max(most, 1)
		case AllLogits:
			most = max(most, len(e.Tokens))
		}
	}
	for i := 0; i < most; i++ {
		for ei, e := range batch {
			switch {
			case e.Logits == LastLogits && i == 0:
				wants = append(wants, want{ei, 0})
				b.rows = append(b.rows, int32(first[ei]+len(e.Tokens)-1))
			case e.Logits == AllLogits && i < len(e.Tokens):
				wants = append(wants, want{ei, i})
				b.rows = append(b.rows, int32(first[ei]+i))
			}
		}
	}
	if len(wants) == 0 {
		return nil
	}
	if fn == nil {
		return fmt.Errorf("%w: logits asked for with no consumer", ErrBatch)
	}
	chunk := logitsChunk(c.Vocab, len(wants))
	lg := &b.lg
	lg.ensure(be, c, chunk)
	for c0 := 0; c0 < len(wants); c0 += chunk {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("runtime: forward stopped computing logits: %w", err)
		}
		n := min(chunk, len(wants)-c0)
		be.Gather(lg.x, b.x, b.rows[c0:c0+n], c.Dim)
		be.RMSNorm(lg.x, lg.x, n, r.w.norm, c.RMSEps)
		mm := be
		if rg, ok := be.(backend.RowGroups); ok && r.invariant && n > 1 {
			for len(b.ones) < n {
				b.ones = append(b.ones, 1)
			}
			mm = rg.RowGroups(b.ones[:n]) // every row as if alone
		}
		mm.MatMul(lg.out, lg.x, n, r.w.output)
		host := lg.host[:n*c.Vocab]
		if err := be.Download(host, lg.out, 0); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil { // the product may have stopped early
			return fmt.Errorf("runtime: forward stopped computing logits: %w", err)
		}
		for j := 0; j < n; j++ {
			w := wants[c0+j]
			if r.family.Logits != nil {
				r.family.Logits(c, host[j*c.Vocab:(j+1)*c.Vocab])
			}
			if err := fn(w.e, w.i, host[j*c.Vocab:(j+1)*c.Vocab]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Forward is Stream collecting the logits in fresh slices, per entry: Vocab
// values for LastLogits, len(Tokens)·Vocab for AllLogits, nil for NoLogits
// (mind the size of AllLogits over long texts: Stream needs none).
func (r *Runner) Forward(ctx context.Context, batch []Entry) ([][]float32, error) {
	out := make([][]float32, len(batch))
	V := r.m.Vocab
	err := r.Stream(ctx, batch, func(e, i int, logits []float32) error {
		if out[e] == nil {
			n := 1
			if batch[e].Logits == AllLogits {
				n = len(batch[e].Tokens)
			}
			out[e] = make([]float32, n*V)
		}
		copy(out[e][i*V:(i+1)*V], logits)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// geometry describes g for messages: "4 layers, 2 KV heads × 64".
func geometry(g kvcache.Geometry) string {
	s := fmt.Sprintf("%d layers, %d KV heads × %d", g.Layers, g.KVHeads, g.HeadDim)
	if g.Latent {
		s += " (latent)"
	}
	return s
}
