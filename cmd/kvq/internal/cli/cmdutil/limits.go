package cmdutil

import (
	"fmt"

	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/quant"
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
