package cmdutil

import (
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
