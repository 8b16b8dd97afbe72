package runtime_test

import (
	"errors"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"

	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

func asFull(err error, fe **kvcache.FullError) bool { return errors.As(err, fe) }

func mustSpec(t testing.TB, s string) quant.Spec {
	t.Helper()
	spec, err := quant.Formats().ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}
