package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// docSection returns the text of the documentation file doc (a path from
// the repository root, such as "docs/commands/eval.md") from the line
// holding start up to the line holding end, or to the end of the file when
// end is "".
func docSection(t *testing.T, doc, start, end string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "..", filepath.FromSlash(doc)))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("%s has no %q", doc, start)
	}
	if end == "" {
		return s[i:]
	}
	j := strings.Index(s[i+len(start):], end)
	if j < 0 {
		t.Fatalf("%s has no %q after %q", doc, end, start)
	}
	return s[i : i+len(start)+j]
}

// documentedFields are the JSON field names a documentation paragraph lists: the
// names in backticks, and, with lists, the items of its lists in
// parentheses and braces ("(path, format, kv_heads, ...)", "kld {mean,
// err, ...}").
func documentedFields(text string, lists bool) []string {
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9_]*)(\\[\\])?`").FindAllStringSubmatch(text, -1) {
		seen[m[1]] = true
	}
	plain := strings.ReplaceAll(text, "`", "")
	plain = strings.Join(strings.Fields(plain), " ")
	word := regexp.MustCompile(`[a-z][a-z0-9_]*`)
	for _, loc := range word.FindAllStringIndex(plain, -1) {
		if !lists {
			break
		}
		before := strings.TrimRight(plain[:loc[0]], " ")
		after := strings.TrimLeft(plain[loc[1]:], " ")
		if before == "" || after == "" || !strings.ContainsRune("({,;:", rune(before[len(before)-1])) || !strings.ContainsRune(",)}[{:;", rune(after[0])) {
			continue
		}
		if c := plain[loc[0]-1]; c != ' ' && !strings.ContainsRune("({", rune(c)) {
			continue // part of a longer token: "p99.9", "sha256"
		}
		seen[plain[loc[0]:loc[1]]] = true
	}
	var out []string
	for k := range seen {
		if k != "null" && k != "true" && k != "false" { // JSON's literals
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// jsonKeys collects every object key of a JSON document, at any depth.
func jsonKeys(t *testing.T, doc string, keys map[string]bool) {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("JSON: %v\n%.500s", err, doc)
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
}

// TestDocumentedJSONFields: every field the command manuals (docs/commands)
// document for kvq eval's, kvq estimate's and kvq bench's --output json is
// in the output.
func TestDocumentedJSONFields(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(dir, modeltest.Spec{Arch: "llama", Seed: 4, Context: 2048}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	// Scales for a cache spec that reads a file (the caches' scales field).
	scales := filepath.Join(t.TempDir(), "scales")
	if code, _, stderr := run(t, "calibrate", "--model", dir, "--samples", "2", "--seq-len", "32", "--compare", "none", "--out", scales); code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
	runs := []struct {
		name, doc, start, end string
		lists                 bool
		args                  [][]string
	}{
		{"eval", "docs/commands/eval.md", "`--output json` is the whole report under the stable schema `kvq.eval/v1`", "`--output csv`", true, [][]string{
			{"eval", "--model", dir, "-n", "2", "--contexts", "256", "--grid-contexts", "128,256", "--grid-depths", "2", "--grid-n", "1",
				"--ctx", "128", "--chunks", "2", "--cache", "fp32,fp16,int2,fp8:scales@" + filepath.Join(scales, "kv_scales.json"),
				"--max-drop", "*=100", "--max-kld", "0.01", "-o", "json"},
		}},
		{"estimate", "docs/commands/estimate.md", "## JSON fields (`--output json`, stable)", "", false, [][]string{
			{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--vllm-version", "0.21", "-o", "json"},
			{"estimate", "--model", "gemma-2-9b", "--gpu", "h100", "-o", "json"},
			{"estimate", "--model", "gemma-2-27b", "--gpu", "l4", "-o", "json"},
			{"estimate", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "-o", "json"},
			{"estimate", "--model", "phi-3-mini-4k", "-o", "json"},
			{"estimate", "--model", "qwen2.5-7b", "--gpu", "h100", "--gpus", "8", "-o", "json"},
			{"estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--cache", "fp16,kivi2", "-o", "json"},
		}},
		{"bench", "docs/commands/bench.md", "`--output json` (schema `kvq.bench/v1`)", "draws TTFT and TPOT CDFs", false, [][]string{
			{"bench", "--model", dir, "--cache", "fp16", "--num-prompts", "3", "--input-len", "16", "--output-len", "4", "--depths", "0", "--depth-tokens", "2", "--depth-reps", "1", "-o", "json"},
		}},
	}
	for _, r := range runs {
		fields := documentedFields(docSection(t, r.doc, r.start, r.end), r.lists)
		if len(fields) < 8 {
			t.Fatalf("%s: only %d documented fields found: %v", r.name, len(fields), fields)
		}
		keys := map[string]bool{}
		for _, args := range r.args {
			code, out, stderr := run(t, args...)
			if code != 0 && !(r.name == "eval" && code == 3) { // a gate fails on purpose: failed_gates, message
				t.Fatalf("kvq %v: exit %d: %s", args, code, stderr)
			}
			jsonKeys(t, out, keys)
		}
		for _, f := range fields {
			if !keys[f] {
				t.Errorf("kvq %s: %s documents the JSON field %q, which the output lacks", r.name, r.doc, f)
			}
		}
	}
}
