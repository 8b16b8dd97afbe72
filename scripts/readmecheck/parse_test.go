package main

import (
	"reflect"
	"testing"
	"time"
)

const doc = "# t\n\n" +
	"    kvq eval                 # the showcase, about 2 minutes\n" +
	"    kvq eval --model ./Llama --text wiki.raw   # your own model and text\n" +
	"    kvq generate -m ../shared/models/x.gguf \\\n" +
	"      -p \"Once upon a time\"   # 5 s\n" +
	"    make test\n" +
	"\n" +
	"```\n" +
	"$ cat bad.json\n" +
	"{\"k\": 1}\n" +
	"$ kvq calibrate audit --scales bad.json; echo \"exit $?\"\n" +
	"Scales: bad.json\n" +
	"LAYER  K SCALE\n" +
	"    0   0.0137\n" +
	"exit 3\n" +
	"```\n" +
	"\n" +
	"```go\n" +
	"kvq := 1\n" +
	"```\n"

func TestParseDoc(t *testing.T) {
	steps := ParseDoc("R.md", doc)
	var got []string
	for _, s := range steps {
		if s.IsFile() {
			got = append(got, "file "+s.File+" "+s.Content)
		} else {
			got = append(got, s.Cmd+" | "+s.Comment)
		}
	}
	want := []string{
		"kvq eval | the showcase, about 2 minutes",
		"kvq eval --model ./Llama --text wiki.raw | your own model and text",
		`kvq generate -m ../shared/models/x.gguf -p "Once upon a time" | 5 s`,
		"file bad.json {\"k\": 1}\n",
		`kvq calibrate audit --scales bad.json; echo "exit $?" | `,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("steps:\n%q\nwant\n%q", got, want)
	}
	if w := steps[4].Want; len(w) != 4 || w[3] != "exit 3" {
		t.Errorf("want lines %q", w)
	}
	if steps[0].Source != "R.md:3" || steps[4].Source != "R.md:12" {
		t.Errorf("sources %s, %s", steps[0].Source, steps[4].Source)
	}
	kinds := []Kind{Slow, YourOwn, Run}
	for i, k := range kinds {
		if got := Classify(steps[i], 30*time.Second); got != k {
			t.Errorf("Classify(%q) = %v, want %v", steps[i].Cmd, got, k)
		}
	}
	for _, cmd := range []string{"kvq serve --cache fp16 &", "kvq canary watch --baseline http://a --candidate http://b", "kvq eval --endpoint fp16=http://a"} {
		if got := Classify(Step{Cmd: cmd}, 30*time.Second); got != Server {
			t.Errorf("Classify(%q) = %v, want %v", cmd, got, Server)
		}
	}
	if got := Inputs(steps[1].Cmd); !reflect.DeepEqual(got, []string{"./Llama", "wiki.raw"}) {
		t.Errorf("Inputs = %q", got)
	}
	if got := Inputs(steps[4].Cmd); !reflect.DeepEqual(got, []string{"bad.json"}) {
		t.Errorf("Inputs of a command list = %q", got)
	}
	rm := ParseDoc("G.md", "    go run ./scripts/randmodel -arch gemma3 -hf g3\n    go run ./scripts/other\n")
	if len(rm) != 1 || Classify(rm[0], 30*time.Second) != Run || len(Inputs(rm[0].Cmd)) != 0 {
		t.Errorf("randmodel steps %+v", rm)
	}
	if got := Inputs("kvq estimate -m meta-llama/Llama-3.1-8B --tasks copy,x.jsonl"); !reflect.DeepEqual(got, []string{"x.jsonl"}) {
		t.Errorf("Inputs of a preset and a suite list = %q", got)
	}
	if got := Inputs("kvq eval --tasks copy,arc=arc.jsonl,mmlu=d/test.parquet,gsm8k=g.jsonl --fewshot a.jsonl"); !reflect.DeepEqual(got, []string{"arc.jsonl", "d/test.parquet", "g.jsonl", "a.jsonl"}) {
		t.Errorf("Inputs of data sets NAME=FILE = %q", got)
	}
	if got := Inputs("kvq eval --tasks copy,gsm8k=g/test.jsonl,longbench2=v2.json --ruler-squad sq.json"); !reflect.DeepEqual(got, []string{"g/test.jsonl", "v2.json", "sq.json"}) {
		t.Errorf("Inputs of NAME=FILE tasks and a data flag = %q", got)
	}
}

