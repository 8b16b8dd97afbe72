package quant

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kvqlabs/kvq/internal/simd"
)

// intFormat is a plain integer format: b-bit codes with fp16 scale (and zero),
// in per-token groups along head_dim or per-channel groups along tokens.
type intFormat struct {
	bits    int
	group   int // per-token: values per group (0 = the whole row); per-channel: tokens per group
	channel bool
	sym     bool
}

func (f intFormat) Name() string {
	n := "int" + strconv.Itoa(f.bits)
	if g := f.group; g != defaultIntGroup(f.bits, f.channel) {
		if g == 0 {
			n += ":row"
		} else {
			n += ":g" + strconv.Itoa(g)
		}
	}
	if f.channel {
		n += ":channel"
	}
	if f.sym {
		n += ":sym"
	}
	return n
}

func defaultIntGroup(bits int, channel bool) int {
	switch {
	case channel:
		return 32
	case bits == 8:
		return 0
	}
	return 64
}

func (f intFormat) Describe() (string, []string) {
	kind := "asymmetric min/max (fp16 scale and zero)"
	if f.sym {
		kind = "symmetric absmax (fp16 scale)"
	}
	var grouping string
	switch {
	case f.channel:
		grouping = fmt.Sprintf("per-channel groups of %d tokens (KIVI-style keys; the newest incomplete group stays fp16)", f.group)
	case f.group == 0:
		grouping = "one group per token and head"
	default:
		grouping = fmt.Sprintf("per-token groups of %d values along head_dim", f.group)
	}
	return fmt.Sprintf("%d-bit integer, %s, %s", f.bits, kind, grouping), nil
}

// Traits implements Format.
func (f intFormat) Traits(bool) Traits {
	return groupTraits(FamilyInt, f.bits, f.group, f.channel, f.sym)
}

// groupTraits are the traits of integer groups with fp16 scales (and
// zeros unless sym): per-token groups of group values along head_dim
// (tokenCodec; 0: the row), or per-channel groups of group tokens
// (channelCodec, encoded a group at a time).
func groupTraits(fam Family, bits, group int, channel, sym bool) Traits {
	t := Traits{Family: fam, Bits: bits, Codebook: CodebookLinear, Block: group, Packing: PackSplit,
		Scale: ScaleGroup, ScaleType: DTypeF16, Zero: DTypeF16, Flush: 1}
	if sym {
		t.Zero = DTypeNone
	}
	switch {
	case channel:
		t.Axis, t.Packing, t.Scale, t.Flush = AxisChannel, PackGroups, ScaleChannel, group
	case group == 0:
		t.Scale = ScaleToken
	}
	return t
}

func (f intFormat) NewCodec(p CodecParams) (Codec, error) {
	return newGroupCodec(f.Name(), p.Dim, f.Traits(p.Key))
}

