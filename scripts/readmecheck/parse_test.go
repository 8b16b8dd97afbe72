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
	if got := Inputs(steps[1].Cmd); !reflect.DeepEqual(got, []string{"./Llama", "wiki.raw"}) {
		t.Errorf("Inputs = %q", got)
	}
	if got := Inputs(steps[4].Cmd); !reflect.DeepEqual(got, []string{"bad.json"}) {
		t.Errorf("Inputs of a command list = %q", got)
	}
	if got := Inputs("kvq estimate -m meta-llama/Llama-3.1-8B --tasks copy,x.jsonl"); !reflect.DeepEqual(got, []string{"x.jsonl"}) {
		t.Errorf("Inputs of a preset and a suite list = %q", got)
	}
	if got := Inputs("kvq eval --tasks copy,arc=arc.jsonl,mmlu=d/test.parquet,gsm8k=g.jsonl --fewshot a.jsonl"); !reflect.DeepEqual(got, []string{"arc.jsonl", "d/test.parquet", "g.jsonl", "a.jsonl"}) {
		t.Errorf("Inputs of data sets NAME=FILE = %q", got)
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
