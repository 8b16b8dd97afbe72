package depgraph

import (
	"fmt"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A rule constrains the imports of the packages it selects. Patterns name
// packages of this module by their path relative to the module root
// ("pkg/quant"), other modules by their full path
// ("github.com/olekukonko/tablewriter"), and the standard library as "std".
// A pattern ending in "/..." also matches every package below it, and
// "..." alone matches every package of the module.
type rule struct {
	name string
	why  string // the rule in words, printed with each violation
	// from selects the importing packages of this module, except those
	// matching except.
	from, except []string
	// allow, when set, lists everything the selected packages may import;
	// deny lists what they must not import.
	allow, deny []string
}

// rules is the import graph kvq keeps (docs/style.md, section A).
var rules = []rule{
	{
		name:  "quant-leaf",
		why:   "pkg/quant is a leaf over internal/simd: it imports only the standard library, internal/simd, internal/atomicfile (the codebook writer) and pkg/kvqerr (the input-error kind)",
		from:  []string{"pkg/quant"},
		allow: []string{"std", "internal/simd", "internal/atomicfile", "pkg/kvqerr"},
	},
	{
		name:  "kvqerr-leaf",
		why:   "pkg/kvqerr, the input-error kind every library may use, imports only the standard library",
		from:  []string{"pkg/kvqerr"},
		allow: []string{"std"},
	},
	{
		name:  "simd-leaf",
		why:   "internal/simd (under pkg/quant) imports only the standard library and golang.org/x/sys/cpu",
		from:  []string{"internal/simd"},
		allow: []string{"std", "golang.org/x/sys/cpu"},
	},
	{
		name:  "atomicfile-leaf",
		why:   "internal/atomicfile (under pkg/quant) imports only the standard library",
		from:  []string{"internal/atomicfile"},
		allow: []string{"std"},
	},
	{
		name: "libraries-not-cmd",
		why:  "no library or foundation imports the command layer: pkg/, internal/ and datasets/ sit below cmd/",
		from: []string{"pkg/...", "internal/...", "datasets/..."},
		deny: []string{"cmd/..."},
	},
	{
		name:  "internal-foundations",
		why:   "internal/ holds only foundations (SIMD kernels, worker pools, mmap, atomic files, test helpers, the repository checks): they import the standard library and golang.org/x/sys, and each other, never pkg/ or datasets/",
		from:  []string{"internal/..."},
		allow: []string{"std", "golang.org/x/sys/...", "internal/..."},
	},
	{
		name:   "cli-only-render",
		why:    "the command layer's rendering and progress bar (cmd/kvq/internal/render, cmd/kvq/internal/progressbar) are imported only by the kvq commands",
		from:   []string{"..."},
		except: []string{"cmd/kvq/internal/cli/...", "cmd/kvq/internal/render"},
		deny:   []string{"cmd/kvq/internal/render/...", "cmd/kvq/internal/progressbar/..."},
	},
	{
		name: "kvq-without-trainer",
		why:  "the trainer (cmd/kvq-train) is a maintainers' command: the kvq binary does not link it",
		from: []string{"cmd/kvq/..."},
		deny: []string{"cmd/kvq-train/..."},
	},
	{
		name: "pkg-no-terminal-ui",
		why:  "library packages never import tablewriter or progressbar (cmd/kvq/internal/render and cmd/kvq/internal/progressbar wrap them)",
		from: []string{"pkg/...", "internal/...", "datasets/..."},
		deny: []string{"github.com/olekukonko/tablewriter/...", "github.com/schollz/progressbar/..."},
	},
	{
		name:  "hfconfig-leaf",
		why:   "pkg/hfconfig holds the config.json checks pkg/estimate and pkg/runtime share, below both: standard library only",
		from:  []string{"pkg/hfconfig"},
		allow: []string{"std"},
	},
	{
		name:  "parsers-leaf",
		why:   "the file-format parsers pkg/gguf and pkg/safetensors import only the standard library and pkg/kvqerr (the input-error kind, itself standard library only)",
		from:  []string{"pkg/gguf", "pkg/safetensors"},
		allow: []string{"std", "pkg/kvqerr"},
	},
	{
		name: "kvcache-below-runtime",
		why:  "pkg/runtime/kvcache sits below pkg/runtime and never imports it",
		from: []string{"pkg/runtime/kvcache/..."},
		deny: []string{"pkg/runtime"},
	},
	{
		name:  "kvcache-bookkeeping",
		why:   "pkg/runtime/kvcache keeps the bookkeeping over a backend's Storage: it imports no backend, no runtime, and no quantization arithmetic beyond pkg/quant's formats",
		from:  []string{"pkg/runtime/kvcache"},
		allow: []string{"std", "pkg/quant"},
	},
	{
		name:  "backend-interface",
		why:   "pkg/runtime/backend is the seam: it imports only the vocabulary it speaks (quant, kvcache, tensor, the kvqerr error kind), never a backend or the runtime",
		from:  []string{"pkg/runtime/backend"},
		allow: []string{"std", "pkg/quant", "pkg/runtime/kvcache", "pkg/tensor", "pkg/kvqerr"},
	},
	{
		name: "backends-below-runtime",
		why:  "backends implement pkg/runtime/backend and never import pkg/runtime (the runtime imports them)",
		from: []string{"pkg/runtime/cpu/...", "pkg/gpu/..."},
		deny: []string{"pkg/runtime", "pkg/eval/...", "pkg/calibrate/..."},
	},
	{
		name:  "openai-client-std",
		why:   "pkg/openai is a client for any OpenAI-compatible server: it imports only the standard library (no engine, no server)",
		from:  []string{"pkg/openai"},
		allow: []string{"std"},
	},
	{
		name:  "serve-over-engine",
		why:   "pkg/serve is HTTP over the engine: it imports the standard library and the engine's vocabulary (engine, runtime, tokenizer, chat and its tool-call parsers, the kvqerr error kind) only",
		from:  []string{"pkg/serve"},
		allow: []string{"std", "pkg/engine", "pkg/runtime", "pkg/tokenizer", "pkg/chat", "pkg/chat/toolcall", "pkg/kvqerr"},
	},
	{
		name:  "toolcall-leaf",
		why:   "pkg/chat/toolcall reads tool calls from model output for both pkg/eval (the tool-call metric) and pkg/serve (message.tool_calls), so that the server need not import eval: it imports only the standard library",
		from:  []string{"pkg/chat/toolcall"},
		allow: []string{"std"},
	},
	{
		name: "engine-below-serve",
		why:  "pkg/engine sits below the server and its clients and never imports them",
		from: []string{"pkg/engine/..."},
		deny: []string{"pkg/serve/...", "pkg/openai/..."},
	},
	{
		name:   "embedded-model-cli-only",
		why:    "the built-in model's weights (datasets/models) are linked only into the CLI, not into libraries built on kvq",
		from:   []string{"..."},
		except: []string{"cmd/kvq/...", "datasets/models"},
		deny:   []string{"datasets/models"},
	},
}

// pkgImport is one import of a package of the module.
type pkgImport struct {
	path string // as written
	pos  token.Position
}

func TestImportGraph(t *testing.T) {
	root, modPath := moduleRoot(t)
	pkgs := parseModule(t, root, modPath)
	if len(pkgs) == 0 {
		t.Fatalf("found no packages under %s", root)
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	slices.Sort(names)

	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			selected := 0
			for _, importer := range names {
				if !matchAny(r.from, importer, modPath) || matchAny(r.except, importer, modPath) {
					continue
				}
				selected++
				for _, imp := range pkgs[importer] {
					if v := r.violates(imp.path, modPath); v != "" {
						t.Errorf("%s imports %s (%s), which %s\n\trule %s: %s",
							rel(importer, modPath), rel(imp.path, modPath), imp.pos, v, r.name, r.why)
					}
				}
			}
			if selected == 0 {
				t.Errorf("rule %s selects no package (from %q, except %q): a package was renamed or removed", r.name, r.from, r.except)
			}
		})
	}
}

