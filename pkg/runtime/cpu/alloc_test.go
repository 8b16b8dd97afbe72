package cpu_test

import (
	"testing"

	"github.com/kvqlabs/kvq/internal/testutil"

	"github.com/kvqlabs/kvq/pkg/quant"
)

// TestAttendAllocs checks that a decode step's attention over a long
// context allocates nothing once its scratch is warm. It runs on one
// worker, where the count does not depend on how the helpers of a fan-out
// are scheduled; the closure attend used to pass to par.Workers.For was
// allocated whatever the number of workers (it escapes), so this is the
// check that it stays gone.
func TestAttendAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector's sync.Pool drops items at random; make test counts allocations in its runs without -race")
	}
	for _, name := range []string{"fp16", "int4", "q8_0", "kivi2"} {
		f, err := quant.Formats().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := newStepBench(f, 2048, 1)
		if err != nil {
			t.Fatal(err)
		}
		sb.step()
		if n := testing.AllocsPerRun(50, sb.step); n != 0 {
			t.Errorf("%s: a decode step's attention over 2048 positions allocates %v times, want 0", name, n)
		}
	}
}
