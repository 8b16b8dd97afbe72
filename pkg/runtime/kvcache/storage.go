package kvcache

import (
	"fmt"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// Storage is the memory of one cache, owned by a compute backend: the tiles
// of the block pool (for every layer, K and V, and KV head, a tile of
// BlockTokens rows per block of the layer's pool, in the side's format;
// see StorageParams.SlideBlocks) and the per-sequence
// fp16 windows, in slots. The Cache decides what goes where; the backend
// writes and reads it (its WriteKV and Attention ops execute a Plan).
//
// Methods are called by the Cache's management API only, never
// concurrently with each other or with the backend's ops on the same
// storage.
type Storage interface {
	// CopyBlock copies every tile of block src into block dst.
	CopyBlock(dst, src int)
	// AllocWindow returns a free window slot, growing the storage as
	// needed; FreeWindow returns one. A window holds, per layer, side and
	// KV head, the side's WindowRows fp16 rows.
	AllocWindow() (int, error)
	FreeWindow(w int)
	// CopyWindow copies window slot src into slot dst.
	CopyWindow(dst, src int)
	// Restore writes back the window rows that the ops of kind OpSave
	// saved since the last Discard (newest first); Discard forgets them.
	Restore()
	Discard()
	// Read decodes positions [from, to) of KV head h of layer's keys (key
	// true) or values, as attention reads them (pre-RoPE keys rotated to
	// their positions), into dst ((to-from)·HeadDim values). runs, from
	// Cache.Runs, cover at least [from, to) and win is the sequence's
	// window slot.
	Read(dst []float32, layer int, key bool, h int, runs []Run, win, from, to int)
	// HeldBytes is the size of every buffer the storage holds for tiles and
	// windows (not codec state), to check the Layout's accounting.
	HeldBytes() int64
}

// Poisoner is implemented by storages that can overwrite a block with
// garbage; with Options.PoisonFreed the cache poisons every block it frees,
// so that a read of stale data shows up (as NaN or noise) in tests.
type Poisoner interface {
	Poison(block int)
}

// Allocator makes storage; compute backends implement it.
type Allocator interface {
	NewStorage(p StorageParams) (Storage, error)
}

// StorageParams describe the storage of one cache.
type StorageParams struct {
	Layout *Layout
	// Codecs are the cache's own codecs, which the storage encodes and
	// decodes with. The pointer stays the same for the cache's life; its
	// contents are renewed when a step that set learned state rolls back.
	Codecs *Codecs
	// Blocks is the pool size.
	Blocks int
	// SlideBlocks is the sliding layers' pool (LayerLayout.Slide) with
	// window-only storage, 0 otherwise. Such a layer holds SlideBlocks
	// tiles per head, for block ids Blocks .. Blocks+SlideBlocks-1; the
	// other layers hold Blocks tiles, for ids 0 .. Blocks-1. CopyBlock and
	// Poison act on the layers whose pool the id belongs to.
	SlideBlocks int
	// RoPE rotates consecutive key head vectors (len(rows)/HeadDim of
	// them) at positions pos0, pos0+1, ... in place, on the host. Set when
	// the layout stores pre-RoPE keys; RoPEFreqs and RoPENeoX describe the
	// same rotation (inverse frequencies, pairing) for backends that
	// rotate on their device.
	RoPE      func(rows []float32, pos0 int)
	RoPEFreqs []float64
	RoPENeoX  bool
}

// Codecs are one cache's codecs, per layer, side (0 keys, 1 values) and KV
// head. Formats with learned state (quant.Stateful) are given fresh state
// per cache, so nothing one cache learns from its data reaches another.
type Codecs struct {
	Sides [][2][]quant.Codec
	// Formats are the (fresh) formats the codecs were made from.
	Formats [][2]quant.Format
	// Stateful reports whether some format learns state from data.
	Stateful bool
}

// newCodecs makes a cache's codecs for layout l.
func newCodecs(l *Layout) (*Codecs, error) {
	cs := &Codecs{Sides: make([][2][]quant.Codec, len(l.Layers)), Formats: make([][2]quant.Format, len(l.Layers))}
	fresh := map[quant.Format]quant.Format{}
	for i := range l.Layers {
		for j, side := range []*Side{&l.Layers[i].K, &l.Layers[i].V} {
			if side.Codecs == nil {
				continue
			}
			f := side.Format
			if st, ok := f.(quant.Stateful); ok {
				cs.Stateful = true
				g, ok := fresh[f]
				if !ok {
					g = st.Fresh()
					fresh[f] = g
				}
				f = g
			} else {
				// Stateless codecs hold no mutable state: share the
				// layout's.
				cs.Sides[i][j] = side.Codecs
				cs.Formats[i][j] = f
				continue
			}
			cs.Formats[i][j] = f
			cs.Sides[i][j] = make([]quant.Codec, l.KVHeads)
			for h := range cs.Sides[i][j] {
				c, err := f.NewCodec(quant.CodecParams{Dim: l.HeadDim, Layer: i, Head: h, Key: j == 0})
				if err != nil {
					return nil, fmt.Errorf("layer %d: %w", i, err)
				}
				cs.Sides[i][j][h] = c
			}
		}
	}
	return cs, nil
}

// renew replaces c's contents with fresh codecs (after a rolled-back step
// that taught them from its data).
func (c *Codecs) renew(l *Layout) error {
	n, err := newCodecs(l)
	if err != nil {
		return err
	}
	*c = *n
	return nil
}