// TestMatch pins the pattern syntax the rules rely on.
func TestMatch(t *testing.T) {
	const mod = "example.com/m"
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"std", "fmt", true},
		{"std", "go/build/constraint", true},
		{"std", "C", false},
		{"std", "golang.org/x/sys/cpu", false},
		{"std", "example.com/m/pkg/quant", false},
		{"pkg/quant", "example.com/m/pkg/quant", true},
		{"pkg/quant", "example.com/m/pkg/quantx", false},
		{"pkg/quant", "example.com/m/pkg/quant/internal", false},
		{"pkg/...", "example.com/m/pkg", true},
		{"pkg/...", "example.com/m/pkg/runtime/kvcache", true},
		{"pkg/...", "example.com/m/pkgx", false},
		{"internal/...", "internal/bytealg", false}, // the standard library's internal
		{"...", "example.com/m/cmd/kvq", true},
		{"...", "fmt", false},
		{"github.com/schollz/progressbar/...", "github.com/schollz/progressbar/v3", true},
		{"golang.org/x/sys/cpu", "golang.org/x/sys/cpu", true},
		{"golang.org/x/sys/cpu", "golang.org/x/sys/unix", false},
	} {
		if got := match(tc.pattern, tc.path, mod); got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

// violates returns why importing path breaks r, or "" if it does not.
func (r rule) violates(path, modPath string) string {
	if r.allow != nil && !matchAny(r.allow, path, modPath) {
		return fmt.Sprintf("is not in the allowed list %q", r.allow)
	}
	for _, d := range r.deny {
		if match(d, path, modPath) {
			return fmt.Sprintf("matches the denied %q", d)
		}
	}
	return ""
}

func matchAny(patterns []string, path, modPath string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path, modPath) })
}

