package eval_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/eval"
)

// TestBuildSuitesSubset: a subset of the probe suites has the examples of
// a full run (the probe suites not asked for are drawn, not kept; the
// other suites share a generator drawn only for the suites asked for).
func TestBuildSuitesSubset(t *testing.T) {
	ctx := context.Background()
	o := eval.SuiteOptions{N: 6, Seed: 3, PasskeyContexts: []int{256}}
	all, err := eval.BuildSuites(ctx, eval.BuiltinSuites(), o)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]eval.Suite{}
	for _, s := range all {
		byName[s.Name] = s
	}
	for _, name := range []string{eval.SuitePasskey, eval.SuiteMultiKey, eval.SuiteCopy, eval.SuiteJSON, eval.SuiteSafety} {
		one, err := eval.BuildSuites(ctx, []string{name}, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(one) != 1 || !reflect.DeepEqual(one[0], byName[name]) {
			t.Errorf("BuildSuites(%s) differs from the %s suite of a full run", name, name)
		}
	}
}

// TestBuildSuitesLimits: counts past MaxExamples are ErrOptions, and a
// cancelled context stops the drawing with its error.
func TestBuildSuitesLimits(t *testing.T) {
	ctx := context.Background()
	for _, o := range []eval.SuiteOptions{
		{N: eval.MaxExamples + 1},
		{N: 1 << 62},
		{GridDepths: eval.MaxExamples + 1},
		{GridN: 1 << 62, GridDepths: 1 << 62},
		{GridContexts: []int{256, 512}, GridDepths: 1000, GridN: 51},
	} {
		if _, err := eval.BuildSuites(ctx, []string{eval.SuiteGrid}, o); !errors.Is(err, eval.ErrOptions) {
			t.Errorf("BuildSuites(%+v) = %v, want ErrOptions", o, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, name := range eval.BuiltinSuites() {
		if _, err := eval.BuildSuites(cancelled, []string{name}, eval.SuiteOptions{N: 10}); !errors.Is(err, context.Canceled) {
			t.Errorf("BuildSuites(cancelled, %s) = %v, want context.Canceled", name, err)
		}
	}
}

// TestParseTasksLongLine: a line past the limit is an error naming the
// file, the line and the limit (it said "bufio.Scanner: token too long").
func TestParseTasksLongLine(t *testing.T) {
	data := []byte(`{"prompt": "a", "reference": "b", "metric": "exact"}` + "\n" + strings.Repeat("x", 65<<20) + "\n")
	_, err := eval.ParseTasks(data, "big.jsonl")
	if !errors.Is(err, eval.ErrTasks) || !strings.Contains(err.Error(), "big.jsonl:2: a line longer than 64 MiB") {
		t.Errorf("ParseTasks(a 65 MiB line) = %v, want ErrTasks naming big.jsonl:2 and 64 MiB", err)
	}
}
