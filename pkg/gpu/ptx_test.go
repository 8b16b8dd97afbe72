package gpu

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestPTXFresh checks that ptx/kvq.ptx was made from the kernel sources as
// they are (make ptx records their hash in its first line), so that the
// cuda build never embeds kernels older than their source. It runs in
// every build: CI has no nvcc, but it has this test.
func TestPTXFresh(t *testing.T) {
	names, err := os.ReadDir("kernels")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range names {
		if n := e.Name(); n != "emu.cuh" && n != "emutest.cu" && !e.IsDir() {
			files = append(files, n)
		}
	}
	sort.Strings(files)
	h := sha256.New()
	for _, n := range files {
		b, err := os.ReadFile(filepath.Join("kernels", n))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(n + "\n"))
		h.Write(b)
	}
	want := hex.EncodeToString(h.Sum(nil))
	f, err := os.Open(filepath.Join("ptx", "kvq.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	got, ok := strings.CutPrefix(strings.TrimSpace(line), "// kvq-kernels-sha256: ")
	if !ok {
		t.Fatalf("ptx/kvq.ptx does not start with its sources' hash (run make ptx): %q", line)
	}
	if got != want {
		t.Fatalf("ptx/kvq.ptx was made from other kernel sources (hash %s, sources now %s): run make ptx", got[:12], want[:12])
	}
}
