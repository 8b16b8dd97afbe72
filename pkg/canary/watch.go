package canary

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/pkg/openai"
	"github.com/kvqlabs/kvq/pkg/plan"
)

// maxHistory bounds the scrapes a watch keeps for its latency spans.
const maxHistory = 1000

// maxActions bounds the switch attempts a report lists.
const maxActions = 20

// Schema names the report's JSON format (JSONSchema describes it).
const Schema = "kvq.canary/v1"

// Endpoint is one deployment.
type Endpoint struct {
	// URL is the server's base URL (its OpenAI API under /v1 and its
	// Prometheus metrics under /metrics).
	URL string
	// MetricsURL overrides URL + "/metrics".
	MetricsURL string
	// APIKey is sent as a bearer token, to the API and the metrics.
	APIKey string
	// Model is the model id the probe sends (empty: the server's default).
	Model string
	// Cache, when set, keeps only the series labelled cache="Cache": one
	// cache of a kvq serve that serves both sides of the canary. Without a
	// Model the probe then asks the server's /v1/models for the id that
	// pins requests to Cache (kvq serve's NAME@CACHE), so that it reaches
	// that cache rather than the routed split.
	Cache string
}

// Act configures the switch a rollback pulls: kvq serve's admin route on
// the candidate server.
type Act struct {
	// RouteCache is the cache of the candidate server's --route whose
	// share a rollback sets to 0.
	RouteCache string
	// APIKey is the candidate server's API key.
	APIKey string
}

// Options configure Watch.
type Options struct {
	Baseline, Candidate Endpoint
	// Duration bounds the watch; 0 watches until ctx ends.
	Duration time.Duration
	// StopEarly ends the watch at the first window whose verdict is
	// promote or rollback.
	StopEarly bool
	// Window is the time between two scrapes, over which the deltas are
	// taken (default 30 s).
	Window time.Duration
	// Policy is the gates (default DefaultPolicy).
	Policy Policy
	// Probe configures the quality probe; nil runs none.
	Probe *ProbeOptions
	// Act, when set, pulls the switch on the first rollback.
	Act *Act
	// HTTP makes every request (default: a client with a 60 s timeout).
	HTTP *http.Client
}

// EndpointInfo names a deployment in a report.
type EndpointInfo struct {
	URL    string `json:"url"`
	Engine string `json:"engine"`
}

// Result is the verdict.
type Result struct {
	// Verdict is promote, hold or rollback.
	Verdict string `json:"verdict"`
	// Reasons are the evidence: the failed gates for a rollback, what is
	// missing for a hold.
	Reasons []string `json:"reasons"`
}

