package cmdutil

import (
	"fmt"
	"io"

	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// CheckSpecLayers refuses, as a usage error naming flag, a cache spec whose
// per-layer overrides name layers a model of the given depth does not have
// (--cache int4,L99=fp16 on a 32-layer model), before any work starts.
func CheckSpecLayers(flag string, layers int, specs ...quant.Spec) error {
	for _, s := range specs {
		if err := s.CheckLayers(layers); err != nil {
			return FlagErrorf("%s: %w", flag, err)
		}
	}
	return nil
}

// CheckKVMemory refuses, as a usage error naming flag, a KV cache of need
// bytes larger than this machine's memory (the cgroup limit when lower), so
// that an impossible request is an error before it is allocated rather
// than an out-of-memory crash. what says what the cache holds ("5 prompt
// tokens and 1999999999 to generate"). Where the memory is unknown it
// checks nothing.
func CheckKVMemory(flag string, need int64, what string) error {
	total := PhysicalMemory()
	if total <= 0 || need <= total {
		return nil
	}
	return FlagErrorf("%s: a KV cache for %s needs %s, more than this machine's %s of memory", flag, what, gib(need), gib(total))
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// ParseSize parses flag's value v as a byte size ("8MiB", "80GB"): a
// value that does not parse is a usage error naming the flag and the units,
// without the parser's package prefix ("--max-body "0": ...", not
// "estimate: bad size").
func ParseSize(flag, v string) (int64, error) {
	b, err := estimate.ParseBytes(v)
	if err != nil {
		return 0, FlagErrorf("%s %q: not a size: add a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB or TB), as in 8MiB", flag, v)
	}
	return b, nil
}

// WarnSpecBlocks says on w, once per format, when a format of specs groups
// more values along a token's row than the model's head size holds (int4:g32
// on head size 8): the group is then the whole row, as the format's help
// says, which is not what the spelling asks for.
func WarnSpecBlocks(w io.Writer, flag string, g kvcache.Geometry, specs ...quant.Spec) {
	seen := map[string]bool{}
	for _, s := range specs {
		for l := range g.Layers {
			k, v := s.ForLayer(l, g.Layers)
			for i, f := range []quant.Format{k, v} {
				if f == nil {
					continue
				}
				t := f.Traits(i == 0)
				if t.Family != quant.FamilyInt || t.Axis != quant.AxisToken || t.Block <= g.HeadDim || seen[f.Name()] {
					continue
				}
				seen[f.Name()] = true
				fmt.Fprintf(w, "kvq: warning: %s %s: groups of %d values, but the model's head size is %d: each group is the whole row of %d\n",
					flag, f.Name(), t.Block, g.HeadDim, g.HeadDim)
			}
		}
	}
}
