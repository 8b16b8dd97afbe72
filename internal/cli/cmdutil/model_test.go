package cmdutil

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

func TestExtract(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	fsys := fstest.MapFS{
		"config.json":       {Data: []byte(`{"a": 1}`)},
		"model.safetensors": {Data: []byte("weights")},
	}
	dir, err := extract(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range fsys {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != string(f.Data) {
			t.Errorf("%s: %q, %v", name, b, err)
		}
	}
	again, err := extract(fsys)
	if err != nil || again != dir {
		t.Errorf("second extract = %s, %v; want the same directory %s", again, err, dir)
	}
	fsys["model.safetensors"] = &fstest.MapFile{Data: []byte("other weights")}
	other, err := extract(fsys)
	if err != nil || other == dir {
		t.Errorf("changed content extracted to %s (%v), want a new directory", other, err)
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Errorf("temporary directory %s left behind", e.Name())
		}
	}
}
