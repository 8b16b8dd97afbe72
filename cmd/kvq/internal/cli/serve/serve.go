// Package serve implements kvq serve: the in-process engine behind an
// OpenAI-compatible HTTP API (pkg/serve), one KV pool per --cache spec.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/datasets/models"
	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/serve"
	"github.com/spf13/cobra"
)

// APIKeyEnv is the environment variable kvq serve reads the API key from
// when --api-key is not given.
const APIKeyEnv = "KVQ_API_KEY"

// Options are kvq serve's flags.
type Options struct {
	IO            *cmdutil.IOStreams
	Model         string
	Tokenizer     string
	Mmap          bool
	Cache         string
	KVBudget      string
	MaxSeqs       int
	Chunk         int
	Invariant     bool
	Host          string
	Port          int
	ServedName    string
	Routes        []string
	APIKey        string
	MaxBody       string
	MaxWaiting    int
	Threads       int
	Device        cmdutil.Device
	ShutdownGrace time.Duration
	// Fault injection, for canary drills and tests.
	FaultDelay     time.Duration
	FaultErrorRate float64
	FaultCache     string

	specs   []quant.Spec
	routes  []serve.Route
	budget  int64
	maxBody int64
}

// NewCmd returns kvq serve. runF replaces the run step in tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the model over an OpenAI-compatible HTTP API, one KV cache per model id",
		Long: `kvq serve runs the model in kvq's continuous-batching engine and serves it
over the HTTP API vLLM, SGLang and llama-server speak, so that their clients
and benchmarks (vllm bench serve, lm-evaluation-harness, the openai SDKs)
measure kvq's quantized KV caches unchanged. Each --cache spec is a pool of
its own over the same weights, served as the model id NAME@CACHE; plain NAME
is the first cache, or a canary split with --route. On start it prints one
line to stderr with the URL it bound and the model ids.

Endpoints:
  POST /v1/completions       prompt (text or token ids), max_tokens (16), temperature (1),
                             top_p, seed, stop, stream, stream_options.include_usage,
                             logprobs (legacy format), echo (with logprobs and
                             max_tokens 0: a prompt's log-probabilities), ignore_eos, n=1
  POST /v1/chat/completions  messages (the model's chat template), max_tokens or
                             max_completion_tokens, logprobs + top_logprobs, stop, stream, ...
  GET  /v1/models            NAME, NAME@CACHE for each cache, and --route model= aliases
  GET  /health               200; 503 while shutting down
  GET  /metrics              Prometheus text format, vLLM's names under kvq:
  GET  /admin/route          the routes: {"routes": [{"cache", "percent", "match"}], "fallback"}
  POST /admin/route          {"cache": NAME, "percent": 0..100} sets the share of NAME's routes
                             live ("match": one route; "reason": logged); needs --api-key
Streams are server-sent events "data: {json}" ending with "data: [DONE]", as
OpenAI and vLLM send them. Every response names its cache in the field
kvq_cache and the header X-KVQ-Cache.

Routing: --route CACHE=PCT sends PCT% of the requests for plain NAME to
CACHE; a condition after it restricts the route to some requests:
CACHE=PCT,header=NAME:VALUE (that header with that value), ,key=KEY (that
bearer token, accepted as an API key on /v1/ besides --api-key) or
,model=ID (requests for model ID, an alias the server then lists). A
request follows the first route (in flag order) whose condition it meets,
with the other routes of the same condition, or else the routes without
one: its draw, deterministic per request number, falls on their shares in
order, and past them on the first cache. NAME@CACHE is never routed.
POST /admin/route (with the --api-key as Bearer; 403 without one) changes
a share live: every change is a stderr line (when, old → new, by whom) and
counts in kvq_route_changes_total.

Fault injection, for canary drills and tests only: --fault-delay waits
before each completion's first token (TTFT, E2E grow), --fault-error-rate
answers that fraction of completions 500 (counted as finished_reason
"error"), both on --fault-cache only when given.

Errors (OpenAI's {"error": {"message", "type", "param", "code"}}):
  400 malformed JSON, a wrong type or value (param names it), a prompt past the
      context, a chat request to a model without a chat template
  401 missing or wrong API key (--api-key or $` + APIKeyEnv + `; /v1/ and /admin/ paths)
  403 /admin/route on a server without an API key
  404 unknown model, path or (admin) cache      405 wrong method
  413 body over --max-body, or a request no KV pool can ever hold
  429 the cache's waiting queue holds --max-waiting requests (Retry-After: 1)
  500 a failure inside the server (or an injected fault)  503 engine not running, or shutting down

Metrics (labels model_name and cache):
` + indent(serve.MetricsHelp, "  ") + `
On SIGINT or SIGTERM it lets the requests in flight finish for up to
--shutdown-grace, answering /health and new requests with 503 meanwhile,
then stops accepting connections, cancels the rest and exits 0. A second
SIGINT or SIGTERM cancels the requests in flight and exits at once.

Exit codes: 0 after a shutdown, 1 runtime failure (the port in use), 2 usage
error (bad flag, unreadable model).`,
		Example: `  kvq serve                                   # the built-in model on 127.0.0.1:8000
  kvq serve --model ./Llama-3.1-8B --cache fp16,fp8,int4 --kv-budget 8GiB   # your own model
  kvq serve --cache fp16,fp8 --route fp8=10 --port 0  # 10% of NAME's traffic on fp8
  kvq serve --cache fp16,int4 --route int4=100,header=X-Tenant:acme   # tenant acme on int4
  curl -s localhost:8000/v1/completions \
    -d '{"model": "kvq-probe@fp16", "prompt": "Once upon a time", "max_tokens": 32}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	cmdutil.AddModelFlag(fl, &o.Model)
	cmdutil.AddTokenizerFlag(fl, &o.Tokenizer)
	cmdutil.AddMmapFlag(fl, &o.Mmap)
	cmdutil.AddCachesFlag(fl, &o.Cache, "fp16")
	fl.StringVar(&o.KVBudget, "kv-budget", "", "each pool's KV memory, with a unit (2GiB, 512MiB; default: room for four sequences of the whole context)")
	fl.IntVar(&o.MaxSeqs, "max-seqs", 64, "running sequences per pool (vLLM's max_num_seqs)")
	fl.IntVar(&o.Chunk, "chunk", 256, "prefill chunk in tokens")
	cmdutil.AddBatchInvariantFlag(fl, &o.Invariant)
	fl.StringVar(&o.Host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	fl.IntVar(&o.Port, "port", 8000, "port to listen on; 0 picks a free one (printed on start)")
	fl.StringVar(&o.ServedName, "served-model-name", "", "the model's name in the API (default: the model directory's or file's base name)")
	fl.StringArrayVar(&o.Routes, "route", nil, "CACHE=PCT: send PCT% of plain-NAME requests to CACHE, the rest to the first cache; CACHE=PCT,header=NAME:VALUE, ,key=KEY or ,model=ID: of the requests with that header, API key or model id (repeatable)")
	fl.StringVar(&o.APIKey, "api-key", "", "require this key as 'Authorization: Bearer KEY' on /v1/ (default: $"+APIKeyEnv+", better: other users see flags in ps; never printed)")
	fl.StringVar(&o.MaxBody, "max-body", "8MiB", "largest request body")
	fl.IntVar(&o.MaxWaiting, "max-waiting", serve.DefaultMaxWaiting, "refuse requests (429) when a cache has this many waiting; -1 no limit")
	cmdutil.AddThreadsFlag(fl, &o.Threads)
	cmdutil.AddDeviceFlag(fl, &o.Device, f.BackendRegistry())
	fl.DurationVar(&o.ShutdownGrace, "shutdown-grace", serve.DefaultShutdownGrace, "on SIGINT/SIGTERM, how long requests in flight may finish")
	fl.DurationVar(&o.FaultDelay, "fault-delay", 0, "fault injection, for canary drills and tests: wait this long before each completion's first token (TTFT grows by it)")
	fl.Float64Var(&o.FaultErrorRate, "fault-error-rate", 0, "fault injection, for canary drills and tests: answer this fraction (0..1) of completions with a 500, counted as errors")
	fl.StringVar(&o.FaultCache, "fault-cache", "", "inject the --fault-* faults only into the completions this cache serves (default: every cache)")
	_ = cmd.MarkFlagFilename("model", "gguf", "bin", "json")
	_ = cmd.RegisterFlagCompletionFunc("cache", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return quant.Formats().Names(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// indent prefixes every non-empty line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// Validate checks the flags; every error names its flag.
func (o *Options) Validate() error {
	specs, err := quant.Formats().ParseList(o.Cache)
	if err != nil {
		return cmdutil.FlagErrorf("--cache: %w", err)
	}
	if len(specs) == 0 {
		return cmdutil.FlagErrorf("--cache: no caches")
	}
	o.specs = specs
	switch {
	case o.Port < 0 || o.Port > 65535:
		return cmdutil.FlagErrorf("--port %d: must be in [0, 65535]", o.Port)
	case o.MaxSeqs < 1:
		return cmdutil.FlagErrorf("--max-seqs %d: must be positive", o.MaxSeqs)
	case o.Chunk < 1:
		return cmdutil.FlagErrorf("--chunk %d: must be positive", o.Chunk)
	case o.Threads < 0:
		return cmdutil.FlagErrorf("--threads %d: must be ≥ 0", o.Threads)
	case o.Device.Check() != nil:
		return o.Device.Check()
	case o.MaxWaiting == 0 || o.MaxWaiting < -1:
		return cmdutil.FlagErrorf("--max-waiting %d: must be positive, or -1 for no limit", o.MaxWaiting)
	case o.ShutdownGrace < 0:
		return cmdutil.FlagErrorf("--shutdown-grace %v: must be ≥ 0", o.ShutdownGrace)
	case strings.Contains(o.ServedName, "@"):
		return cmdutil.FlagErrorf("--served-model-name %q: '@' separates a name from its cache", o.ServedName)
	}
	if o.KVBudget != "" {
		if o.budget, err = cmdutil.ParseSize("--kv-budget", o.KVBudget); err != nil {
			return err
		}
		if o.budget <= 0 {
			return cmdutil.FlagErrorf("--kv-budget %s: must be positive", o.KVBudget)
		}
	}
	if o.maxBody, err = cmdutil.ParseSize("--max-body", o.MaxBody); err != nil {
		return err
	}
	if o.maxBody <= 0 {
		return cmdutil.FlagErrorf("--max-body %s: must be positive", o.MaxBody)
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.String()
	}
	if err := o.parseRoutes(names); err != nil {
		return err
	}
	switch {
	case o.FaultDelay < 0:
		return cmdutil.FlagErrorf("--fault-delay %v: must be ≥ 0", o.FaultDelay)
	case !(o.FaultErrorRate >= 0 && o.FaultErrorRate <= 1):
		return cmdutil.FlagErrorf("--fault-error-rate %v: must be a fraction in [0, 1]", o.FaultErrorRate)
	case o.FaultCache != "" && o.FaultDelay == 0 && o.FaultErrorRate == 0:
		return cmdutil.FlagErrorf("--fault-cache %s: give --fault-delay or --fault-error-rate too", o.FaultCache)
	}
	if o.FaultCache != "" {
		spec, err := quant.Formats().ParseSpec(o.FaultCache)
		if err != nil {
			return cmdutil.FlagErrorf("--fault-cache: %w", err)
		}
		if o.FaultCache = spec.String(); !slices.Contains(names, o.FaultCache) {
			return cmdutil.FlagErrorf("--fault-cache %s: not among --cache %s", o.FaultCache, strings.Join(names, ","))
		}
	}
	if o.APIKey == "" {
		o.APIKey = os.Getenv(APIKeyEnv)
	}
	return nil
}

// routeConditions are the keys of a --route condition.
var routeConditions = []string{"header", "key", "model"}

// parseRoutes reads --route: CACHE=PCT, optionally followed by one
// condition, ",header=NAME:VALUE", ",key=KEY" or ",model=ID". A cache's
// spec may hold commas (k=int8,v=int4=10), so the condition is the
// trailing part whose key is one of routeConditions. The same cache and
// condition given twice add up, as --route fp8=5 --route fp8=5 does.
func (o *Options) parseRoutes(names []string) error {
	type key struct {
		cache string
		m     serve.Match
	}
	o.routes = nil
	index := map[key]int{}
	for _, r := range o.Routes {
		body, cond := r, ""
		parts := strings.Split(r, ",")
		for j, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			if !slices.Contains(routeConditions, strings.ToLower(strings.TrimSpace(k))) {
				continue
			}
			if j == 0 || j < len(parts)-1 {
				return cmdutil.FlagErrorf("--route %q: want CACHE=PCT then one condition, e.g. int4=100,header=X-Tenant:acme", r)
			}
			body, cond = strings.Join(parts[:j], ","), p
			break
		}
		i := strings.LastIndex(body, "=")
		if i <= 0 {
			return cmdutil.FlagErrorf("--route %q: want CACHE=PCT, e.g. fp8=10", r)
		}
		spec, err := quant.Formats().ParseSpec(body[:i])
		if err != nil {
			return cmdutil.FlagErrorf("--route %q: %w", r, err)
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(body[i+1:]), "%"), 64)
		if err != nil || !(pct >= 0 && pct <= 100) {
			return cmdutil.FlagErrorf("--route %q: the share must be a percentage in [0, 100]", r)
		}
		c := spec.String()
		if !slices.Contains(names, c) {
			return cmdutil.FlagErrorf("--route %q: cache %s is not among --cache %s", r, c, strings.Join(names, ","))
		}
		m, err := serve.ParseMatch(cond)
		if err != nil {
			return cmdutil.FlagErrorf("--route %q: %v", r, err)
		}
		// Share holds the percentage until the sums are checked.
		if k := (key{c, m}); index[k] > 0 {
			o.routes[index[k]-1].Share += pct
		} else {
			o.routes = append(o.routes, serve.Route{Cache: c, Share: pct, Match: m})
			index[k] = len(o.routes)
		}
	}
	sums := map[serve.Match]float64{}
	var groups []serve.Match
	for _, rt := range o.routes {
		if _, ok := sums[rt.Match]; !ok {
			groups = append(groups, rt.Match)
		}
		sums[rt.Match] += rt.Share
	}
	for _, m := range groups {
		switch {
		case sums[m] <= 100+1e-9:
		case m == serve.Match{}:
			return cmdutil.FlagErrorf("--route: the shares sum to %g%%, over 100%%", sums[m])
		default:
			return cmdutil.FlagErrorf("--route: the shares for %s sum to %g%%, over 100%%", m, sums[m])
		}
	}
	for i := range o.routes {
		o.routes[i].Share /= 100
	}
	return nil
}

// routeText is --route as the start line shows it: a key as its
// fingerprint.
func (o *Options) routeText() string {
	out := make([]string, len(o.Routes))
	for i, r := range o.Routes {
		out[i] = r
		parts := strings.Split(r, ",")
		last := parts[len(parts)-1]
		if k, v, ok := strings.Cut(last, "="); ok && strings.EqualFold(strings.TrimSpace(k), "key") {
			parts[len(parts)-1] = "key=" + serve.KeyFingerprint(strings.TrimSpace(v))
			out[i] = strings.Join(parts, ",")
		}
	}
	return strings.Join(out, " ")
}

// faultText describes the injected faults for the start line.
func (o *Options) faultText() string {
	var what []string
	if o.FaultDelay > 0 {
		what = append(what, fmt.Sprintf("%v before each first token", o.FaultDelay))
	}
	if o.FaultErrorRate > 0 {
		what = append(what, fmt.Sprintf("%g%% of completions fail with 500", 100*o.FaultErrorRate))
	}
	on := "every cache"
	if o.FaultCache != "" {
		on = "cache " + o.FaultCache
	}
	return strings.Join(what, ", ") + " (on " + on + ")"
}

// Run loads the model, starts the engine and serves until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	m, err := cmdutil.LoadModel(ctx, o.Model, runtime.LoadOptions{Tokenizer: o.Tokenizer, Mmap: o.Mmap}, o.IO.ErrOut)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := cmdutil.CheckSpecLayers("--cache", m.Config.Layers, o.specs...); err != nil {
		return err
	}
	cmdutil.WarnSpecBlocks(o.IO.ErrOut, "--cache", m.Geometry(), o.specs...)
	be, err := o.Device.Open(ctx, o.IO.ErrOut)
	if err != nil {
		return err
	}
	// The engine decides --max-waiting atomically with the queueing (the
	// server's own check reads statistics a burst outruns).
	e, err := engine.New(m, engine.Options{Caches: o.specs, Budget: o.budget, MaxSeqs: o.MaxSeqs, Chunk: o.Chunk, BatchInvariant: o.Invariant, Workers: o.Threads, Backend: be, MaxWaiting: max(o.MaxWaiting, 0)})
	if err != nil {
		return cmdutil.UsageError(err)
	}
	name := o.ServedName
	if name == "" && o.Model == "" {
		name = models.ProbeModelName
	}
	s, err := serve.New(e, serve.Options{
		ModelName: name, Routes: o.routes, APIKey: o.APIKey, MaxBodyBytes: o.maxBody, MaxWaiting: o.MaxWaiting,
		ShutdownGrace: o.ShutdownGrace, Logger: slog.New(slog.NewTextHandler(o.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Fault:         serve.Fault{Delay: o.FaultDelay, ErrorRate: o.FaultErrorRate, Cache: o.FaultCache},
		OnRouteChange: func(c serve.RouteChange) { fmt.Fprintf(o.IO.ErrOut, "kvq serve: %s\n", c) },
	})

	if err != nil {
		return cmdutil.UsageError(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("--host %s --port %d: %w", o.Host, o.Port, err)
	}
	// The engine outlives Serve, so that requests in flight can finish
	// during the shutdown.
	ectx, stopEngine := context.WithCancel(context.Background())
	engineDone := make(chan error, 1)
	go func() { engineDone <- e.Run(ectx) }()
	defer func() {
		stopEngine()
		<-engineDone
	}()
	if err := e.WaitReady(ctx); err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	routed := ""
	if len(o.Routes) > 0 {
		routed = " (NAME split by --route " + o.routeText() + ")"
	}
	if o.FaultDelay > 0 || o.FaultErrorRate > 0 {
		fmt.Fprintf(o.IO.ErrOut, "kvq serve: fault injection on, for canary drills and tests: %s\n", o.faultText())
	}
	fmt.Fprintf(o.IO.ErrOut, "kvq serve: listening on http://%s, models %s%s\n", net.JoinHostPort(o.Host, port), strings.Join(s.ModelIDs(), ", "), routed)
	served := make(chan struct{})
	defer close(served)
	go secondSignal(served, s, o.IO.ErrOut)
	if err := s.Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// secondSignal ends the shutdown at once (s.Close) at a second SIGINT or
// SIGTERM, as uvicorn and vLLM do: the first, which ends Run's context in
// kvq's main, starts the graceful shutdown; it is counted here too, so that a
// second one arriving as soon as ctx ends is not lost.
func secondSignal(served <-chan struct{}, s *serve.Server, errOut io.Writer) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	for n := 0; ; {
		select {
		case <-served:
			return
		case <-sig:
			if n++; n < 2 {
				continue
			}
			fmt.Fprintln(errOut, "kvq serve: second signal: stopping now, cancelling the requests in flight")
			s.Close()
			return
		}
	}
}
