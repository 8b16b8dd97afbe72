// Package canary implements kvq canary over pkg/canary: watch (a bounded
// or continuous judgement with a live view or JSON lines) and
// serve-verdict (the same judgement served over HTTP for Argo Rollouts and
// Flagger).
package canary

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/canary"
	"github.com/kvqlabs/kvq/pkg/eval"
	"github.com/spf13/cobra"
)

// APIKeyEnv is read for --api-key when the flag is not given (kvq serve's
// variable).
const APIKeyEnv = "KVQ_API_KEY"

// Options are the flags of kvq canary watch and serve-verdict.
type Options struct {
	IO             *cmdutil.IOStreams
	Baseline       string
	Candidate      string
	BaselineModel  string
	CandidateModel string
	BaselineCache  string
	CandidateCache string
	APIKey         string
	Duration       time.Duration
	StopEarly      bool
	Window         time.Duration
	PolicyFile     string
	Gates          []string
	MinWindows     int
	MinSamples     int
	MinRequests    int
	FailWindows    int
	Alpha          float64
	LatencyFloor   time.Duration
	ProbeRPM       float64
	ProbeN         int
	Tasks          string
	TopLogprobs    int
	RefusalFile    string
	RefusalMode    string
	Output         string
	Act            bool
	RouteCache     string
	Listen         string

	policy  canary.Policy
	suites  []eval.Suite
	refusal *eval.RefusalDetector
}

// NewCmd returns kvq canary with its two subcommands.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "canary",
		Short: "Judge a live canary (metrics and a quality probe): promote, hold or rollback",
		Long: `kvq canary watches a baseline and a candidate deployment of one model side by
side (OpenAI-compatible servers with Prometheus /metrics: vLLM, SGLang,
llama-server, kvq serve) and says whether to promote the candidate, hold, or
roll it back — the judge a gateway, Argo Rollouts, Flagger or a CI job
consults. It does not route traffic.

  kvq canary watch          a bounded (or continuous) watch; exit code = verdict
  kvq canary serve-verdict  the same watch, its verdict served over HTTP

Exit codes: 0 promote, 3 rollback, 4 hold (kvq canary watch), 1 runtime
failure, 2 usage error (bad flag, policy or tasks file), 130 interrupted.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newWatchCmd(f, nil), newServeVerdictCmd(f, nil))
	return cmd
}

const gatesHelp = `Each window (--window) both engines' /metrics are scraped and compared:
error and abort rates (finished_reason counters), TTFT, inter-token and
end-to-end latency p50/p95/p99 from the histograms' deltas (computed as
Prometheus' histogram_quantile), preemptions per request and KV-cache usage.
A quality probe sends the same prompts to both deployments greedily
(temperature 0) at --probe-rpm: the built-in probe set (refusals, JSON, copy)
or --tasks FILE.jsonl as kvq eval reads it, each item scored with kvq eval's
metrics; flips (baseline pass, candidate fail; refusals first), exact-match
drift and, where the servers return logprobs, the top-k KLD.

Gates (--gate METRIC=MAX, repeatable, or a --policy YAML/JSON file):
  error-rate, abort-rate, probe-error-rate   candidate rate − baseline rate (if significant)
  ttft-p50|p95|p99, itl-…, e2e-…              candidate / baseline quantile, per window
  preemption-rate                             preemptions per request, candidate − baseline
  kv-usage                                    candidate KV usage (0..1)
  flips                                       regressed probe items (if significant: McNemar)
  exact-drift, kld                            share of differing outputs; mean top-k KLD
Default: error-rate=0.01 abort-rate=0.05 probe-error-rate=0.05 ttft-p95=1.5
itl-p95=1.5 preemption-rate=0.05 flips=0.

