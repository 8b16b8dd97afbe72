package root

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/spf13/cobra"
)

// runWidth runs kvq with stdout a terminal of width columns (0: not a
// terminal).
func runWidth(t *testing.T, width int, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Width: width}, Version: "test"}
	code := Run(context.Background(), f, args)
	return code, out.String()
}

func widest(s string) (int, string) {
	n, line := 0, ""
	for _, l := range strings.Split(s, "\n") {
		if w := utf8.RuneCountInString(l); w > n {
			n, line = w, l
		}
	}
	return n, line
}

// TestFitsTerminal: help and the listing tables fit 100 columns when
// stdout is not a terminal; flag help wraps to a terminal's width; --wide
// and JSON keep every column.
func TestFitsTerminal(t *testing.T) {
	for _, p := range append(commandPaths(NewCmd(testFactory()), nil), nil) {
		args := append(append([]string(nil), p...), "--help")
		_, out := runWidth(t, 0, args...)
		if n, l := widest(out); n > 100 {
			t.Errorf("kvq %s: a line of %d columns: %q", strings.Join(args, " "), n, l)
		}
		// On an 80-column terminal the flag help wraps to it.
		_, out = runWidth(t, 80, args...)
		if i := strings.Index(out, "\nFlags:\n"); i >= 0 {
			flags, _, _ := strings.Cut(out[i+len("\nFlags:\n"):], "\n\n")
			for _, l := range strings.Split(flags, "\n") {
				if n := utf8.RuneCountInString(l); n > 80 && strings.Contains(strings.TrimSpace(l), " ") { // one word longer than the room stays whole
					t.Errorf("kvq %s at 80 columns: flag help line of %d: %q", strings.Join(args, " "), n, l)
				}
			}
		}
	}
	for _, args := range [][]string{
		{"formats"}, {"formats", "--head-dim", "64"}, {"estimate", "--list-models"}, {"estimate", "--list-gpus"},
		{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100"},
		{"estimate", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8"},
		{"estimate", "--model", "gemma-2-27b", "--gpu", "l4"},
	} {
		code, out := runWidth(t, 0, args...)
		if n, l := widest(out); code != 0 || n > 100 {
			t.Errorf("kvq %s: exit %d, a line of %d columns: %q", strings.Join(args, " "), code, n, l)
		}
	}
	// --wide keeps every column on one line per row.
	if _, out := runWidth(t, 0, "formats", "--wide"); !regexp.MustCompile(`(?m)^format +bits/value +K bytes +V bytes +fp16 window +needs +what$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^fp8-e4m3 .* calibrated scales \(vLLM warns at 1.0\) +OCP fp8 E4M3 .*per-tensor scale 1.0$`).MatchString(out) {
		t.Errorf("formats --wide:\n%.600s", out)
	}
	if _, out := runWidth(t, 0, "estimate", "--list-models", "--wide"); !strings.Contains(out, "ARCH") || !strings.Contains(out, "VERIFIED") {
		t.Errorf("estimate --list-models --wide lacks columns:\n%.300s", out)
	}
	if _, out := runWidth(t, 0, "estimate", "--list-models", "-o", "json"); !strings.Contains(out, `"verified"`) && !strings.Contains(out, `"Verified"`) {
		t.Errorf("estimate --list-models -o json lacks verified:\n%.300s", out)
	}
}

// TestUsageLines: a flag a usage line shows outside brackets is one cobra
// requires; the root and probe have examples; kvq version and kvq
// --version print the same line.
func TestUsageLines(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		use := regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(c.Use, "")
		for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(use, -1) {
			f := c.Flags().Lookup(m[1])
			if f == nil {
				t.Errorf("kvq %s: usage line names --%s, which it does not have", c.CommandPath(), m[1])
				continue
			}
			if _, req := f.Annotations[cobra.BashCompOneRequiredFlag]; !req {
				t.Errorf("kvq %s: usage line %q shows --%s as required, but it is optional", c.CommandPath(), c.Use, m[1])
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewCmd(testFactory()))
	for _, args := range [][]string{{"--help"}, {"probe", "--help"}} {
		if _, out := runWidth(t, 0, args...); !strings.Contains(out, "Examples:\n  kvq ") {
			t.Errorf("kvq %s has no examples", strings.Join(args, " "))
		}
	}
	_, v1 := runWidth(t, 0, "version")
	_, v2 := runWidth(t, 0, "--version")
	first, rest, _ := strings.Cut(v1, "\n")
	if first+"\n" != v2 || !strings.HasPrefix(v1, "kvq test") || !strings.Contains(v1, "backends cpu") {
		t.Errorf("kvq version = %q, kvq --version = %q; want the same first line", v1, v2)
	}
	if !strings.HasPrefix(rest, "cpu (available): ") || !strings.Contains(rest, "\ncuda (") {
		t.Errorf("kvq version after its first line = %q, want a line per registered backend (cpu, cuda)", rest)
	}
}

// wordSet is the set of the words of s.
func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// TestTablesFitTerminal: each command's default table output fits 100
// columns when stdout is not a terminal, wrapping long cells and notes or
// splitting a table's columns, with no word lost; --wide keeps each table
// on one line per row, as before.
func TestTablesFitTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in model")
	}
	t.Chdir(t.TempDir()) // kvq calibrate writes kvq-calibration here, its paths short
	// The runs are small (a few short samples): the layout is what is tested,
	// and make test runs this with the pure-Go kernels too.
	for _, tc := range []struct {
		args []string
		wide string // a line only --wide prints whole
		same bool   // the output is deterministic: fitted and wide have the same words
	}{
		{[]string{"plan", "--model", "llama-3.1-8b", "--gpu", "h100"}, `(?m)^STEP +ITEM +STATUS +DETAIL +COMMAND$`, true},
		{[]string{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100"}, ``, true},
		{[]string{"bench", "--num-prompts", "4", "--depths", "none", "--cache", "fp16,int4", "--input-len", "64", "--output-len", "16"},
			`(?m)^CACHE +LOAD +DONE .* ITL MED +E2EL MED +MAX CONC +RUNNING PEAK +KV PEAK +PREEMPT$`, false},
		{[]string{"eval", "--tasks", "copy", "-n", "1", "--chunks", "1", "--ctx", "128", "--no-speed"}, `(?m)^KLD by position \(.*\): fp8 .*; kivi2 [0-9. ]+$`, true},
		{[]string{"calibrate", "--force", "--samples", "2", "--seq-len", "64", "--ctx", "64", "--chunks", "2"}, ``, true},
		{[]string{"calibrate", "stats", "--samples", "2", "--seq-len", "64"}, `(?m)^K/V statistics \(.*channels: absmax > 4× the median channel's\)$`, true},
		{[]string{"calibrate", "audit", "--samples", "2", "--seq-len", "64", "--ctx", "64", "--chunks", "2"}, ``, true},
		{[]string{"inspect"}, ``, true},
	} {
		name := strings.Join(tc.args, " ")
		code, fitted := runWidth(t, 0, tc.args...)
		if n, l := widest(fitted); code != 0 || n > 100 {
			t.Errorf("kvq %s: exit %d, a line of %d columns: %q\n%s", name, code, n, l, fitted)
		}
		code, wide := runWidth(t, 0, append(tc.args, "--wide")...)
		if code != 0 || (tc.wide != "" && !regexp.MustCompile(tc.wide).MatchString(wide)) {
			t.Errorf("kvq %s --wide: exit %d, no line matching %s:\n%s", name, code, tc.wide, wide)
		}
		if tc.same {
			f, w := wordSet(fitted), wordSet(wide)
			for word := range w {
				if !f[word] {
					t.Errorf("kvq %s: %q is in the --wide output but not the fitted one", name, word)
				}
			}
			for word := range f {
				if !w[word] {
					t.Errorf("kvq %s: %q is in the fitted output but not the --wide one", name, word)
				}
			}
		}
	}
}
