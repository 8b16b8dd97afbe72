package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// machineDirs are the beginnings of absolute paths that exist only on some
// machine: home directories and the development machine's work tree. CI
// has only the repository clone, with ../shared beside it; tests reach
// shared fixtures through testutil.SharedPath. They are spelt in pieces so
// that this file does not match itself.
var machineDirs = []string{"/" + "work/", "/" + "home/", "/" + "Users/", "/" + "root/"}

// TestNoMachinePaths fails when a string literal in any .go file of the
// repository (tests, generators and testdata included) holds an absolute
// path of a development machine.
func TestNoMachinePaths(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == ".git" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".go") {
			return nil
		}
		files++
		for _, hit := range machinePaths(t, fset, path) {
			rel, _ := filepath.Rel(root, hit.file)
			t.Errorf("%s:%d: string literal %s holds the machine path %q: find shared files with testutil.SharedPath (../shared beside the repository) and write temporary ones under t.TempDir()",
				filepath.ToSlash(rel), hit.line, hit.lit, hit.dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("scanned only %d .go files under %s", files, root)
	}
}

// TestMachinePathsFound checks that the scan sees literals of every kind
// (interpreted, raw, in tests and in constants) and ignores comments.
func TestMachinePathsFound(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\n" +
		"// A comment may name " + machineDirs[0] + "shared.\n" +
		"const a = \"" + machineDirs[0] + "shared/models\"\n" +
		"var b = `" + machineDirs[1] + "dev/x`\n" +
		"var c = []string{\"relative/../shared\", \"https://example.com" + machineDirs[1] + "\"}\n"
	path := filepath.Join(dir, "p_test.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	hits := machinePaths(t, token.NewFileSet(), path)
	var lines []int
	for _, h := range hits {
		lines = append(lines, h.line)
	}
	if len(hits) != 2 || hits[0].line != 4 || hits[1].line != 5 {
		t.Errorf("machinePaths found lines %v, want [4 5]", lines)
	}
}

type hit struct {
	file, lit, dir string
	line           int
}

// machinePaths returns the string literals of a Go file that hold a
// machine path: one that starts with a machineDirs entry, or has one after
// a quote, space, '=', ':', '(' or ',' (as in a command line, "KEY=/path"
// or a PATH list); a URL's path does not count.
func machinePaths(t *testing.T, fset *token.FileSet, path string) []hit {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil
	}
	var hits []hit
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		for _, d := range machineDirs {
			if i := strings.Index(s, d); i >= 0 && (i == 0 || strings.ContainsRune(" \t\n\"'=:(,", rune(s[i-1]))) {
				hits = append(hits, hit{file: path, lit: lit.Value, dir: d, line: fset.Position(lit.Pos()).Line})
				break
			}
		}
		return true
	})
	return hits
}

// repoRoot returns the nearest directory above the working directory that
// holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}
