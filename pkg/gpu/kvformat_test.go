package gpu

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	"github.com/kvqlabs/kvq/pkg/runtime/kvcache"
)

// These tests need no GPU: they check the decision of kvformat.go, which
// every build compiles.

// kvScalesFile writes a kvq scales file for 2 layers and 2 KV heads.
func kvScalesFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scales.json")
	data := `{"k_scale": {"0": [0.01, 0.5], "1": 0.05}, "v_scale": {"0": 0.004, "1": [0.5, 3]}}`
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// everyFormat returns every format the CPU runs: each combination of
// options of every family (quant.Registry.Variants), the presets, fp8
// with a scales file, and each of them with keys in GGUF order.
func everyFormat(t *testing.T) []quant.Format {
	t.Helper()
	reg := quant.Formats()
	names := append(reg.Variants(), reg.Names()...)
	sc := kvScalesFile(t)
	names = append(names, "fp8:scales@"+sc, "fp8-e5m2:nosat:scales@"+sc, "fp8:scales@"+sc+":rot")
	var fs []quant.Format
	for _, name := range names {
		f, err := reg.Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q) = %v", name, err)
		}
		fs = append(fs, f, quant.InterleaveKeys(f))
	}
	return fs
}

// gpuRuns is what the GPU has stored since its KV kernels were written,
// by name: fp32, fp16, bf16, fp8 (any scales, saturating or not), the
// llama.cpp blocks and the fp4 formats (nvfp4 also dynamic), unrotated, and per-token int8/int4/int2 groups of at
// most 4095 values; never keys in GGUF order. It
// restates the kernels' scope in the user's terms, so that a change of
// traits or of option names that drops (or adds) GPU support fails here.
func gpuRuns(name string, interleaved bool) bool {
	parts := strings.Split(name, ":")
	opts := parts[1:]
	switch base := parts[0]; base {
	case "fp32", "fp16", "bf16", "fp8-e4m3", "fp8-e5m2":
	case "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "nvfp4", "fp4_e2m1":
	case "int8", "int4", "int2":
		for _, o := range opts {
			if o == "channel" {
				return false
			}
			if g, err := strconv.Atoi(strings.TrimPrefix(o, "g")); err == nil && g > kvGroupMax {
				return false
			}
		}
	default:
		return false
	}
	return !slices.Contains(opts, "rot") && !interleaved
}

// TestSupportsKVEveryFormat checks the GPU's decision for every format the
// CPU runs: supported exactly when gpuRuns says so, else refused with
// backend.ErrUnsupported and a message naming the format; and, for the
// supported ones, a kernel code and row bytes for each side at the head
// sizes their codecs take.
func TestSupportsKVEveryFormat(t *testing.T) {
	supported := 0
	for _, f := range everyFormat(t) {
		interleaved := f.Traits(true).Interleaved
		err := supportsKV(f)
		want := gpuRuns(f.Name(), interleaved)
		label := f.Name()
		if interleaved {
			label += " (keys in GGUF order)"
		}
		switch {
		case want && err != nil:
			t.Errorf("supportsKV(%s) = %v, want nil", label, err)
		case !want && err == nil:
			t.Errorf("supportsKV(%s) = nil, want backend.ErrUnsupported", label)
		case !want && !errors.Is(err, backend.ErrUnsupported):
			t.Errorf("supportsKV(%s) = %v, want backend.ErrUnsupported", label, err)
		case !want && !strings.Contains(err.Error(), "KV format "+f.Name()+" "):
			t.Errorf("supportsKV(%s) = %v, want the format named", label, err)
		}
		if err != nil {
			continue
		}
		supported++
		for _, dim := range []int{32, 64, 96, 128, 256} {
			for _, key := range []bool{true, false} {
				c, cerr := f.NewCodec(quant.CodecParams{Dim: dim, Key: key})
				k, err := kvFormat(f, key, dim)
				switch {
				case cerr != nil:
				case err != nil:
					t.Errorf("kvFormat(%s, key %v, d%d) = %v", label, key, dim, err)
				case k.rowBytes != c.TileBytes(1):
					t.Errorf("kvFormat(%s, key %v, d%d): %d bytes a row, the codec %d", label, key, dim, k.rowBytes, c.TileBytes(1))
				}
			}
		}
	}
	if supported < 100 {
		t.Errorf("only %d formats supported", supported)
	}
}