// match reports whether the import path matches pattern (see rule).
func match(pattern, path, modPath string) bool {
	if pattern == "std" {
		return isStd(path, modPath)
	}
	if pattern == "..." || !hasDot(pattern) { // packages of this module
		if path != modPath && !strings.HasPrefix(path, modPath+"/") {
			return false
		}
		if pattern == "..." {
			return true
		}
		pattern = modPath + "/" + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// isStd reports whether path is a standard-library package: its first
// element has no dot (the rule the go command applies) and it is not cgo's
// "C" or a package of this module.
func isStd(path, modPath string) bool {
	if path == "C" || path == modPath || strings.HasPrefix(path, modPath+"/") {
		return false
	}
	return !hasDot(path)
}

func hasDot(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return strings.Contains(first, ".")
}

// rel shortens a path of this module to its module-relative form.
func rel(path, modPath string) string {
	if r, ok := strings.CutPrefix(path, modPath+"/"); ok {
		return r
	}
	return path
}

// moduleRoot finds go.mod above the working directory and returns its
// directory and module path.
func moduleRoot(t *testing.T) (dir, modPath string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && m != "" && (m[0] == ' ' || m[0] == '\t') {
					m = strings.TrimSpace(m)
					if u, err := strconv.Unquote(m); err == nil {
						m = u
					}
					return dir, m
				}
			}
			t.Fatalf("%s/go.mod has no module line", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// parseModule returns the imports of every package in the module, by import
// path, from every non-test .go file whatever its build constraints (so
// that purego, cuda and per-architecture files all count), except files
// marked //go:build ignore. Like the go command it skips testdata and
// directories starting with "." or "_", and stops at nested modules.
func parseModule(t *testing.T, root, modPath string) map[string][]pkgImport {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]pkgImport{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			if g.Pos() >= f.Package {
				break
			}
			for _, c := range g.List {
				if !constraint.IsGoBuild(c.Text) {
					continue
				}
				x, err := constraint.Parse(c.Text)
				if err != nil {
					return fmt.Errorf("%s: %v", fset.Position(c.Pos()), err)
				}
				if tag, ok := x.(*constraint.TagExpr); ok && tag.Tag == "ignore" {
					return nil
				}
			}
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		importPath := modPath
		if dir != "." {
			importPath += "/" + filepath.ToSlash(dir)
		}
		if _, ok := pkgs[importPath]; !ok {
			pkgs[importPath] = nil
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %v", fset.Position(s.Pos()), err)
			}
			pos := fset.Position(s.Pos())
			if r, err := filepath.Rel(root, pos.Filename); err == nil {
				pos.Filename = filepath.ToSlash(r)
			}
			pkgs[importPath] = append(pkgs[importPath], pkgImport{p, pos})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
