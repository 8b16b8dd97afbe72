package calibrate

import (
	"context"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// RunOptions configure Record.
type RunOptions struct {
	Record RecordOptions
	// Workers bounds the CPU backend's goroutines (0: GOMAXPROCS).
	Workers int
	// Backend runs the model (nil: the CPU backend).
	Backend backend.Backend
	// Progress, when set, is called after each sample with the samples
	// done and the total.
	Progress func(done, total int)
}

// Record runs m over every sample of data (one forward batch each, into
// an fp16 cache) and returns the recorder that watched the keys and values.
// It stops at the first sample boundary after ctx is done.
func Record(ctx context.Context, m *runtime.Model, data *Data, opts RunOptions) (*Recorder, error) {
	rec := NewRecorder(m, opts.Record)
	r, err := runtime.NewRunner(m, runtime.RunnerOptions{Backend: opts.Backend, Workers: opts.Workers, Observer: rec})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	l, err := kvcache.NewLayout(m.Geometry(), quant.NewSpec("fp16", quant.FP16, quant.FP16), 0)
	if err != nil {
		return nil, err
	}
	longest := 0
	for _, s := range data.Samples {
		longest = max(longest, len(s))
	}
	cache, err := r.NewCache(l, kvcache.Options{Blocks: l.BlocksFor(longest)})
	if err != nil {
		return nil, err
	}
	for i, s := range data.Samples {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := cache.AddSeq(0); err != nil {
			return nil, err
		}
		if _, err := r.Forward(ctx, []runtime.Entry{{Cache: cache, Seq: 0, Tokens: s, Logits: runtime.NoLogits}}); err != nil {
			return nil, fmt.Errorf("calibrate: sample %d of %d: %w", i+1, len(data.Samples), err)
		}
		if err := cache.Remove(0); err != nil {
			return nil, err
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(data.Samples))
		}
	}
	return rec, nil
}

// FitCodebooks fits KVQuant levels (format f, a kvquant format such as
// "kvquant4") per layer to the pre-RoPE keys and the values the recorder
// kept (RecordOptions.KeepTokens): plain k-means, as KVQuant's fit without
// Fisher weights (kvq has no gradients).
func FitCodebooks(rec *Recorder, f quant.Format, bits int) (*quant.KVQuantCodebooks, error) {
	cb := &quant.KVQuantCodebooks{Bits: bits, Layers: map[string]quant.KVQuantLayerSet{}}
	for l := range rec.layers {
		var set quant.KVQuantLayerSet
		for side, key := range []bool{true, false} {
			var samples []float32
			for _, c := range rec.kept[l][side] {
				rows := make([]float32, 0, c.n*rec.dim)
				for h := range rec.heads {
					rows = rows[:0]
					w := rec.heads * rec.dim
					for t := range c.n {
						rows = append(rows, c.rows[t*w+h*rec.dim:t*w+(h+1)*rec.dim]...)
					}
					s, err := quant.KVQuantSamples(f, key, rows, rec.dim)
					if err != nil {
						return nil, err
					}
					samples = append(samples, s...)
				}
			}
			levels, err := quant.FitKVQuantCodebook(samples, nil, bits)
			if err != nil {
				return nil, fmt.Errorf("calibrate: layer %d %s codebook: %w (record more tokens)", l, map[bool]string{true: "keys", false: "values"}[key], err)
			}
			if key {
				set.Keys = levels
			} else {
				set.Values = levels
			}
		}
		cb.Layers[fmt.Sprint(l)] = set
	}
	return cb, nil
}
