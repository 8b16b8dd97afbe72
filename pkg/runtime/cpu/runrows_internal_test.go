package cpu

import "testing"

// TestRunRows: an interruptible product's runs are multiples of stopRows
// of about stopWork multiply-adds, so that a decode step reads each
// goroutine's share of a small model's matrices in one run (runs of
// stopRows rows cost the Zen 5 a tenth of its decode speed) and a prefill
// keeps runs of stopRows rows.
func TestRunRows(t *testing.T) {
	for _, c := range []struct{ nt, cols, want int }{
		{1, 2048, 16320}, // 2^25/2048 = 16384 rows, whole multiples of 96
		{1, 8192, 4032},
		{1, 1 << 20, stopRows}, // never below stopRows
		{64, 4096, stopRows},
		{520, 256, 192},
		{512, 2048, stopRows},
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