// Action is a switch kvq pulled.
type Action struct {
	Time    time.Time `json:"time"`
	URL     string    `json:"url"`
	Cache   string    `json:"cache"`
	Percent float64   `json:"percent"`
	OK      bool      `json:"ok"`
	// Status is the HTTP status (0 when the request failed to be sent).
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Report is one window's judgement, or the watch's final one.
type Report struct {
	Schema string `json:"schema"`
	// Kind is "window" or "final".
	Kind string `json:"kind"`
	// Window counts the windows (1 is the first).
	Window    int          `json:"window"`
	Start     time.Time    `json:"start"`
	End       time.Time    `json:"end"`
	Elapsed   float64      `json:"elapsed_seconds"`
	Baseline  EndpointInfo `json:"baseline"`
	Candidate EndpointInfo `json:"candidate"`
	// Interval is this window's metrics, Total the whole watch's.
	Interval EngineWindowPair `json:"interval"`
	Total    EngineWindowPair `json:"total"`
	// Ratios are the candidate's latency quantiles over the baseline's in
	// this window ("ttft-p95": 1.1); null where either is missing.
	Ratios map[string]*float64 `json:"ratios"`
	Probe  *ProbeStats         `json:"probe"`
	Gates  []GateResult        `json:"gates"`
	Result Result              `json:"result"`
	// Actions are the switches pulled so far.
	Actions []Action `json:"actions"`
	// Errors are this window's scrape failures (the window is then not
	// judged: the verdict is the previous one).
	Errors []string `json:"errors"`
}

// ExitCode is the verdict's exit code for a CI job: 0 promote, 3
// rollback, 4 hold.
func (r *Report) ExitCode() int {
	switch r.Result.Verdict {
	case Promote:
		return 0
	case Rollback:
		return 3
	}
	return 4
}

// MarshalJSON writes ProbeStats' NaN KLD as null.
func (s ProbeStats) MarshalJSON() ([]byte, error) {
	type plain ProbeStats
	return json.Marshal(struct {
		plain
		KLD *float64 `json:"kld"`
	}{plain(s), num(s.KLD)})
}

// Watch judges the canary window after window until opts.Duration has
// passed (then the last report, marked final, is returned) or ctx ends
// (then the last report and ctx's error). onWindow, when set, receives
// each window's report.
func Watch(ctx context.Context, opts Options, onWindow func(*Report)) (*Report, error) {
	if opts.Baseline.URL == "" || opts.Candidate.URL == "" {
		return nil, fmt.Errorf("%w: a baseline and a candidate URL", ErrOptions)
	}
	if opts.Window <= 0 {
		opts.Window = 30 * time.Second
	}
	if opts.Policy.Gates == nil {
		opts.Policy = DefaultPolicy()
	}
	if err := opts.Policy.Check(); err != nil {
		return nil, err
	}
	if opts.Act != nil && opts.Act.RouteCache == "" {
		return nil, fmt.Errorf("%w: acting needs the candidate's route cache", ErrOptions)
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	eps := [2]Endpoint{opts.Baseline, opts.Candidate}
	scrape := func(ctx context.Context) ([2]plan.Snapshot, []string) {
		var snaps [2]plan.Snapshot
		var errs []string
		for i, e := range eps {
			u := e.MetricsURL
			if u == "" {
				u = plan.MetricsURL(e.URL)
			}
			s, err := scrapeOne(ctx, opts.HTTP, u, e.APIKey, e.Cache)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", [2]string{"baseline", "candidate"}[i], err))
			}
			snaps[i] = s
		}
		return snaps, errs
	}
	start := time.Now()
	first, errs := scrape(ctx)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrScrape, strings.Join(errs, "; "))
	}
	var pr *probe
	probeCtx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan struct{})
	defer func() {
		stopProbe()
		<-probeDone
	}()
	if opts.Probe != nil {
		clients := [2]*openai.Client{}
		for i, e := range eps {
			clients[i] = &openai.Client{BaseURL: e.URL, APIKey: e.APIKey, Model: e.Model, HTTP: opts.HTTP}
			if e.Cache != "" && e.Model == "" {
				id, err := pinnedModel(ctx, clients[i], e.Cache)
				if err != nil {
					close(probeDone)
					return nil, fmt.Errorf("%s: %w", [2]string{"baseline", "candidate"}[i], err)
				}
				clients[i].Model = id
			}
		}
		var err error
		if pr, err = newProbe(*opts.Probe, clients[0], clients[1]); err != nil {
			close(probeDone)
			return nil, err
		}
		go func() {
			defer close(probeDone)
			pr.run(probeCtx)
		}()
	} else {
		close(probeDone)
	}
	j := &judge{policy: opts.Policy, history: map[string][]string{}}
	prev := first
	history := [][2]plan.Snapshot{first}
	last := &Report{Schema: Schema, Kind: "window", Start: start, End: start, Result: Result{Verdict: Hold, Reasons: []string{"no window yet"}},
		Baseline: EndpointInfo{URL: opts.Baseline.URL, Engine: first[0].Engine}, Candidate: EndpointInfo{URL: opts.Candidate.URL, Engine: first[1].Engine},
		Actions: []Action{}, Errors: []string{}, Gates: []GateResult{}}
	acted := false
	tick := time.NewTicker(opts.Window)
	defer tick.Stop()
	for w := 1; ; w++ {
		select {
		case <-ctx.Done():
			last.Kind = "final"
			return last, ctx.Err()
		case <-tick.C:
		}
		cur, errs := scrape(ctx)
		now := time.Now()
		rep := &Report{Schema: Schema, Kind: "window", Window: w, Start: prev[0].Time, End: now, Elapsed: now.Sub(start).Seconds(),
			Baseline: last.Baseline, Candidate: last.Candidate, Actions: last.Actions, Errors: []string{}, Gates: []GateResult{}}
		if ctx.Err() != nil {
			last.Kind = "final"
			return last, ctx.Err()
		}
		if len(errs) > 0 {
			rep.Errors, rep.Result, rep.Gates = errs, last.Result, last.Gates
			rep.Interval, rep.Total, rep.Ratios, rep.Probe = last.Interval, last.Total, last.Ratios, last.Probe
		} else {
			rep.Interval = EngineWindowPair{Baseline: Between(prev[0], cur[0]), Candidate: Between(prev[1], cur[1])}
			rep.Total = EngineWindowPair{Baseline: Between(first[0], cur[0]), Candidate: Between(first[1], cur[1])}
			rep.Baseline.Engine, rep.Candidate.Engine = cur[0].Engine, cur[1].Engine
			rep.Ratios = ratios(rep.Interval)
			if history = append(history, cur); len(history) > maxHistory {
				history = history[len(history)-maxHistory:]
			}
			ev := evidence{window: rep.Interval, total: rep.Total, windows: w, history: history, present: map[string]bool{
				"ttft": cur[0].TTFT != nil && cur[1].TTFT != nil,
				"itl":  cur[0].ITL != nil && cur[1].ITL != nil,
				"e2e":  cur[0].E2E != nil && cur[1].E2E != nil,
			}}
			if pr != nil {
				st, err := pr.stats()
				if err != nil {
					return last, err
				}
				rep.Probe, ev.probe = &st, &st
			}
			rep.Gates, rep.Result.Verdict, rep.Result.Reasons = j.judgeWindow(ev)
			prev = cur
		}
		if rep.Result.Verdict == Rollback && opts.Act != nil && !acted {
			a := SetRoute(ctx, opts.HTTP, opts.Candidate.URL, opts.Act.APIKey, opts.Act.RouteCache, 0,
				"kvq canary: rollback ("+strings.Join(rep.Result.Reasons, "; ")+")")
			acted = a.OK
			// A failing switch is retried each window; the report keeps
			// the last maxActions attempts.
			rep.Actions = append(append([]Action{}, rep.Actions...), a)
			if len(rep.Actions) > maxActions {
				rep.Actions = rep.Actions[len(rep.Actions)-maxActions:]
			}
		}
		done := opts.Duration > 0 && now.Sub(start) >= opts.Duration-opts.Window/10 ||
			opts.StopEarly && len(errs) == 0 && rep.Result.Verdict != Hold
		if done {
			rep.Kind = "final"
		}
		last = rep
		if onWindow != nil {
			onWindow(rep)
		}
		if done {
			return rep, nil
		}
	}
}

