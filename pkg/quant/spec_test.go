package quant_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/quant"
)

func TestSpecParsing(t *testing.T) {
	reg := quant.Formats()
	for _, tc := range []struct {
		in       string
		k, v     string
		res, snk int
		layer0   string // K format of layer 0 of 4
		last     string // K format of layer 3 of 4
	}{
		{"fp16", "fp16", "fp16", 0, 0, "fp16", "fp16"},
		{"FP8", "fp8-e4m3", "fp8-e4m3", 0, 0, "fp8-e4m3", "fp8-e4m3"},
		{"k=int8,v=int4", "int8", "int4", 0, 0, "int8", "int8"},
		{"int4:g32,residual=128,sink=4", "int4:g32", "int4:g32", 128, 4, "int4:g32", "int4:g32"},
		{"q4_0,L0=fp16,L-1=fp16", "q4_0", "q4_0", 0, 0, "fp16", "fp16"},
		{"int2,L1-2=int8", "int2", "int2", 0, 0, "int2", "int2"},
		{"k=int8", "int8", "fp16", 0, 0, "int8", "int8"},
	} {
		s, err := reg.ParseSpec(tc.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", tc.in, err)
			continue
		}
		if s.K.Name() != tc.k || s.V.Name() != tc.v || s.Residual != tc.res || s.Sink != tc.snk {
			t.Errorf("ParseSpec(%q) = K %s V %s residual %d sink %d", tc.in, s.K.Name(), s.V.Name(), s.Residual, s.Sink)
		}
		if k, _ := s.ForLayer(0, 4); k.Name() != tc.layer0 {
			t.Errorf("ParseSpec(%q) layer 0 K = %s, want %s", tc.in, k.Name(), tc.layer0)
		}
		if k, _ := s.ForLayer(3, 4); k.Name() != tc.last {
			t.Errorf("ParseSpec(%q) layer 3 K = %s, want %s", tc.in, k.Name(), tc.last)
		}
	}
	if s, _ := reg.ParseSpec("int2,L1-2=int8"); func() bool { k, _ := s.ForLayer(2, 4); return k.Name() != "int8" }() {
		t.Error("L1-2 override does not reach layer 2")
	}
	for in, want := range map[string]string{
		"int3":       `unknown format "int3"`,
		"fp16,int4":  "format given twice",
		"residual=x": "residual",
		"foo=bar":    `unknown key "foo"`,
		"L9-2=fp16":  "empty",
		"k=nope":     "k=",
		"int4:g3x":   "g3x",
		"":           "empty",
		"residual=4": "no format",
	} {
		_, err := reg.ParseSpec(in)
		if err == nil || !errors.Is(err, quant.ErrBadSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q) = %v, want ErrBadSpec mentioning %q", in, err, want)
		}
	}
}

func TestParseList(t *testing.T) {
	reg := quant.Formats()
	specs, err := reg.ParseList("fp16,fp8,k=int8,v=int4,int4,residual=64,kivi2")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, s.String())
	}
	want := []string{"fp16", "fp8", "k=int8,v=int4", "int4,residual=64", "kivi2"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("ParseList = %q, want %q", got, want)
	}
}

// TestSpecKeepsPathCase: option values after '@' are paths and keep their case.
func TestSpecKeepsPathCase(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "Scales.JSON")
	if err := os.WriteFile(p, []byte(`{"k_scale": {"0": 0.5}, "v_scale": {"0": 0.25}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := quant.Formats().ParseSpec("FP8:scales@" + p); err != nil {
		t.Fatalf("mixed-case scales path: %v", err)
	}
}

// TestSpecErrorMessages: a bad spec is quoted once as typed, its cause said
// without the package prefix again, and the sentinels still match.
func TestSpecErrorMessages(t *testing.T) {
	for _, c := range []struct {
		spec, want string
		is         error
	}{
		{"Int3", `quant: bad cache spec "Int3": unknown format "Int3" (valid: `, quant.ErrUnknownFormat},
		{"int4,k=Bogus", `quant: bad cache spec "int4,k=Bogus": k=: unknown format "Bogus"`, quant.ErrUnknownFormat},
		{"int4:gx", `quant: bad cache spec "int4:gx": bad format option: int4: group "gx" must be g<positive integer>`, quant.ErrOption},
		{"fp16,L3=Nope", `quant: bad cache spec "fp16,L3=Nope": L3=: unknown format "Nope"`, quant.ErrUnknownFormat},
		{"fp16,Res=3", `quant: bad cache spec "fp16,Res=3": unknown key "Res"`, quant.ErrBadSpec},
	} {
		_, err := quant.Formats().ParseSpec(c.spec)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.Is(err, quant.ErrBadSpec) || !errors.Is(err, c.is) {
			t.Errorf("ParseSpec(%q) = %v, want an error starting %q matching %v", c.spec, err, c.want, c.is)
			continue
		}
		if strings.Count(err.Error(), "quant: ") != 1 {
			t.Errorf("ParseSpec(%q): %q says quant: more than once", c.spec, err)
		}
	}
}
