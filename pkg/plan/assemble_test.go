package plan

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/calibrate"
	"github.com/kvqlabs/kvq/pkg/estimate"
	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// TestAssemble: Assemble reads the trace (or takes the stated lengths),
// scrapes the endpoint with progress, analyses step 1 as Analyze does,
// reads the results directory into the plan, and sorts its failures into
// input errors and the others.
func TestAssemble(t *testing.T) {
	m, err := estimate.LookupModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	os.WriteFile(trace, []byte("{\"input_tokens\": 9000, \"output_tokens\": 100}\n{\"input_tokens\": 7000, \"output_tokens\": 300}\n"), 0o644)

	t.Run("trace", func(t *testing.T) {
		p, err := Assemble(ctx, Options{Model: m}, Evidence{Trace: trace, Lengths: &Traffic{Source: "ignored", InputP95: 1}})
		if err != nil {
			t.Fatal(err)
		}
		tr, _ := ReadTrace(trace)
		if want := Analyze(nil, tr); !reflect.DeepEqual(p.Step1, want) {
			t.Errorf("Step1 = %+v, want %+v", p.Step1, want)
		}
	})
	t.Run("lengths", func(t *testing.T) {
		tr := &Traffic{Source: "stated", InputMean: 8000, InputP95: 8000, OutputMean: 500, OutputP95: 500}
		p, err := Assemble(ctx, Options{Model: m}, Evidence{Lengths: tr})
		if err != nil {
			t.Fatal(err)
		}
		if p.Step1.Traffic == nil || p.Step1.Traffic.Source != "stated" {
			t.Errorf("Step1.Traffic = %+v, want the stated lengths", p.Step1.Traffic)
		}
	})
	t.Run("endpoint", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := os.ReadFile(filepath.Join("testdata", "vllm-kvbound-1.txt"))
			w.Write(b)
		}))
		defer srv.Close()
		calls := 0
		p, err := Assemble(ctx, Options{Model: m, Endpoint: srv.URL}, Evidence{Trace: trace,
			Scrape: ScrapeOptions{Duration: 20 * time.Millisecond, Interval: 10 * time.Millisecond, Progress: func(done, total int) { calls++ }}})
		if err != nil {
			t.Fatal(err)
		}
		if calls == 0 || p.Step1.Samples == 0 {
			t.Errorf("progress calls %d, samples %d: want the scrape reported and analysed", calls, p.Step1.Samples)
		}
		if p.Step1.Traffic == nil || p.Step1.Traffic.Requests != 2 {
			t.Errorf("Step1.Traffic = %+v, want the trace's 2 requests", p.Step1.Traffic)
		}
	})
	t.Run("results", func(t *testing.T) {
		res := t.TempDir()
		file := filepath.Join(res, "audit.json")
		os.WriteFile(file, []byte(`{"schema": "`+calibrate.AuditSchema+`", "errors": 0}`), 0o644)
		p, err := Assemble(ctx, Options{Model: m}, Evidence{Results: res})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{file}; !reflect.DeepEqual(p.Measured, want) {
			t.Errorf("Measured = %q, want %q", p.Measured, want)
		}
	})
	t.Run("errors", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.jsonl")
		os.WriteFile(bad, []byte("{\"x\": 1}\n"), 0o644)
		if _, err := Assemble(ctx, Options{Model: m}, Evidence{Trace: bad}); !errors.Is(err, ErrTrace) || !kvqerr.IsInput(err) {
			t.Errorf("bad trace: %v, want an input error wrapping ErrTrace", err)
		}
		if _, err := Assemble(ctx, Options{Model: m}, Evidence{Results: trace}); !errors.Is(err, ErrResults) || !kvqerr.IsInput(err) {
			t.Errorf("results not a directory: %v, want an input error wrapping ErrResults", err)
		}
		if _, err := Assemble(ctx, Options{Model: m, Engine: "bogus"}, Evidence{}); err == nil || !kvqerr.IsInput(err) {
			t.Errorf("bad engine: %v, want an input error", err)
		}
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		_, err := Assemble(ctx, Options{Model: m, Endpoint: srv.URL}, Evidence{Scrape: ScrapeOptions{Duration: 10 * time.Millisecond, Interval: 5 * time.Millisecond}})
		if !errors.Is(err, ErrMetrics) || kvqerr.IsInput(err) {
			t.Errorf("failed scrape: %v, want ErrMetrics, not an input error", err)
		}
	})
}
