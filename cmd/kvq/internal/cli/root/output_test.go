package root

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputTargetsCheckedFirst: every output flag is checked for
// writability before any work (no model is loaded), the error names the
// flag and the user's path, and nothing is left behind.
func TestOutputTargetsCheckedFirst(t *testing.T) {
	work := t.TempDir()
	file := filepath.Join(work, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "a-dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(work, "no", "such", "dir")
	under := filepath.Join(file, "sub") // a path below a regular file
	before, _ := os.ReadDir(work)
	type target struct {
		cmd  []string
		flag string
		dir  bool // the flag names a directory (created when missing)
	}
	var targets []target
	for _, ev := range [][]string{{"eval"}, {"probe", "eval"}} {
		for _, f := range []string{"--junit", "--report", "--log-samples"} {
			targets = append(targets, target{ev, f, false})
		}
		targets = append(targets, target{ev, "--plot", true}, target{ev, "--out", true})
	}
	targets = append(targets,
		target{[]string{"calibrate"}, "--stats", false},
		target{[]string{"calibrate"}, "--out", true},
		target{[]string{"calibrate"}, "--plot", true},
		target{[]string{"calibrate", "stats"}, "--plot", true},
		target{[]string{"bench"}, "--plot", true},
		target{[]string{"plan"}, "--gates-out", false},
	)
	for _, tg := range targets {
		var bad []string
		if tg.dir {
			bad = []string{under, filepath.Join(under, "deeper"), file}
		} else {
			bad = []string{filepath.Join(missing, "out.x"), filepath.Join(under, "out.x"), dir}
		}
		for _, p := range bad {
			args := append(append([]string(nil), tg.cmd...), tg.flag, p)
			code, _, stderr := run(t, args...)
			if code != 2 || !strings.Contains(stderr, tg.flag+" "+p+":") || strings.Contains(stderr, ".tmp") || strings.Contains(stderr, "kvq-write-check") {
				t.Errorf("kvq %s: exit %d, stderr %q; want exit 2 naming %s %s", strings.Join(args, " "), code, stderr, tg.flag, p)
			}
			if tg.dir && p == under && !strings.Contains(stderr, file+" is not a directory") {
				t.Errorf("kvq %s: %q does not say which part of the path is a file", strings.Join(args, " "), stderr)
			}
			if strings.Contains(stderr, "built-in") {
				t.Errorf("kvq %s: loaded a model before checking %s", strings.Join(args, " "), tg.flag)
			}
		}
	}
	// estimate's --plot is a file with an extension.
	for _, p := range []string{filepath.Join(missing, "kv.svg"), filepath.Join(under, "kv.png")} {
		if code, _, stderr := run(t, "estimate", "--model", "llama-3.1-8b", "--plot", p); code != 2 || !strings.Contains(stderr, "--plot "+p+":") {
			t.Errorf("kvq estimate --plot %s: exit %d, %q", p, code, stderr)
		}
	}
	after, _ := os.ReadDir(work)
	if len(after) != len(before) {
		t.Errorf("the checks left files behind: %v", after)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the checks left files in %s: %v", dir, ents)
	}
}