// TestSupportsKVSpecs runs specs the CPU runs, K ≠ V, per-layer overrides
// and fp16 windows among them, through the storage's layout check
// (kvLayout, what NewStorage does before allocating): every layout is
// either stored, each side in its format's code with the layout's tile
// bytes, or refused with backend.ErrUnsupported naming a format that
// supportsKV refuses.
func TestSupportsKVSpecs(t *testing.T) {
	reg := quant.Formats()
	sides := []string{"fp16", "bf16", "fp8-e4m3:dynamic", "fp8-e5m2:nosat", "q8_0", "q4_1:rot", "iq4_nl", "int4:g32",
		"int2:row:sym", "int4:g32:channel", "kivi2", "quanto4", "turbo3", "kvquant4"}
	var specs []string
	for _, k := range sides {
		for _, v := range sides {
			specs = append(specs, "k="+k+",v="+v)
		}
		specs = append(specs, k+",residual=8,sink=2", k+",sink=4", "k="+k+",v=q4_0,residual=6", "fp16,l1="+k, "k=int8,v=fp16,l-1="+k+",sink=1")
	}
	g := kvcache.Geometry{Layers: 2, KVHeads: 2, HeadDim: 64}
	ran := 0
	for _, text := range specs {
		spec, err := reg.ParseSpec(text)
		if err != nil {
			t.Fatalf("ParseSpec(%q) = %v", text, err)
		}
		l, err := kvcache.NewLayout(g, spec, 0)
		if err != nil {
			t.Fatalf("NewLayout(%q) = %v", text, err)
		}
		var refused []string
		for i := range l.Layers {
			for _, side := range []*kvcache.Side{&l.Layers[i].K, &l.Layers[i].V} {
				if supportsKV(side.Format) != nil {
					refused = append(refused, side.Format.Name())
				}
			}
		}
		fmts, err := kvLayout(l)
		switch {
		case len(refused) == 0 && err != nil:
			t.Errorf("kvLayout(%s) = %v, want nil", text, err)
		case len(refused) > 0 && !errors.Is(err, backend.ErrUnsupported):
			t.Errorf("kvLayout(%s) = %v, want backend.ErrUnsupported", text, err)
		case len(refused) > 0 && !slices.ContainsFunc(refused, func(n string) bool { return strings.Contains(err.Error(), " "+n+" ") }):
			t.Errorf("kvLayout(%s) = %v, want one of %q named", text, err, refused)
		case err == nil:
			ran++
			for i := range l.Layers {
				for j, side := range []*kvcache.Side{&l.Layers[i].K, &l.Layers[i].V} {
					if got, want := fmts[i][j].rowBytes*l.BlockTokens, side.TileBytes; got != want {
						t.Errorf("%s: layer %d side %d: %d bytes a tile, the layout %d", text, i, j, got, want)
					}
				}
			}
		}
	}
	if ran < 50 {
		t.Errorf("only %d of %d specs stored", ran, len(specs))
	}
}

// renamed is a format with another name and the traits of the format it
// wraps: the GPU's decision must not change.
type renamed struct {
	quant.Format
	name string
}

func (r renamed) Name() string { return r.name }

// TestSupportsKVIgnoresNames checks that the decision and the kernels'
// view come from the traits: every format, renamed to something no name
// parser would recognise (or to another format's name), is decided and
// laid out as before; a format without traits is refused.
func TestSupportsKVIgnoresNames(t *testing.T) {
	for _, f := range everyFormat(t) {
		for _, name := range []string{"x-" + strconv.Itoa(len(f.Name())), "fp16", "kivi2:rot"} {
			g := renamed{f, name}
			if (supportsKV(f) == nil) != (supportsKV(g) == nil) {
				t.Errorf("supportsKV(%s) = %v but renamed %q: %v", f.Name(), supportsKV(f), name, supportsKV(g))
			}
			for _, key := range []bool{true, false} {
				a, aerr := kvFormat(f, key, 64)
				b, berr := kvFormat(g, key, 64)
				if a != b || (aerr == nil) != (berr == nil) {
					t.Errorf("kvFormat(%s, %v) = %+v, %v; renamed %q: %+v, %v", f.Name(), key, a, aerr, name, b, berr)
				}
			}
		}
	}
	var none quant.Traits
	if _, _, _, why := kvCode(none); why == "" {
		t.Errorf("kvCode(zero traits) accepted")
	}
}

// TestNoFormatNames fails if the GPU backend's code (any non-test file of
// the package, whatever its build tags) recognises formats by name: a
// comparison, switch case or strings function on a string literal that
// is a format name, alias or option, or on a Name() call.
func TestNoFormatNames(t *testing.T) {
	reg := quant.Formats()
	words := map[string]bool{}
	for _, v := range append(reg.Variants(), reg.Names()...) {
		for _, p := range strings.Split(v, ":") {
			words[p] = true
		}
	}
	for _, a := range []string{"fp8", "fp8_e4m3", "f16", "f32", "half", "auto", "bfloat16", "hf-int4", "scales", "codebook", "scales@", "codebook@"} {
		words[a] = true
	}
	isName := func(e ast.Expr) bool {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			s = strings.Trim(s, ":")
			return words[s] || strings.HasPrefix(s, "fp8-") || strings.HasSuffix(s, "@")
		}
		if call, ok := e.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Name" && len(call.Args) == 0 {
				return true
			}
		}
		if id, ok := e.(*ast.Ident); ok {
			return id.Name == "name" || id.Name == "parts"
		}
		return false
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			var bad ast.Expr
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isName(n.X) || isName(n.Y)) {
					bad = n
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && isName(n.Tag) {
					bad = n.Tag
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if isName(e) {
						bad = e
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "strings" {
						for _, a := range n.Args {
							if isName(a) {
								bad = n
							}
						}
					}
				}
			}
			if bad != nil {
				t.Errorf("%s: recognises a KV format by its name; decide from quant.Traits instead", fset.Position(bad.Pos()))
			}
			return true
		})
	}
	if checked < 10 {
		t.Errorf("only %d files checked", checked)
	}
}
