// Package plan implements kvq plan: the rollout of a quantized KV cache as
// a checklist a team can act on. Step 1 asks whether the service is
// KV-bound (from a serving engine's Prometheus metrics and request
// lengths); step 2 lists the candidate caches with their memory, capacity
// and engine compatibility, FP8 first; then the exact engine flags, the
// kvq commands that check each candidate, the gates, and the fallback.
// Measured items come from earlier kvq calibrate, eval and bench outputs.
package plan

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Errors of the package.
var (
	ErrMetrics = errors.New("plan: bad metrics")
	ErrTrace   = kvqerr.New("plan: bad trace")
	ErrOptions = kvqerr.New("plan: bad options")
	ErrResults = kvqerr.New("plan: bad results")
)
