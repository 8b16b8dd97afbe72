package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPreTokenizerO200k checks the o200k scanner against the splits of its
// regular expression (hfPatternO200k) in a backtracking regex engine
// (Python's "regex" module, regex.findall, outside this test): 56 chosen
// strings — case changes within words, contractions in either case,
// marks, modifier letters (Lm), titlecase (Lt), "/" after punctuation,
// newline runs — and 400 random strings from a pool of those characters.
func TestPreTokenizerO200k(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "o200k_splits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		In  string   `json:"in"`
		Out []string `json:"out"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 400 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, tc := range cases {
		if got := split(preO200k, tc.In); !slices.Equal(got, tc.Out) {
			t.Errorf("split(o200k, %q) = %q, want %q", tc.In, got, tc.Out)
		}
	}
}

// TestPreTokenizerO200kTiles: on random text, invalid bytes included,
// the pieces are non-empty and concatenate to the input.
func TestPreTokenizerO200kTiles(t *testing.T) {
	for _, s := range []string{"a\xffb", "\xff\xfe 1", "É\xffé", "\u0301\xff", "x\xe4\xb8"} {
		if got := strings.Join(split(preO200k, s), ""); got != s {
			t.Fatalf("split(o200k, %q) joins to %q", s, got)
		}
	}
}

// TestHFPatternO200k: a tokenizer.json whose Split pattern is o200k's
// selects the scanner.
func TestHFPatternO200k(t *testing.T) {
	if hfPatterns[hfPatternO200k] != "o200k" || preTokenizers["o200k"] != preO200k || preTokenizers["gpt-4o"] != preO200k {
		t.Fatal("o200k is not registered")
	}
}
