package estimate

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// Byte units.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

var byteUnits = map[string]int64{
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"k":   KiB,
	"ki":  KiB,
	"kib": KiB,
	"m":   MiB,
	"mi":  MiB,
	"mib": MiB,
	"g":   GiB,
	"gi":  GiB,
	"gib": GiB,
	"t":   TiB,
	"ti":  TiB,
	"tib": TiB,
}

// ParseBytes parses a memory size with a unit: "80GiB", "58.11 GiB", "80GB"
// (decimal, 10^9), "512MiB", "1.5T" (a bare K, M, G or T is binary, as the
// engines print GiB). The number may have a fraction; the result is rounded
// down to whole bytes, computed exactly (no floating point). A unit is
// required so that "80" is not silently read as 80 bytes; "B" names bytes.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return unicode.IsLetter(r) })
	if i < 0 {
		return 0, fmt.Errorf("%w %q: add a unit (B, MiB, GiB, GB, ...)", ErrSize, s)
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%w %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", ErrSize, s, t[i:])
	}
	r, err := parseDecimal(num)
	if err != nil {
		return 0, fmt.Errorf("%w %q: %v", ErrSize, s, err)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	return ratFloor(r, s)
}

// parseDecimal parses a non-negative decimal number exactly.
func parseDecimal(num string) (*big.Rat, error) {
	if num == "" {
		return nil, fmt.Errorf("no number")
	}
	for _, c := range num {
		if c != '.' && (c < '0' || c > '9') {
			return nil, fmt.Errorf("%q is not a non-negative decimal number", num)
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return nil, fmt.Errorf("%q is not a decimal number", num)
	}
	return r, nil
}

// ratFloor rounds a non-negative rational down to an int64.
func ratFloor(r *big.Rat, what string) (int64, error) {
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if !q.IsInt64() {
		return 0, fmt.Errorf("%w: %s is larger than %d bytes", ErrOverflow, what, int64(math.MaxInt64))
	}
	return q.Int64(), nil
}

// ParseCount parses a token or request count: "8192", "32k" or "128K"
// (×1024), "1M" (×1024²), "10,000" (thousands separators allowed).
func ParseCount(s string) (int64, error) {
	t := strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), "_", "")
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "k") || strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "m") || strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%w: %q does not fit in int64", ErrOverflow, s)
		}
		return 0, fmt.Errorf("%w %q: not an integer (examples: 8192, 32k)", ErrSize, s)
	}
	v, err := mul(n, mult)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", err, s)
	}
	return v, nil
}

// FormatBytes prints n with a binary unit and two decimals ("58.11 GiB",
// "2.00 MiB"); values below 1 KiB are printed in bytes ("576 B").
func FormatBytes(n int64) string {
	neg := n < 0
	u := uint64(n)
	if neg {
		u = uint64(-n)
	}
	sign := ""
	if neg {
		sign = "-"
	}
	units := []struct {
		name string
		size uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, un := range units {
		if u >= un.size {
			return fmt.Sprintf("%s%.2f %s", sign, float64(u)/float64(un.size), un.name)
		}
	}
	return fmt.Sprintf("%s%d B", sign, u)
}

// FormatGiB prints n in GiB with two decimals, as vLLM logs memory
// ("58.11 GiB").
func FormatGiB(n int64) string {
	return fmt.Sprintf("%.2f GiB", float64(n)/float64(GiB))
}

// mul returns a·b for non-negative a and b, or ErrOverflow.
func mul(a, b int64) (int64, error) {
	if a < 0 || b < 0 {
		return 0, fmt.Errorf("%w: negative operand %d × %d", ErrPlan, a, b)
	}
	if a != 0 && b > math.MaxInt64/a {
		return 0, fmt.Errorf("%w: %d × %d", ErrOverflow, a, b)
	}
	return a * b, nil
}

// add returns a+b for non-negative a and b, or ErrOverflow.
func add(a, b int64) (int64, error) {
	if a < 0 || b < 0 {
		return 0, fmt.Errorf("%w: negative operand %d + %d", ErrPlan, a, b)
	}
	if a > math.MaxInt64-b {
		return 0, fmt.Errorf("%w: %d + %d", ErrOverflow, a, b)
	}
	return a + b, nil
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0 and b > 0 without overflowing.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// checked accumulates the first arithmetic error of a computation, so that
// formulas read as formulas: c.mul(c.add(x, y), z), then check c.err.
type checked struct{ err error }

func (c *checked) mul(a, b int64) int64 {
	if c.err != nil {
		return 0
	}
	v, err := mul(a, b)
	c.err = err
	return v
}

func (c *checked) add(a, b int64) int64 {
	if c.err != nil {
		return 0
	}
	v, err := add(a, b)
	c.err = err
	return v
}
