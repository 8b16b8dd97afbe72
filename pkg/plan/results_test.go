package plan

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/pkg/bench"
	"github.com/kvqlabs/kvq/pkg/calibrate"
)

// TestReadResults reads the kvq bench, calibrate and audit types back from
// their JSON, ignores unknown schemas, and names a known one that does not
// parse.
func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rep := &bench.Report{Schema: bench.Schema, Mode: bench.ModeEndpoint, Budget: 1 << 30, Loads: []bench.Load{{Concurrency: 4, Burstiness: 1}},
		Caches: []bench.CacheReport{{Cache: "fp16", CapacityLevel: 8, MedianTPOTms: 20}, {Cache: "fp8", CapacityLevel: 12, MedianTPOTms: 25}}}
	cal := &calibrate.Result{Schema: calibrate.Schema, Model: "m", Strategy: "dataset:minmax:tensor", DType: "F16",
		Compare: &calibrate.Comparison{Verdict: &calibrate.CompareRecommends{Best: "dataset:minmax:tensor", Text: "dataset wins"}}, Files: []string{"kv_scales.json"}}
	audit := &calibrate.Audit{Schema: calibrate.AuditSchema, Source: "ckpt", Errors: 1, Findings: []calibrate.Finding{{Level: calibrate.LevelError, Message: "zero"}}}
	bp, cp, ap := put("bench.json", rep), put("calibrate.json", cal), put("audit.json", audit)
	other := put("other.json", map[string]string{"schema": "someone.else/v1"})
	res, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bench == nil || res.Bench.File != bp || !reflect.DeepEqual(res.Bench.Report, rep) {
		t.Errorf("bench: %+v, want %+v from %s", res.Bench, rep, bp)
	}
	if res.Calibrate == nil || res.Calibrate.File != cp || !reflect.DeepEqual(res.Calibrate.Result, cal) {
		t.Errorf("calibrate: %+v, want %+v from %s", res.Calibrate, cal, cp)
	}
	if res.Audit == nil || res.Audit.File != ap || !reflect.DeepEqual(res.Audit.Audit, audit) {
		t.Errorf("audit: %+v, want %+v from %s", res.Audit, audit, ap)
	}
	if len(res.Ignored) != 1 || res.Ignored[0] != other {
		t.Errorf("ignored %v, want [%s]", res.Ignored, other)
	}
	if got, want := benchText(res.Bench), "fp16: capacity 8, median TTFT 0 ms, TPOT 20.0 ms; fp8: capacity 12 (1.50×), TPOT 1.25× the baseline's"; got != want {
		t.Errorf("benchText = %q, want %q", got, want)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema": "kvq.bench/v1", "caches": [{"capacity": "many"}]}`), 0o644)
	if _, err := ReadResults(dir); !errors.Is(err, ErrResults) || !strings.Contains(err.Error(), bad) {
		t.Errorf("ReadResults with %s: %v, want ErrResults naming it", bad, err)
	}
}
