package tensor

import (
	"errors"
	"testing"
)

// TestPackedDTypes: the GGML block dtypes' names, block sizes and row
// bytes, and Validate's checks of their rows.
func TestPackedDTypes(t *testing.T) {
	for _, c := range []struct {
		dt            DType
		name          string
		values, bytes int
	}{
		{Q80, "Q8_0", 32, 34}, {Q40, "Q4_0", 32, 18}, {Q41, "Q4_1", 32, 20}, {Q50, "Q5_0", 32, 22},
		{Q51, "Q5_1", 32, 24}, {Q2K, "Q2_K", 256, 84}, {Q3K, "Q3_K", 256, 110}, {Q4K, "Q4_K", 256, 144},
		{Q5K, "Q5_K", 256, 176}, {Q6K, "Q6_K", 256, 210}, {IQ4NL, "IQ4_NL", 32, 18},
		{IQ4XS, "IQ4_XS", 256, 136}, {MXFP4, "MXFP4", 32, 17},
	} {
		if !c.dt.Packed() || c.dt.String() != c.name {
			t.Errorf("%v: Packed %v, String %q, want true, %q", c.dt, c.dt.Packed(), c.dt.String(), c.name)
		}
		if v, b := c.dt.Block(); v != c.values || b != c.bytes {
			t.Errorf("%s: Block() = %d, %d, want %d, %d", c.name, v, b, c.values, c.bytes)
		}
		if got := c.dt.RowBytes(4 * c.values); got != 4*c.bytes {
			t.Errorf("%s: RowBytes(%d) = %d, want %d", c.name, 4*c.values, got, 4*c.bytes)
		}
		ok := &Weight{Name: "w", DType: c.dt, Rows: 2, Cols: c.values, Raw: make([]byte, 2*c.bytes)}
		if err := ok.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		for _, bad := range []*Weight{
			{Name: "w", DType: c.dt, Rows: 2, Cols: c.values + 16, Raw: make([]byte, 2*c.bytes)},
			{Name: "w", DType: c.dt, Rows: 2, Cols: c.values, Raw: make([]byte, 2*c.bytes-1)},
		} {
			if err := bad.Validate(); !errors.Is(err, ErrShape) {
				t.Errorf("%s [%d %d] with %d bytes: %v, want ErrShape", c.name, bad.Rows, bad.Cols, len(bad.Raw), err)
			}
		}
	}
	for _, dt := range []DType{F32, F16, BF16} {
		if dt.Packed() {
			t.Errorf("%v reports Packed", dt)
		}
	}
}