// pinnedModel is the model id that pins a kvq serve's requests to cache
// (NAME@CACHE, as GET /v1/models lists it): the probe of an endpoint read
// by its cache's metrics must reach that cache, not the routed split.
func pinnedModel(ctx context.Context, c *openai.Client, cache string) (string, error) {
	ms, err := c.Models(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: the model id of cache %s: %v", ErrScrape, cache, err)
	}
	for _, m := range ms {
		if m.Cache == cache && strings.HasSuffix(m.ID, "@"+cache) {
			return m.ID, nil
		}
	}
	return "", fmt.Errorf("%w: the server lists no model id for cache %q (a kvq serve lists NAME@CACHE); give the model id", ErrOptions, cache)
}

// scrapeOne reads url once, keeping only the series of cache when set.
func scrapeOne(ctx context.Context, client *http.Client, url, apiKey, cache string) (plan.Snapshot, error) {
	if cache == "" {
		return plan.ScrapeOnce(ctx, client, url, apiKey)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return plan.Snapshot{}, err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return plan.Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return plan.Snapshot{}, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	series, err := plan.ParseMetrics(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return plan.Snapshot{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	kept := series[:0]
	for _, x := range series {
		if x.Labels["cache"] == cache {
			kept = append(kept, x)
		}
	}
	if len(kept) == 0 {
		return plan.Snapshot{}, fmt.Errorf("scrape %s: no series labelled cache=%q", url, cache)
	}
	return plan.Reduce(kept, time.Now()), nil
}

// ratios are the candidate's latency quantiles over the baseline's.
func ratios(p EngineWindowPair) map[string]*float64 {
	out := map[string]*float64{}
	for _, f := range latencyFamilies {
		for _, pct := range latencyPercents {
			var b, c float64
			switch f {
			case "ttft":
				b, c = p.Baseline.TTFT.at(pct), p.Candidate.TTFT.at(pct)
			case "itl":
				b, c = p.Baseline.ITL.at(pct), p.Candidate.ITL.at(pct)
			default:
				b, c = p.Baseline.E2E.at(pct), p.Candidate.E2E.at(pct)
			}
			var v *float64
			if b > 0 && !math.IsNaN(c) {
				v = num(c / b)
			}
			out[fmt.Sprintf("%s-p%d", f, pct)] = v
		}
	}
	return out
}