func TestParseHelp(t *testing.T) {
	help := "Long.\n\nUsage:\n  kvq estimate [flags]\n\nExamples:\n  # The first question\n  kvq estimate --model llama-3.1-8b\n\n" +
		"  # Your own checkpoint\n  kvq estimate --model ./Qwen/ \\\n    --gpu l40s\n\nFlags:\n  -h, --help\n"
	steps := ParseHelp("kvq estimate --help", help)
	if len(steps) != 2 || steps[0].Comment != "The first question" || steps[1].Cmd != "kvq estimate --model ./Qwen/ --gpu l40s" ||
		Classify(steps[1], time.Minute) != YourOwn {
		t.Errorf("steps %+v", steps)
	}
}

func TestStatedDuration(t *testing.T) {
	for c, want := range map[string]time.Duration{
		"about 2 minutes on 2 cores": 2 * time.Minute, "~22 s": 22 * time.Second, "1m43s": 103 * time.Second,
		"the base run, about 60 minutes": time.Hour, "seconds": 0, "passkey at 2K, 2 cores": 0, "6m22s on 2 cores": 382 * time.Second,
	} {
		if got := StatedDuration(c); got != want {
			t.Errorf("StatedDuration(%q) = %v, want %v", c, got, want)
		}
	}
}

// TestMaskKernelSet: the kernel set kvq names (the CPU's) compares equal
// across machines; other words do not.
func TestMaskKernelSet(t *testing.T) {
	doc := "kvq dev (go1.26.8, linux/amd64, avx2 kernels, backends cpu)"
	for _, got := range []string{
		"kvq dev (go1.26.8, linux/amd64, avx512 kernels, backends cpu)",
		"kvq dev (go1.26.8, linux/amd64, avx512-zen4 kernels, backends cpu)",
		"kvq dev (go1.26.8, linux/amd64, avx512-zen5 kernels, backends cpu)",
	} {
		if l, _ := Missing([]string{doc}, got); l != "" {
			t.Errorf("%q against %q: Missing = %q, want the line found", doc, got, l)
		}
	}
	if l, _ := Missing([]string{doc}, "kvq dev (go1.26.8, linux/amd64, avx2 dots, backends cpu)"); l == "" {
		t.Error("a different word matched")
	}
}

func TestMissing(t *testing.T) {
	got := "kvq: no --model given; using the built-in kvq-probe model (/var/cache/kvq/kvq-probe-1234abcd)\n" +
		"FORMAT  BYTES/TOKEN\nfp16      131,072\nint4       36,864\nexit 3\n"
	want := []string{"kvq: no --model given; using the built-in kvq-probe model (/var/tmp/u/.cache/kvq/kvq-probe-99)", "FORMAT BYTES/TOKEN", "int4 1,024", "", "exit 3"}
	if l, _ := Missing(want, got); l != "" {
		t.Errorf("Missing = %q, want every line found", l)
	}
	if l, _ := Missing([]string{"int4 1", "fp16 2"}, got); l != "fp16 2" {
		t.Errorf("out of order: Missing = %q", l)
	}
	if l, _ := Missing([]string{"exit 2"}, got); l != "exit 2" {
		t.Errorf("exit codes are compared: Missing = %q", l)
	}
	clip := "calibrated  <0.01%  0.023%  0.0007\n"
	if l, _ := Missing([]string{"calibrated  0.012%  <0.01%  0.0009"}, clip); l != "" {
		t.Errorf("a bound and a number: Missing = %q, want the line found", l)
	}
	if l, _ := Missing([]string{"calibrated  0.012  <0.01%  0.0009"}, clip); l == "" {
		t.Errorf("a share and a plain number matched")
	}
}
