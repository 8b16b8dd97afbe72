package runtime_test

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

func asFull(err error, fe **kvcache.FullError) bool { return errors.As(err, fe) }
