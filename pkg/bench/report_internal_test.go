package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCacheReportGoodput: a cache's headline request_goodput is null when
// no goodput SLOs were asked for (the summary has none), not 0, and the
// last point's goodput when they were.
func TestCacheReportGoodput(t *testing.T) {
	g := 2.5
	r := &Report{Caches: []CacheReport{
		{Cache: "fp16", Points: []PointReport{{Summary: Summary{RequestThroughput: 3}}}},
		{Cache: "fp8", Points: []PointReport{{Summary: Summary{RequestThroughput: 3}}, {Summary: Summary{RequestGoodput: &g}}}},
	}}
	r.fill()
	for i, want := range []string{`"request_goodput":null`, `"request_goodput":2.5`} {
		c := r.Caches[i]
		c.Points = nil
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: %s, want %s", c.Cache, b, want)
		}
	}
	g = 7 // the report keeps its own copy
	if *r.Caches[1].RequestGoodput != 2.5 {
		t.Errorf("request_goodput follows the summary's variable: %v", *r.Caches[1].RequestGoodput)
	}
}
