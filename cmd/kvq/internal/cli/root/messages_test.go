package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// prefix finds the package prefixes of a message ("quant: ").
var prefix = regexp.MustCompile(`\b(kvq|quant|runtime|eval|estimate|calibrate|bench|plan|gguf|safetensors|tokenizer|llama2c|chat): `)

// stutter returns a prefix said twice in one message ("quant: bad cache
// spec ...: quant: unknown format", "kvq: kvq calibrate:").
func stutter(msg string) string {
	if strings.HasPrefix(msg, "kvq: kvq") {
		return "kvq"
	}
	seen := map[string]bool{}
	for _, m := range prefix.FindAllStringSubmatch(msg, -1) {
		if seen[m[1]] {
			return m[1]
		}
		seen[m[1]] = true
	}
	return ""
}

// structDump finds a Go struct printed with %+v: {Name:value ...}.
var structDump = regexp.MustCompile(`\{[A-Z][A-Za-z]*:`)

// TestMessages: errors say each thing once, in words, with the user's own
// spelling, and point to the help of the command that refused them.
func TestMessages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "zero-layers")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 1}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	json.Unmarshal(b, &cfg)
	cfg["num_hidden_layers"] = 0
	b, _ = json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	for _, c := range []struct {
		args []string
		want []string // substrings of stderr, in order
	}{
		{[]string{"generate", "--cache", "Int3"}, []string{`unknown format "Int3"`, "Run 'kvq generate --help' for usage."}},
		{[]string{"eval", "--cache", "fp16,INT4:G0"}, []string{`"INT4:G0"`, "group", "Run 'kvq eval --help' for usage."}},
		{[]string{"estimate", "--cache", "int4:gx"}, []string{`--cache: quant: bad cache spec "int4:gx": bad format option: int4: group "gx"`}},
		{[]string{"bench", "--cache", "fp16,k=Bogus"}, []string{`k=: unknown format "Bogus"`, "Run 'kvq bench --help' for usage."}},
		{[]string{"calibrate", "--strategy", "Magic"}, []string{`"Magic"`, "Run 'kvq calibrate --help' for usage."}},
		{[]string{"estimate", "--gpu", "H1000"}, []string{`"H1000"`}},
		{[]string{"plan", "--engine", "TGI"}, []string{`"TGI"`, "Run 'kvq plan --help' for usage."}},
		{[]string{"inspect", "--model", dir}, []string{"num_hidden_layers = 0"}},
	} {
		code, _, stderr := run(t, c.args...)
		name := strings.Join(c.args, " ")
		if code != 2 {
			t.Errorf("kvq %s: exit %d, want 2", name, code)
		}
		rest := stderr
		for _, w := range c.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("kvq %s: stderr %q lacks %q", name, stderr, w)
				break
			}
			rest = rest[i+len(w):]
		}
		first := strings.SplitN(stderr, "\n", 2)[0]
		if m := stutter(first); m != "" {
			t.Errorf("kvq %s: the message stutters (%q): %s", name, m, first)
		}
		if m := structDump.FindString(stderr); m != "" {
			t.Errorf("kvq %s: a Go struct in the message: %s", name, stderr)
		}
		if strings.Count(stderr, "Run '") > 1 {
			t.Errorf("kvq %s: two hints: %s", name, stderr)
		}
	}
}