Verdicts: rollback when a gate failed significantly (latency: --fail-windows
windows in a row); promote when every gate passed with enough evidence
(--min-windows windows, --min-samples probe items, --min-requests requests);
hold otherwise.`

func addFlags(cmd *cobra.Command, o *Options, duration time.Duration) {
	fl := cmd.Flags()
	fl.StringVar(&o.Baseline, "baseline", "", "the baseline server's base URL (its /v1 API and /metrics)")
	fl.StringVar(&o.Candidate, "candidate", "", "the candidate server's base URL")
	fl.StringVar(&o.BaselineModel, "baseline-model", "", "model id the probe sends to the baseline (default: NAME@CACHE with --baseline-cache, else the server's default)")
	fl.StringVar(&o.CandidateModel, "candidate-model", "", "model id the probe sends to the candidate")
	fl.StringVar(&o.BaselineCache, "baseline-cache", "", "read only the baseline's metrics labelled cache=NAME, and probe that cache (both sides on one kvq serve)")
	fl.StringVar(&o.CandidateCache, "candidate-cache", "", "read only the candidate's metrics labelled cache=NAME, and probe that cache")
	fl.StringVar(&o.APIKey, "api-key", "", "the servers' API key, sent as a bearer token (default: $"+APIKeyEnv+", better: other users see flags in ps; never printed)")
	fl.DurationVar(&o.Duration, "duration", duration, "how long to watch; 0 watches until interrupted")
	fl.BoolVar(&o.StopEarly, "stop-early", false, "end at the first window whose verdict is promote or rollback (a CI job's watch)")
	fl.DurationVar(&o.Window, "window", 30*time.Second, "time between scrapes: the window each comparison covers")
	fl.StringVar(&o.PolicyFile, "policy", "", "gates and evidence as YAML or JSON (gates: [{metric, max}], min_windows, min_samples, min_requests, fail_windows, alpha, latency_floor)")
	fl.StringArrayVar(&o.Gates, "gate", nil, "METRIC=MAX: a gate, replacing the policy's gate of that metric (repeatable)")
	fl.IntVar(&o.MinWindows, "min-windows", 0, "windows a promote needs (default 3)")
	fl.IntVar(&o.MinSamples, "min-samples", 0, "probe items a quality judgement needs (default 20)")
	fl.IntVar(&o.MinRequests, "min-requests", 0, "requests or latency observations per side a rate or latency gate needs (default 10)")
	fl.IntVar(&o.FailWindows, "fail-windows", 0, "failing windows in a row that fail a latency gate (default 2)")
	fl.Float64Var(&o.Alpha, "alpha", 0, "significance level of the rate and flips tests (default 0.05)")
	fl.DurationVar(&o.LatencyFloor, "latency-floor", 0, "a latency gate fails only this far above the baseline's quantile (default 50ms)")
	fl.Float64Var(&o.ProbeRPM, "probe-rpm", 60, "quality probe items per minute, each one request to each server; 0: no probe")
	fl.IntVar(&o.ProbeN, "probe-n", 8, "built-in probe set: examples per generator (5 × N tasks)")
	fl.StringVar(&o.Tasks, "tasks", "builtin", "probe tasks: builtin, or tasks files (.jsonl, comma-separated) as kvq eval --tasks reads them")
	fl.StringVar(&o.RefusalFile, "refusal-phrases", "", "refusal phrases for --tasks' refusal metrics, one per line (default: XSTest's and AdvBench's lists)")
	fl.StringVar(&o.RefusalMode, "refusal-mode", "prefix", "refusal detection: prefix (the output starts with a phrase) or contains (anywhere)")
	fl.IntVar(&o.TopLogprobs, "top-logprobs", 5, "alternatives asked per generated token for the KLD (0: none)")
	fl.BoolVar(&o.Act, "act", false, "on rollback, set the candidate kvq serve's --route share of --route-cache to 0% (POST /admin/route with --api-key)")
	fl.StringVar(&o.RouteCache, "route-cache", "", "with --act: the candidate cache of the kvq serve --route")
	cmd.MarkFlagRequired("baseline")
	cmd.MarkFlagRequired("candidate")
}

// Validate checks the flags and reads the policy and the tasks.
func (o *Options) Validate(cmd *cobra.Command) error {
	switch {
	case o.Baseline == "" || o.Candidate == "":
		return cmdutil.FlagErrorf("--baseline and --candidate: both servers' URLs are required")
	case o.Duration < 0:
		return cmdutil.FlagErrorf("--duration %v: must be ≥ 0 (0 watches until interrupted)", o.Duration)
	case o.Window <= 0:
		return cmdutil.FlagErrorf("--window %v: must be positive", o.Window)
	case o.Duration > 0 && o.Duration < o.Window:
		return cmdutil.FlagErrorf("--duration %v is shorter than one --window %v", o.Duration, o.Window)
	case o.ProbeRPM < 0 || o.ProbeN < 1:
		return cmdutil.FlagErrorf("--probe-rpm %g must be ≥ 0 and --probe-n %d positive", o.ProbeRPM, o.ProbeN)
	case o.TopLogprobs < 0 || o.TopLogprobs > 20:
		return cmdutil.FlagErrorf("--top-logprobs %d: must be in 0..20", o.TopLogprobs)
	case o.Act && o.RouteCache == "":
		return cmdutil.FlagErrorf("--act needs --route-cache (the candidate cache of kvq serve --route)")
	case !o.Act && o.RouteCache != "":
		return cmdutil.FlagErrorf("--route-cache is used only with --act")
	case o.Output != "table" && o.Output != "json":
		return cmdutil.FlagErrorf("--output %q: table or json", o.Output)
	}
	for _, u := range []string{o.Baseline, o.Candidate} {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return cmdutil.FlagErrorf("%q: a server URL starts with http:// or https://", u)
		}
	}
	if o.APIKey == "" {
		o.APIKey = os.Getenv(APIKeyEnv)
	}
	o.policy = canary.DefaultPolicy()
	if o.PolicyFile != "" {
		b, err := os.ReadFile(o.PolicyFile)
		if err != nil {
			return cmdutil.UsageError(fmt.Errorf("--policy: %w", err))
		}
		if o.policy, err = canary.ParsePolicy(b, o.PolicyFile); err != nil {
			return err
		}
	}
	for _, s := range o.Gates {
		g, err := canary.ParseGate(s)
		if err != nil {
			return cmdutil.FlagErrorf("--gate: %w", err)
		}
		o.policy.Gates = replaceGate(o.policy.Gates, g)
	}
	fl := cmd.Flags()
	for name, dst := range map[string]*int{"min-windows": &o.policy.MinWindows, "min-samples": &o.policy.MinSamples, "min-requests": &o.policy.MinRequests, "fail-windows": &o.policy.FailWindows} {
		if fl.Changed(name) {
			*dst = map[string]int{"min-windows": o.MinWindows, "min-samples": o.MinSamples, "min-requests": o.MinRequests, "fail-windows": o.FailWindows}[name]
		}
	}
	if fl.Changed("alpha") {
		o.policy.Alpha = o.Alpha
	}
	if fl.Changed("latency-floor") {
		if o.LatencyFloor <= 0 {
			return cmdutil.FlagErrorf("--latency-floor %v: must be positive", o.LatencyFloor)
		}
		o.policy.LatencyFloor = canary.Duration(o.LatencyFloor)
	}
	if err := o.policy.Check(); err != nil {
		return cmdutil.FlagErrorf("%w", err)
	}
	if err := o.readRefusal(); err != nil {
		return err
	}
	return o.readTasks(cmd.Context())
}

// replaceGate puts g in place of gs' gate of its metric, or appends it.
func replaceGate(gs []canary.Gate, g canary.Gate) []canary.Gate {
	out := make([]canary.Gate, 0, len(gs)+1)
	for _, x := range gs {
		if x.Metric != g.Metric {
			out = append(out, x)
		}
	}
	return append(out, g)
}

// readRefusal builds the refusal detector, as kvq eval does.
func (o *Options) readRefusal() error {
	mode, err := eval.ParseRefusalMode(o.RefusalMode)
	if err != nil {
		return cmdutil.FlagErrorf("--refusal-mode: %w", err)
	}
	o.refusal = &eval.RefusalDetector{Mode: mode, Phrases: eval.DefaultRefusalPhrases()}
	if o.RefusalFile == "" {
		return nil
	}
	f, err := os.Open(o.RefusalFile)
	if err != nil {
		return cmdutil.FlagErrorf("--refusal-phrases: %w", err)
	}
	defer f.Close()
	if o.refusal.Phrases, err = eval.LoadRefusalPhrases(f); err != nil {
		return cmdutil.FlagErrorf("--refusal-phrases %s: %w", o.RefusalFile, err)
	}
	return nil
}

// readTasks draws the built-in probe set or reads the tasks files.
func (o *Options) readTasks(ctx context.Context) error {
	o.suites = nil
	if o.ProbeRPM == 0 || o.Tasks == "none" {
		return nil
	}
	if o.Tasks == "builtin" || o.Tasks == "" {
		s, err := canary.BuiltinProbe(ctx, o.ProbeN)
		if err != nil {
			return err
		}
		o.suites = s
		return nil
	}
	for _, p := range strings.Split(o.Tasks, ",") {
		b, err := os.ReadFile(p)
		if err != nil {
			return cmdutil.UsageError(fmt.Errorf("--tasks: %w", err))
		}
		s, err := eval.ParseTasks(b, p)
		if err != nil {
			return err
		}
		o.suites = append(o.suites, s...)
	}
	return nil
}

// watchOptions are the library's options.
func (o *Options) watchOptions() canary.Options {
	opts := canary.Options{
		Baseline:  canary.Endpoint{URL: o.Baseline, APIKey: o.APIKey, Model: o.BaselineModel, Cache: o.BaselineCache},
		Candidate: canary.Endpoint{URL: o.Candidate, APIKey: o.APIKey, Model: o.CandidateModel, Cache: o.CandidateCache},
		Duration:  o.Duration, StopEarly: o.StopEarly, Window: o.Window, Policy: o.policy,
		HTTP: &http.Client{Timeout: 60 * time.Second},
	}
	if o.suites != nil {
		k := o.TopLogprobs
		if k == 0 {
			k = -1
		}
		opts.Probe = &canary.ProbeOptions{Suites: o.suites, RPM: o.ProbeRPM, TopLogprobs: k, Refusal: o.refusal}
	}
	if o.Act {
		opts.Act = &canary.Act{RouteCache: o.RouteCache, APIKey: o.APIKey}
	}
	return opts
}

func newWatchCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "watch --baseline URL --candidate URL",
		Short: "Watch a canary; exit with its verdict (0 promote, 3 rollback, 4 hold)",
		Long: `kvq canary watch judges a canary for --duration (0: until interrupted) and
