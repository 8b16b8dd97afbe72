package eval

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestGateResultJSONNaN: a gate whose metric was not measured (NaN) is
// written as "value": null, so that -o json and the report file work, and
// reads back as NaN.
func TestGateResultJSONNaN(t *testing.T) {
	for _, v := range []float64{math.NaN(), 0.25} {
		b, err := json.Marshal([]GateResult{{Cache: "int4", Value: v, Message: "x"}})
		if err != nil {
			t.Fatalf("Marshal(value %v): %v", v, err)
		}
		var back []GateResult
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := back[0].Value; !(got == v || math.IsNaN(got) && math.IsNaN(v)) || back[0].Cache != "int4" || back[0].Message != "x" {
			t.Errorf("value %v: wrote %s, read back %+v", v, b, back[0])
		}
		if math.IsNaN(v) && !strings.Contains(string(b), `"value":null`) {
			t.Errorf("NaN written as %s, want \"value\":null", b)
		}
	}
}