// newGroupCodec makes the codec of integer groups that traits t describe
// (groupTraits): a channelCodec for AxisChannel, else a tokenCodec.
func newGroupCodec(name string, dim int, t Traits) (Codec, error) {
	sym := t.Zero == DTypeNone
	if t.Axis == AxisChannel {
		c, err := newChannelCodec(name, dim, t.Bits, t.Block, t.Flush, sym)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	c, err := newTokenCodec(name, dim, t.Bits, t.Block, t.Flush, t.Residual, sym)
	if err != nil {
		return nil, err
	}
	c.promptFlush = t.PromptFlush
	return c, nil
}

// intOptions parses g<N>, row, token, channel, sym, asym and r<N> options.
type intOptions struct {
	group, resid                       int
	groupSet, resSet                   bool
	channel, sym                       bool
	allowed                            string // option names accepted, for messages
	allowChannel, allowSym, allowResid bool
}

func (o *intOptions) parse(base string, opts []string) error {
	for _, op := range opts {
		switch {
		case op == "row" && !o.allowResid:
			o.group, o.groupSet = 0, true
		case op == "token":
			o.channel = false
		case op == "channel" && o.allowChannel:
			o.channel = true
		case op == "sym" && o.allowSym:
			o.sym = true
		case op == "asym":
			o.sym = false
		case len(op) > 1 && op[0] == 'g':
			n, err := strconv.Atoi(op[1:])
			if err != nil || n <= 0 {
				return fmt.Errorf("%w: %s: group %q must be g<positive integer>", ErrOption, base, op)
			}
			o.group, o.groupSet = n, true
		case len(op) > 1 && op[0] == 'r' && o.allowResid:
			n, err := strconv.Atoi(op[1:])
			if err != nil || n < 0 {
				return fmt.Errorf("%w: %s: residual %q must be r<integer ≥ 0>", ErrOption, base, op)
			}
			o.resid, o.resSet = n, true
		default:
			return fmt.Errorf("%w: %s: unknown option %q (valid: %s)", ErrOption, base, op, o.allowed)
		}
	}
	return nil
}

func integerFamilies() []family {
	intMake := func(base string, opts []string) (Format, error) {
		bits, _ := strconv.Atoi(strings.TrimPrefix(base, "int"))
		o := intOptions{allowed: "g<N>, row, token, channel, sym, asym", allowChannel: true, allowSym: true}
		if err := o.parse(base, opts); err != nil {
			return nil, err
		}
		f := intFormat{bits: bits, channel: o.channel, sym: o.sym, group: defaultIntGroup(bits, o.channel)}
		if o.groupSet {
			f.group = o.group
		}
		if f.channel && f.group == 0 {
			return nil, fmt.Errorf("%w: %s: per-channel groups need a token count g<N>, not row", ErrOption, base)
		}
		return f, nil
	}
	kiviMake := func(base string, opts []string) (Format, error) {
		bits, _ := strconv.Atoi(strings.TrimPrefix(base, "kivi"))
		o := intOptions{group: 32, resid: 128, allowed: "g<N>, r<N>", allowResid: true}
		if err := o.parse(base, opts); err != nil {
			return nil, err
		}
		if o.resid%o.group != 0 {
			return nil, fmt.Errorf("%w: %s: residual length %d must be a multiple of the group size %d (KIVI flushes whole groups)", ErrOption, base, o.resid, o.group)
		}
		return kiviFormat{bits: bits, group: o.group, resid: o.resid}, nil
	}
	quantoMake := func(base string, opts []string) (Format, error) {
		bits, _ := strconv.Atoi(strings.TrimPrefix(base, "quanto"))
		o := intOptions{group: 64, resid: 128, allowed: "g<N>, r<N>, channel", allowResid: true, allowChannel: true}
		if err := o.parse(base, opts); err != nil {
			return nil, err
		}
		return quantoFormat{bits: bits, group: o.group, resid: o.resid, channel: o.channel}, nil
	}
	intOpts := []string{"g32", "g128", "row", "token", "channel", "sym", "asym"}
	return []family{
		{base: "int8", make: intMake, options: intOpts, presets: []string{"int8"}},
		{base: "int4", make: intMake, options: intOpts, presets: []string{"int4", "int4:g32", "int4:g32:channel"}},
		{base: "int2", make: intMake, options: intOpts, presets: []string{"int2", "int2:g32:channel"}},
		{base: "kivi4", make: kiviMake, options: []string{"g64", "r64"}, presets: []string{"kivi4"}},
		{base: "kivi2", make: kiviMake, options: []string{"g64", "r64"}, presets: []string{"kivi2"}},
		{base: "quanto4", aliases: []string{"hf-int4"}, make: quantoMake, options: []string{"g32", "r64", "channel"}, presets: []string{"quanto4"}},
		{base: "quanto2", aliases: []string{"hf-int2"}, make: quantoMake, options: []string{"g32", "r64", "channel"}, presets: []string{"quanto2"}},
	}
}

// kiviFormat is KIVI (Liu et al., 2024): keys per-channel in groups of G
// tokens, quantized R tokens at a time (the key fp16 window cycles through
// 0..R−1 tokens); values per-token in groups of G channels, with the most
// recent R values kept in fp16 (a FIFO window).
type kiviFormat struct{ bits, group, resid int }

func (f kiviFormat) Name() string {
	n := "kivi" + strconv.Itoa(f.bits)
	if f.group != 32 {
		n += ":g" + strconv.Itoa(f.group)
	}
	if f.resid != 128 {
		n += ":r" + strconv.Itoa(f.resid)
	}
	return n
}

func (f kiviFormat) Describe() (string, []string) {
	return fmt.Sprintf("KIVI %d-bit: keys per-channel (groups of %d tokens, flushed %d at a time), values per-token (groups of %d), last %d values fp16",
		f.bits, f.group, max(f.resid, f.group), f.group, f.resid), nil
}

// Traits implements Format: keys in per-channel groups flushed
// max(R, G) tokens at a time, values in per-token groups with the last R
// rows in fp16.
func (f kiviFormat) Traits(key bool) Traits {
	if key {
		t := groupTraits(FamilyKIVI, f.bits, f.group, true, false)
		t.Flush = max(f.resid, f.group)
		return t
	}
	t := groupTraits(FamilyKIVI, f.bits, f.group, false, false)
	t.Residual = f.resid
	return t
}

func (f kiviFormat) NewCodec(p CodecParams) (Codec, error) {
	return newGroupCodec(f.Name(), p.Dim, f.Traits(p.Key))
}

// quantoFormat mimics Hugging Face transformers' QuantizedCache with the
// quanto backend: per-token (axis 0) or per-channel (axis −1) groups, and a
// residual fp16 buffer of up to R−1 tokens that is quantized R tokens at a
// time. Per-token groups follow transformers' flush points: the prompt is
// quantized at once, then every R generated tokens counted from the end of
// the prompt (quant.PromptFlusher). Per-channel groups need G whole tokens
// per group, so their flushes fall on multiples of lcm(R, G) from position
// 0 (transformers re-quantizes the whole cache at each flush instead).
type quantoFormat struct {
	bits, group, resid int
	channel            bool
}

func (f quantoFormat) Name() string {
	n := "quanto" + strconv.Itoa(f.bits)
	if f.group != 64 {
		n += ":g" + strconv.Itoa(f.group)
	}
	if f.resid != 128 {
		n += ":r" + strconv.Itoa(f.resid)
	}
	if f.channel {
		n += ":channel"
	}
	return n
}

func (f quantoFormat) Describe() (string, []string) {
	axis := fmt.Sprintf("per-token groups of %d", f.group)
	if f.channel {
		axis = fmt.Sprintf("per-channel groups of %d tokens", f.group)
	}
	flush := fmt.Sprintf("prompt quantized at once, then the residual buffer flushed every %d tokens", f.resid)
	if f.channel {
		flush = fmt.Sprintf("residual buffer flushed every %d tokens from position 0", lcmInt(max(1, f.resid), f.group))
	}
	return fmt.Sprintf("HF QuantizedCache (quanto) int%d, %s, %s", f.bits, axis, flush), nil
}

// Traits implements Format: per-token groups flushed R tokens at a time
// from the end of the prompt, or per-channel groups flushed lcm(R, G)
// tokens at a time (see quantoFormat).
func (f quantoFormat) Traits(bool) Traits {
	t := groupTraits(FamilyQuanto, f.bits, f.group, f.channel, false)
	flush := max(1, f.resid)
	if f.channel {
		t.Flush = lcmInt(flush, f.group)
	} else {
		t.Flush, t.PromptFlush = flush, true
	}
	return t
}

func (f quantoFormat) NewCodec(p CodecParams) (Codec, error) {
	return newGroupCodec(f.Name(), p.Dim, f.Traits(p.Key))
}

func lcmInt(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

func checkBitsDim(name string, dim, bits int) error {
	if dim <= 0 || dim*bits%8 != 0 {
		return fmt.Errorf("%w: %s: head size %d does not pack into whole bytes at %d bits", ErrDim, name, dim, bits)
	}
	return nil
}

// tokenCodec quantizes each row in groups of group values along head_dim.
// Tile layout for a tile of capacity C rows (C = len(tile)/rowBytes): the
// fp16 scales of all groups (C·ngroups), then, for affine groups, the fp16
// zeros, then the packed codes of all rows (C·dim·bits/8 bytes). Keeping
// codes and scales contiguous lets a chunk of rows be dequantized in one
// call; putting the parameters first lets a page be read front to back
// (they are read first), which the hardware prefetcher follows: with them
// after the codes, converting them cost as much as the attention kernels.
type tokenCodec struct {
	dim, bits, group, ngroups int
	sym                       bool
	meta, codeBytes, rowBytes int
	tokenGroup, resid         int
	promptFlush               bool // quanto: see quant.PromptFlusher
}

func newTokenCodec(name string, dim, bits, group, tokenGroup, resid int, sym bool) (*tokenCodec, error) {
	if err := checkBitsDim(name, dim, bits); err != nil {
		return nil, err
	}
	if group == 0 || group > dim {
		group = dim
	}
	if dim%group != 0 {
		return nil, fmt.Errorf("%w: %s: group size %d does not divide head size %d", ErrDim, name, group, dim)
	}
	c := &tokenCodec{dim: dim, bits: bits, group: group, ngroups: dim / group, sym: sym, meta: 4, tokenGroup: tokenGroup, resid: resid}
	if sym {
		c.meta = 2
	}
	c.codeBytes = dim * bits / 8
	c.rowBytes = c.codeBytes + c.ngroups*c.meta
	return c, nil
}

func (c *tokenCodec) TokenGroup() int         { return c.tokenGroup }
func (c *tokenCodec) TileBytes(rows int) int  { return rows * c.rowBytes }
func (c *tokenCodec) StateBytes() int         { return 0 }
func (c *tokenCodec) ResidualRows() int       { return c.resid }
func (c *tokenCodec) FlushesFromPrompt() bool { return c.promptFlush }

// regions splits a tile into its codes, scales and zeros.
func (c *tokenCodec) regions(tile []byte) (codes, scales, zeros []byte) {
	capRows := len(tile) / c.rowBytes
	scales = tile[:capRows*2*c.ngroups]
	meta := capRows * c.ngroups * c.meta
	if !c.sym {
		zeros = tile[capRows*2*c.ngroups : meta]
	}
	codes = tile[meta : meta+capRows*c.codeBytes]
	return codes, scales, zeros
}

func (c *tokenCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	codes, scales, zeros := c.regions(tile)
	for r := 0; r < n; r++ {
		row := codes[(row0+r)*c.codeBytes:][:c.codeBytes]
		x := src[r*c.dim : (r+1)*c.dim]
		clear(row)
		for g := 0; g < c.ngroups; g++ {
			xs := x[g*c.group : (g+1)*c.group]
			mi := ((row0+r)*c.ngroups + g) * 2
			if c.sym {
				var amax float32
				for _, v := range xs {
					amax = max(amax, float32(math.Abs(float64(clampF16(v)))))
				}
				p := symParams(amax, c.bits)
				putF16(scales[mi:], p.sb)
				for i, v := range xs {
					putCode(row, g*c.group+i, c.bits, quantSym(v, p, c.bits))
				}
				continue
			}
			lo, hi := minMax(xs)
			p := affineParams(lo, hi, c.bits)
			putF16(scales[mi:], p.sb)
			putF16(zeros[mi:], p.zb)
			for i, v := range xs {
				putCode(row, g*c.group+i, c.bits, quantAffine(v, p, c.bits))
			}
		}
	}
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range x {
		v = clampF16(v)
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return lo, hi
}

// Decode dequantizes rows with one conversion of their scales and zeros and
// one unpacking call per group.
func (c *tokenCodec) Decode(dst []float32, tile []byte, row0, n int) {
	codes, scales, zeros := c.regions(tile)
	// Small buffers: Go zeroes them on every call (a chunk is 16 rows).
	var sb, zb [64]float32
	per := max(1, 64/c.ngroups)
	for r0 := 0; r0 < n; r0 += per {
		m := min(n-r0, per)
		k := m * c.ngroups
		s := scratch(sb[:], k)
		z := scratch(zb[:], k)
		f16s(s, scales[(row0+r0)*c.ngroups*2:][:2*k])
		if c.sym {
			bias := -float32(int(1) << (c.bits - 1))
			for i := range z {
				z[i] = bias * s[i]
			}
		} else {
			f16s(z, zeros[(row0+r0)*c.ngroups*2:][:2*k])
		}
		src := codes[(row0+r0)*c.codeBytes:][:m*c.codeBytes]
		d := dst[r0*c.dim : (r0+m)*c.dim]
		if c.bits == 4 && c.dim%32 != 0 {
			// Each row is a run of its own, ending in a short block: a
			// call per row.
			for j := 0; j < m; j++ {
				g := j * c.ngroups
				unpackGroups(d[j*c.dim:(j+1)*c.dim], src[j*c.codeBytes:(j+1)*c.codeBytes], 4, c.group, s[g:g+c.ngroups], z[g:g+c.ngroups])
			}
			continue
		}
		unpackGroups(d, src, c.bits, c.group, s, z)
	}
}

// f16s converts little-endian fp16 bytes to float32.
func f16s(dst []float32, b []byte) {
	if u, ok := asU16(b); ok {
		simd.F16ToF32(dst, u)
		return
	}
	for i := range dst {
		dst[i] = getF16(b[2*i:])
	}
}

// unpackGroups sets dst[i] = code_i·s[i/group] + z[i/group] for the packed
// codes in src, in one kernel call.
func unpackGroups(dst []float32, src []byte, bits, group int, s, z []float32) {
	switch bits {
	case 8:
		simd.U8ToF32Groups(dst, src, group, s, z)
	case 4:
		simd.U4ToF32Groups(dst, src, group, s, z)
	case 2:
		simd.U2ToF32Groups(dst, src, group, s, z)
	}
}

// fused reports whether Scores and Accumulate run on the packed codes in
// place: 8- and 4-bit codes whose rows are one group (int8's default, and
// :row), a multiple of 8 values long. Rows of several groups take the
// chunked path: applying each group's scale and zero per row and query
// (kernel calls on a few values each, and the scales transposed to group
// order) measured slower there than decoding the chunk.
func (c *tokenCodec) fused() bool {
	return (c.bits == 8 || c.bits == 4) && c.ngroups == 1 && c.group%8 == 0
}

// fusedRows is how many rows Scores and Accumulate take per round on the
// fused path: the stack buffers below hold their scales and zeros and the
// nq×rows scaled weights. They are small because Go zeroes them on every
// call; at 4 KiB each, zeroing cost more than the kernels on a page of 16
// rows. With many queries (a block of prefill tokens) a round still takes
// 16 rows, so that the per-query scaling runs on whole vectors, and the
// weights go to a pooled buffer instead.
func fusedRows(nq int) int { return max(16, min(64, 256/max(nq, 1))) }

// rowParams converts the scales and zeros of the len(s) rows from row0 into s
// and z. Symmetric codes are centred on 2^(bits−1), so z = −2^(bits−1)·s.
func (c *tokenCodec) rowParams(s, z []float32, scales, zeros []byte, row0 int) {
	f16s(s, scales[row0*2:][:2*len(s)])
	if c.sym {
		copy(z, s)
		simd.ScaleF32(z, -float32(int(1)<<(c.bits-1)))
		return
	}
	f16s(z, zeros[row0*2:][:2*len(z)])
}

// Scores uses q·x̂ = s·(q·code) + z·Σq per row: the kernel takes the raw
// codes in place, and the scale and zero are applied once per row and
// query, by vector kernels over the rows.
func (c *tokenCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	if !c.fused() {
		scoresChunked(c.Decode, c.dim, dst, ldd, q, nq, tile, row0, n)
		return
	}
	if nq == 0 || n == 0 {
		return
	}
	codes, scales, zeros := c.regions(tile)
	var qsb [64]float32
	qs := scratch(qsb[:], nq)
	querySums(qs, q, nq, c.dim)
	var sb, zb [64]float32
	step := fusedRows(nq)
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		s, z := sb[:m], zb[:m]
		c.rowParams(s, z, scales, zeros, row0+r)
		cs := codes[(row0+r)*c.codeBytes : (row0+r+m)*c.codeBytes]
		// The raw scores go to dst and are scaled in place.
		scoresCodes(c.bits, dst[r:], ldd, q, c.dim, nq, c.dim, cs, c.codeBytes, m)
		for i := 0; i < nq; i++ {
			d := dst[i*ldd+r : i*ldd+r+m]
			simd.MulF32(d, d, s)
			simd.AxpyF32(d, qs[i], z)
		}
	}
}

// ones is the query that sums a row: ScoresF32 with it sums each of a
// batch of rows in one call.
var ones = func() (o [256]float32) {
	for i := range o {
		o[i] = 1
	}
	return o
}()

// querySums sets qs[i] to the sum of query row i of q (nq rows of dim).
func querySums(qs, q []float32, nq, dim int) {
	if dim <= len(ones) {
		simd.ScoresF32(qs, nq, ones[:dim], 1, dim, q[:nq*dim], nq)
		return
	}
	for i := range qs[:nq] {
		var s float32
		for _, v := range q[i*dim : (i+1)*dim] {
			s += v
		}
		qs[i] = s
	}
}

// Accumulate uses Σ_j w_j x̂_j = Σ_j (w_j s_j)·code_j + Σ_j w_j z_j: the
// kernel takes the raw codes in place, with the weights scaled per row and
// query and the zeros' weighted sum as a bias per query.
func (c *tokenCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	if !c.fused() {
		accumulateChunked(c.Decode, c.dim, acc, w, ldw, nq, tile, row0, n)
		return
	}
	if nq == 0 || n == 0 {
		return
	}
	codes, scales, zeros := c.regions(tile)
	var sb, zb [64]float32
	var wb [256]float32
	var bb [64]float32
	bias := scratch(bb[:], nq)
	step := fusedRows(nq)
	wbuf := wb[:]
	if nq*step > len(wb) {
		var h *chunk
		wbuf, h = chunkBuf(nq * step)
		defer releaseChunk(h)
	}
	for r := 0; r < n; r += step {
		m := min(step, n-r)
		s, z := sb[:m], zb[:m]
		c.rowParams(s, z, scales, zeros, row0+r)
		cs := codes[(row0+r)*c.codeBytes : (row0+r+m)*c.codeBytes]
		ws := wbuf[:nq*m]
		for i := 0; i < nq; i++ {
			wi := w[i*ldw+r : i*ldw+r+m]
			simd.MulF32(ws[i*m:(i+1)*m], wi, s)
			bias[i] = simd.DotF32(wi, z)
		}
		accumulateCodes(c.bits, acc, c.dim, bias, ws, m, nq, c.dim, cs, c.codeBytes, m)
	}
}

// channelCodec quantizes groups of group consecutive tokens per channel.
// Tile layout, per token group: the dim fp16 scales, then (affine) the dim
// fp16 zeros, then the group's packed codes row by row (group·dim·bits/8
// bytes): the parameters are read first, so a page is read front to back
// (see tokenCodec).
type channelCodec struct {
	dim, bits, group          int
	sym                       bool
	meta, rowCode, groupBytes int
	tokenGroup                int
}

func newChannelCodec(name string, dim, bits, group, tokenGroup int, sym bool) (*channelCodec, error) {
	if err := checkBitsDim(name, dim, bits); err != nil {
		return nil, err
	}
	if group <= 0 || tokenGroup%group != 0 {
		return nil, fmt.Errorf("%w: %s: token group %d with flush %d", ErrOption, name, group, tokenGroup)
	}
	c := &channelCodec{dim: dim, bits: bits, group: group, sym: sym, meta: 4, tokenGroup: tokenGroup}
	if sym {
		c.meta = 2
	}
	c.rowCode = dim * bits / 8
	c.groupBytes = group*c.rowCode + dim*c.meta
	return c, nil
}

func (c *channelCodec) TokenGroup() int { return c.tokenGroup }
func (c *channelCodec) TileBytes(rows int) int {
	return (rows + c.group - 1) / c.group * c.groupBytes
}
func (c *channelCodec) StateBytes() int { return 0 }

func (c *channelCodec) off() float32 {
	if c.sym {
		return float32(int(1) << (c.bits - 1))
	}
	return 0
}

func (c *channelCodec) Encode(tile []byte, row0 int, src []float32, n int) {
	for g0 := 0; g0 < n; g0 += c.group {
		blk := tile[(row0+g0)/c.group*c.groupBytes:][:c.groupBytes]
		meta := blk[:c.dim*c.meta]
		codes := blk[c.dim*c.meta:]
		clear(codes)
		x := src[g0*c.dim : (g0+c.group)*c.dim]
		for ch := 0; ch < c.dim; ch++ {
			if c.sym {
				var amax float32
				for t := 0; t < c.group; t++ {
					amax = max(amax, float32(math.Abs(float64(clampF16(x[t*c.dim+ch])))))
				}
				p := symParams(amax, c.bits)
				putF16(meta[2*ch:], p.sb)
				for t := 0; t < c.group; t++ {
					putCode(codes[t*c.rowCode:][:c.rowCode], ch, c.bits, quantSym(x[t*c.dim+ch], p, c.bits))
				}
				continue
			}
			lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
			for t := 0; t < c.group; t++ {
				v := clampF16(x[t*c.dim+ch])
				lo, hi = min(lo, v), max(hi, v)
			}
			p := affineParams(lo, hi, c.bits)
			putF16(meta[2*ch:], p.sb)
			putF16(meta[2*(c.dim+ch):], p.zb)
			for t := 0; t < c.group; t++ {
				putCode(codes[t*c.rowCode:][:c.rowCode], ch, c.bits, quantAffine(x[t*c.dim+ch], p, c.bits))
			}
		}
	}
}

// groupMeta decodes the scales and zeros of one token group into s and z,
// so that value ch of a row is code·s[ch] + z[ch] (the meta region holds
// all dim scales, then, for affine groups, all dim zeros, so each converts
// in one call). Symmetric groups store no zero: their codes are centred
// on 2^(bits−1), so z = −2^(bits−1)·s, as tokenCodec computes it.
func (c *channelCodec) groupMeta(s, z []float32, blk []byte) {
	meta := blk[:c.dim*c.meta]
	f16s(s, meta[:2*c.dim])
	if c.sym {
		copy(z, s)
		simd.ScaleF32(z, -c.off())
		return
	}
	f16s(z, meta[2*c.dim:4*c.dim])
}

// segments calls fn for each run of rows [r, e) of [row0, row0+n) inside one
// token group gi.
func (c *channelCodec) segments(row0, n int, fn func(gi, r, e int)) {
	for r := row0; r < row0+n; {
		gi := r / c.group
		e := min(row0+n, (gi+1)*c.group)
		fn(gi, r, e)
		r = e
	}
}

// codes returns the packed codes of rows [r, e) of token group gi.
func (c *channelCodec) codes(blk []byte, gi, r, e int) []byte {
	codes := blk[c.dim*c.meta:]
	return codes[(r-gi*c.group)*c.rowCode : (e-gi*c.group)*c.rowCode]
}

// rawCodes unpacks the 2-bit codes of rows [r, e) of token group gi into
// dst as 0..3, unscaled: one call for all the rows (8- and 4-bit codes are
// read in place instead).
func (c *channelCodec) rawCodes(dst []float32, blk []byte, gi, r, e int) {
	simd.U2ToF32(dst, c.codes(blk, gi, r, e), 1, 0)
}

// Decode converts each row with the per-channel scales and zeros of its
// group in one call: code·s[ch] + z[ch], the product rounded first.
func (c *channelCodec) Decode(dst []float32, tile []byte, row0, n int) {
	var sb, zb [512]float32
	s, z := scratch(sb[:], c.dim), scratch(zb[:], c.dim)
	c.segments(row0, n, func(gi, r, e int) {
		blk := tile[gi*c.groupBytes:][:c.groupBytes]
		c.groupMeta(s, z, blk)
		for t := r; t < e; t++ {
			row := dst[(t-row0)*c.dim : (t-row0+1)*c.dim]
			src := c.codes(blk, gi, t, t+1)
			switch c.bits {
			case 8:
				simd.U8ToF32Vec(row, src, s, z)
			case 4:
				simd.U4ToF32Vec(row, src, s, z)
			case 2:
				simd.U2ToF32Vec(row, src, s, z)
			}
		}
	})
}

// buffers carves the per-call buffers of the channel codec's Scores
// and Accumulate from one pooled chunk (stack arrays would be zeroed on
// every call, which costs as much as the kernels on a page of 16 rows).
func (c *channelCodec) buffers(nq int) (s, z, qs, k []float32, pooled *chunk) {
	buf, pooled := chunkBuf(2*c.dim + nq*c.dim + nq)
	s, z = buf[:c.dim], buf[c.dim:2*c.dim]
	qs, k = buf[2*c.dim:(2+nq)*c.dim], buf[(2+nq)*c.dim:]
	return s, z, qs, k, pooled
}

// Scores uses q·x̂ = (q⊙s)·code + q·z per token group: the queries are
// scaled once per group; 8- and 4-bit codes are read in place by the code
// kernels, 2-bit ones unpacked a chunk at a time.
func (c *channelCodec) Scores(dst []float32, ldd int, q []float32, nq int, tile []byte, row0, n int) {
	s, z, qs, k, pooled := c.buffers(nq)
	defer releaseChunk(pooled)
	var rows []float32
	step := chunkRows(c.dim)
	if c.bits == 2 {
		var rp *chunk
		rows, rp = chunkBuf(c.dim * min(n, step))
		defer releaseChunk(rp)
	}
	c.segments(row0, n, func(gi, r, e int) {
		blk := tile[gi*c.groupBytes:][:c.groupBytes]
		c.groupMeta(s, z, blk)
		for i := 0; i < nq; i++ {
			qi := q[i*c.dim : (i+1)*c.dim]
			simd.MulF32(qs[i*c.dim:(i+1)*c.dim], qi, s)
			k[i] = simd.DotF32(qi, z)
		}
		switch c.bits {
		case 8, 4:
			scoresCodes(c.bits, dst[r-row0:], ldd, qs, c.dim, nq, c.dim, c.codes(blk, gi, r, e), c.rowCode, e-r)
		default:
			for t := r; t < e; t += step {
				m := min(step, e-t)
				c.rawCodes(rows[:m*c.dim], blk, gi, t, t+m)
				simd.ScoresF32(dst[t-row0:], ldd, qs, nq, c.dim, rows[:m*c.dim], m)
			}
		}
		// e−r adds per query (a few per row): no kernel call pays.
		for i := 0; i < nq; i++ {
			d := dst[i*ldd+r-row0 : i*ldd+e-row0]
			for j := range d {
				d[j] += k[i]
			}
		}
	})
}

// Accumulate uses Σ_j w_j x̂_j = s ⊙ Σ_j w_j code_j + z·Σ_j w_j per token
// group, with 8- and 4-bit codes read in place.
func (c *channelCodec) Accumulate(acc []float32, w []float32, ldw int, nq int, tile []byte, row0, n int) {
	s, z, tmp, bias, pooled := c.buffers(nq)
	defer releaseChunk(pooled)
	clear(bias)
	var rows []float32
	step := chunkRows(c.dim)
	if c.bits == 2 {
		var rp *chunk
		rows, rp = chunkBuf(c.dim * min(n, step))
		defer releaseChunk(rp)
	}
	c.segments(row0, n, func(gi, r, e int) {
		blk := tile[gi*c.groupBytes:][:c.groupBytes]
		c.groupMeta(s, z, blk)
		clear(tmp)
		wr := w[r-row0:]
		switch c.bits {
		case 8, 4:
			accumulateCodes(c.bits, tmp, c.dim, bias, wr, ldw, nq, c.dim, c.codes(blk, gi, r, e), c.rowCode, e-r)
		default:
			for t := r; t < e; t += step {
				m := min(step, e-t)
				c.rawCodes(rows[:m*c.dim], blk, gi, t, t+m)
				simd.AccumulateF32(tmp, w[t-row0:], ldw, nq, c.dim, rows[:m*c.dim], m)
			}
		}
		for i := 0; i < nq; i++ {
			var wsum float32
			for _, v := range w[i*ldw+r-row0 : i*ldw+e-row0] {
				wsum += v
			}
			a := acc[i*c.dim : (i+1)*c.dim]
			simd.MulAddF32(a, s, tmp[i*c.dim:(i+1)*c.dim])
			simd.AxpyF32(a, wsum, z)
		}
	})
}

// IntParameters describes an integer format's quantizer, for tests and tools.
type IntParameters struct {
	Bits, Group  int // Group 0: the whole row
	Channel, Sym bool
}

// IntParams returns the parameters of an int format (zero for other formats).
func IntParams(f Format) IntParameters {
	if x, ok := f.(intFormat); ok {
		return IntParameters{Bits: x.bits, Group: x.group, Channel: x.channel, Sym: x.sym}
	}
	return IntParameters{}
}