exits with the verdict, so that a CI job or an Argo Rollouts Job-based
analysis can run it. A live view rewrites its lines each window on a
terminal (plain lines otherwise); --output json writes one kvq.canary/v1
object per window and a final one (kind "final").

` + gatesHelp + `

Exit codes: 0 promote, 3 rollback, 4 hold (a bounded watch without enough
evidence), 1 runtime failure (a server that cannot be scraped at the
start), 2 usage error (bad flag, policy or tasks file, or an --act key or
route cache the candidate refuses), 130 interrupted.`,
		Example: `  kvq canary watch --baseline http://vllm-a:8000 --candidate http://vllm-b:8000   # your own
  kvq canary watch --baseline http://a:8000 --candidate http://b:8000 -o json   # your own
  kvq canary watch --baseline http://a:8000 --candidate http://kvq:8000 --act \
    --route-cache int4 --duration 0   # your own servers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.RunWatch(cmd.Context())
		},
	}
	addFlags(cmd, o, 5*time.Minute)
	cmd.Flags().StringVarP(&o.Output, "output", "o", "table", "output: table (a live view) or json (one object per window and a final one)")
	return cmd
}

// checkAct asks the candidate, before a watch with --act, whether its
// admin route takes --api-key and has a route to --route-cache, so that a
// wrong key or cache fails at the start (exit 2) rather than when a
// rollback needs the switch.
func (o *Options) checkAct(ctx context.Context, client *http.Client) error {
	if !o.Act {
		return nil
	}
	if err := canary.CheckRoute(ctx, client, o.Candidate, o.APIKey, o.RouteCache); err != nil {
		return fmt.Errorf("--act (--candidate %s, --route-cache %s, --api-key or $%s): %w", o.Candidate, o.RouteCache, APIKeyEnv, err)
	}
	return nil
}

