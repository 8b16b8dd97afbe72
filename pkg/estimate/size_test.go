package estimate

import (
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"80GiB", 80 << 30},
		{"58.11GiB", 62395137392},
		{"58.11 GiB", 62395137392},
		{"79.19gib", 85029615042},
		{"80GB", 80e9},
		{"80G", 80 << 30},
		{"512MiB", 512 << 20},
		{"1.5TiB", 3 << 39},
		{"0.25GiB", 1 << 28},
		{"4096B", 4096},
		{"0B", 0},
		{"1KB", 1000},
	} {
		got, err := ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"80", ErrSize},
		{"", ErrSize},
		{"GiB", ErrSize},
		{"-1GiB", ErrSize},
		{"1e3GiB", ErrSize},
		{"1.2.3GiB", ErrSize},
		{"80 apples", ErrSize},
		{"99999999999TiB", ErrOverflow},
	} {
		if _, err := ParseBytes(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("ParseBytes(%q) error = %v, want %v", tc.in, err, tc.want)
		}
	}
}

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"8192", 8192}, {"32k", 32768}, {"128K", 131072}, {"1M", 1 << 20}, {"10,000", 10000}, {"10_000", 10000}, {"0", 0},
	} {
		got, err := ParseCount(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseCount(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"lots", ErrSize}, {"1.5k", ErrSize}, {"", ErrSize},
		{"9223372036854775808", ErrOverflow}, {"9007199254740992k", ErrOverflow},
	} {
		if _, err := ParseCount(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("ParseCount(%q) error = %v, want %v", tc.in, err, tc.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {576, "576 B"}, {2 << 20, "2.00 MiB"}, {62395137392, "58.11 GiB"}, {-3 << 30, "-3.00 GiB"}, {5 << 40, "5.00 TiB"},
	} {
		if got := FormatBytes(tc.in); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
	}{
		{"0.19", Version{0, 19, 0}}, {"0.6.3", Version{0, 6, 3}}, {"v0.10.1.post1", Version{0, 10, 1}}, {"0.6.3rc1", Version{0, 6, 3}},
	} {
		got, err := ParseVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "latest", "1", "0.x", "1a.2"} {
		if _, err := ParseVersion(in); !errors.Is(err, ErrPlan) {
			t.Errorf("ParseVersion(%q) error = %v, want ErrPlan", in, err)
		}
	}
}
