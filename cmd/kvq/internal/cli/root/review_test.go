package root

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvqlabs/kvq/datasets/models"
)

// TestEvalReview: on the built-in model int2 flips copy and JSON items
// against fp16. The report's review section lists every flipped item once
// (as the JSON's flip counts say), regressions first, each with both
// caches' outputs, filterable by suite and cache; --log-samples marks
// the same items on the candidate's records, with the baseline's output,
// and no other record.
func TestEvalReview(t *testing.T) {
	if _, ok := models.ProbeModel(); !ok {
		t.Skip("this build has no built-in model")
	}
	dir := t.TempDir()
	report, samples := filepath.Join(dir, "R.html"), filepath.Join(dir, "S.jsonl")
	code, out, stderr := run(t, "eval", "--tasks", "copy,json", "-n", "6", "--no-text", "--no-speed", "--cache", "fp16,int2",
		"--report", report, "--log-samples", samples, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Suites []struct {
			Suite  string `json:"suite"`
			Caches []struct {
				Cache      string `json:"cache"`
				PassToFail int    `json:"pass_to_fail"`
				FailToPass int    `json:"fail_to_pass"`
			} `json:"caches"`
		} `json:"suites"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if strings.Contains(out, `"flip`) || strings.Contains(out, `"baseline_output"`) {
		t.Errorf("the JSON report gained flip fields:\n%s", out)
	}
	regressed, improved := 0, 0
	for _, s := range rep.Suites {
		regressed += s.Caches[1].PassToFail
		improved += s.Caches[1].FailToPass
	}
	if regressed == 0 {
		t.Fatalf("int2 regressed no item on the built-in model; the test needs flips: %s", out)
	}

	// The JSONL: the flipped records, keyed as the report's cards are.
	data, err := os.ReadFile(samples)
	if err != nil {
		t.Fatal(err)
	}
	type record struct {
		Suite, Cache, Metric, Output, Flipped string
		Index                                 int
		Pass                                  bool
		Baseline                              *struct {
			Cache, Output string
			Pass          bool
		}
	}
	var flipped []record
	out16 := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("sample line %q: %v", l, err)
		}
		key := fmt.Sprintf("%s#%d/%s", r.Suite, r.Index, r.Metric)
		if r.Cache == "fp16" {
			out16[key] = r.Output
		}
		if r.Flipped == "" {
			if r.Baseline != nil {
				t.Errorf("unflipped record has a baseline: %s", l)
			}
			continue
		}
		if r.Cache != "int2" || r.Baseline == nil || r.Baseline.Cache != "fp16" || r.Baseline.Pass == r.Pass ||
			(r.Flipped == "regressed") != r.Baseline.Pass || (r.Flipped != "regressed" && r.Flipped != "improved") {
			t.Errorf("flipped record %s", l)
		}
		flipped = append(flipped, r)
	}
	if len(flipped) != regressed+improved {
		t.Errorf("%d records flipped, the report counts %d regressed and %d improved", len(flipped), regressed, improved)
	}
	for _, r := range flipped {
		if key := fmt.Sprintf("%s#%d/%s", r.Suite, r.Index, r.Metric); r.Baseline != nil && out16[key] != r.Baseline.Output {
			t.Errorf("%s: the flipped record's baseline output %q, fp16's record %q", key, r.Baseline.Output, out16[key])
		}
	}

	// The HTML review: one card per flipped record, regressions first,
	// both outputs in each, and the filters.
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	i := strings.Index(page, "<h2>Review: flipped items</h2>")
	if i < 0 {
		t.Fatalf("report has no review section")
	}
	review := page[i:]
	if j := strings.Index(review, "</section>"); j >= 0 {
		review = review[:j]
	}
	for _, want := range []string{`<select data-filter="0"><option value="">all</option><option>copy</option>`, `<option>int2</option>`, "<script>"} {
		if !strings.Contains(review+page[strings.LastIndex(page, "</main>"):], want) {
			t.Errorf("review lacks %q", want)
		}
	}
	cards := strings.Split(review, `<article class="card"`)[1:]
	if len(cards) != len(flipped) {
		t.Fatalf("review lists %d items, want %d", len(cards), len(flipped))
	}
	seenImproved := false
	for _, r := range flipped {
		title := fmt.Sprintf("<h3>%s #%d · %s · int2", r.Suite, r.Index, r.Metric)
		var card string
		for _, c := range cards {
			if strings.Contains(c, title+"<") {
				card = c
			}
		}
		if card == "" {
			t.Errorf("review lacks %q", title)
			continue
		}
		// Unescaped, the card shows the outputs as the model wrote them.
		text := html.UnescapeString(card)
		for _, want := range []string{
			"<pre>" + r.Baseline.Output + "</pre>",
			"<pre>" + r.Output + "</pre>",
			`>` + r.Flipped + `</span>`,
			fmt.Sprintf(`data-tags="["%s","int2"]"`, r.Suite),
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: card lacks %q:\n%s", title, want, card)
			}
		}
	}
	for _, c := range cards {
		isImproved := strings.Contains(c, ">improved</span>")
		if seenImproved && !isImproved {
			t.Errorf("a regression follows an improvement in the review")
		}
		seenImproved = seenImproved || isImproved
	}
}
