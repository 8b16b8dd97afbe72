package root

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/render"
	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/kvqlabs/kvq/pkg/plan"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// roundTrip decodes a command's JSON output into v, the type pkg/plan
// reads it with, refusing fields v lacks, and encodes v again as the
// commands do: the bytes must be the command's, so that the type and the
// command cannot drift apart.
func roundTrip(t *testing.T, name, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: decoding the output as %T: %v", name, v, err)
	}
	var again bytes.Buffer
	if err := render.WriteJSON(&again, v); err != nil {
		t.Fatalf("%s: encoding %T: %v", name, v, err)
	}
	if again.String() != out {
		a, b := strings.Split(out, "\n"), strings.Split(again.String(), "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("%s: %T does not round-trip: line %d is %q, re-encoded %q", name, v, i+1, a[i], b[i])
			}
		}
		t.Fatalf("%s: %T does not round-trip: %d lines, re-encoded %d", name, v, len(a), len(b))
	}
}

// TestPlanReadsBenchAndCalibrate checks the one type per schema: kvq
// bench's and kvq calibrate's (and audit's) JSON decode into the
// pkg/bench and pkg/calibrate types exactly (nothing unknown, nothing
// lost), and kvq plan --from reads those files with them.
func TestPlanReadsBenchAndCalibrate(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny")
	if err := modeltest.WriteHF(model, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	results := t.TempDir()
	write := func(name, out string) {
		if err := os.WriteFile(filepath.Join(results, name), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	code, out, stderr := run(t, "bench", "--model", model, "--cache", "fp16,int4", "--num-prompts", "4", "--input-len", "24", "--output-len", "6",
		"--max-concurrency", "1,4", "--goodput", "ttft:60s,tpot:60s", "--depths", "0,32", "--depth-tokens", "2", "--depth-reps", "1", "--warmups", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	var rep bench.Report
	roundTrip(t, "kvq bench", out, &rep)
	if rep.Schema != bench.Schema || len(rep.Caches) != 2 || rep.Caches[0].Capacity == nil || len(rep.Caches[0].Decode) != 2 || rep.Caches[0].Points[0].Engine == nil {
		t.Fatalf("bench report lacks what the test needs: %+v", rep)
	}
	write("bench.json", out)

	scales := filepath.Join(t.TempDir(), "scales")
	cal := []string{"--model", model, "--samples", "2", "--seq-len", "32", "--ctx", "32", "--chunks", "2"}
	code, out, stderr = run(t, append([]string{"calibrate", "--out", scales, "--compare", "default,dataset", "-o", "json"}, cal...)...)
	if code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
	var res calibrate.Result
	roundTrip(t, "kvq calibrate", out, &res)
	if res.Schema != calibrate.Schema || res.Compare == nil || res.Compare.Verdict == nil || len(res.Scales) == 0 {
		t.Fatalf("calibrate result lacks what the test needs: %+v", res)
	}
	write("calibrate.json", out)

	code, out, stderr = run(t, append([]string{"calibrate", "audit", "--scales", filepath.Join(scales, calibrate.FileSafetensors), "-o", "json"}, cal...)...)
	if code != 0 {
		t.Fatalf("calibrate audit: exit %d: %s", code, stderr)
	}
	var audit calibrate.Audit
	roundTrip(t, "kvq calibrate audit", out, &audit)
	write("audit.json", out)

	got, err := plan.ReadResults(results)
	if err != nil {
		t.Fatal(err)
	}
	if got.Bench == nil || !reflect.DeepEqual(got.Bench.Report, &rep) {
		t.Errorf("plan.ReadResults: bench %+v, want %+v", got.Bench, rep)
	}
	if got.Calibrate == nil || !reflect.DeepEqual(got.Calibrate.Result, &res) {
		t.Errorf("plan.ReadResults: calibrate %+v, want %+v", got.Calibrate, res)
	}
	if got.Audit == nil || !reflect.DeepEqual(got.Audit.Audit, &audit) {
		t.Errorf("plan.ReadResults: audit %+v, want %+v", got.Audit, audit)
	}

	// --wide: each checklist detail on one line, to find the verdict in.
	code, out, stderr = run(t, "plan", "--model", model, "--from", results, "--wide")
	if code != 0 {
		t.Fatalf("plan --from: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"fp16: capacity ", "strategy " + res.Strategy, res.Compare.Verdict.Text} {
		if !strings.Contains(out, want) {
			t.Errorf("plan --from lacks %q:\n%s", want, out)
		}
	}
}
