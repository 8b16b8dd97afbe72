package cpu

import "testing"

// TestRunRows: an interruptible product's runs are multiples of stopRows
// of about stopWork multiply-adds, so that a decode step reads each
// goroutine's share of a small model's matrices in one run (runs of
// stopRows rows cost the Zen 5 a tenth of its decode speed) and a prefill
// keeps runs of stopRows rows.
func TestRunRows(t *testing.T) {
	for _, c := range []struct{ nt, cols, want int }{
		{1, 2048, 65472}, // 2^27/2048 = 65536 rows, whole multiples of 96
		{1, 8192, 16320},
		{1, 1 << 22, stopRows}, // never below stopRows
		{64, 4096, 480},
		{520, 256, 960},
		{512, 2048, stopRows},
		{600, 8192, stopRows},
	} {
		got := runRows(c.nt, c.cols)
		if got != c.want {
			t.Errorf("runRows(%d, %d) = %d, want %d", c.nt, c.cols, got, c.want)
		}
		if got%stopRows != 0 || (got > stopRows && int64(got)*int64(c.nt)*int64(c.cols) > stopWork) {
			t.Errorf("runRows(%d, %d) = %d: not a multiple of %d within %d multiply-adds", c.nt, c.cols, got, stopRows, stopWork)
		}
	}
}