// RunWatch runs the watch and maps its verdict to the exit code.
func (o *Options) RunWatch(ctx context.Context) error {
	wo := o.watchOptions()
	if err := o.checkAct(ctx, wo.HTTP); err != nil {
		return err
	}
	v := newView(o.IO, o.Output == "json")
	rep, err := canary.Watch(ctx, wo, v.window)
	if err != nil {
		if rep != nil && errors.Is(err, context.Canceled) {
			v.final(rep)
		}
		return err
	}
	v.final(rep)
	return verdictError(rep, o.Act)
}

// verdictError is the error a watch's final report exits with: nil on
// promote, a GateError (exit 3) on rollback, a HoldError (exit 4) on hold.
// A rollback whose switch (--act) failed still exits 3, its message
// saying that the candidate's share was not set to 0%.
func verdictError(rep *canary.Report, act bool) error {
	switch rep.Result.Verdict {
	case canary.Rollback:
		what := "canary gate(s) (verdict rollback)"
		if act && len(rep.Actions) > 0 && !slices.ContainsFunc(rep.Actions, func(a canary.Action) bool { return a.OK }) {
			a := rep.Actions[len(rep.Actions)-1]
			what = fmt.Sprintf("canary gate(s) (verdict rollback; --act did NOT set %s's share to 0%%: %s)", a.Cache, a.Error)
		}
		return &cmdutil.GateError{Failed: len(rep.Result.Reasons), What: what}
	case canary.Hold:
		return &cmdutil.HoldError{Reason: strings.Join(rep.Result.Reasons, "; ")}
	}
	return nil
}
