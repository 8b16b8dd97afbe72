// Package canary judges a live canary: a baseline and a candidate
// deployment of one model (OpenAI-compatible servers with Prometheus
// /metrics — vLLM, SGLang, llama.cpp's llama-server or kvq serve), watched
// side by side, and a verdict on the candidate: promote, hold or rollback.
//
// Each window Watch scrapes both engines' metrics (read under the names
// pkg/plan reads: plan.Reduce) and compares the counter and histogram
// deltas of the window: error and abort rates, TTFT, inter-token and
// end-to-end latency quantiles computed as Prometheus' histogram_quantile
// computes them, preemptions per request and KV-cache usage. A quality
// probe sends the same prompts, greedily, to both deployments at a bounded
// rate and scores them with pkg/eval's metrics: flips (items that pass on
// the baseline and fail on the candidate) are tested with eval's exact
// McNemar test, so that a quality drop is a significant result, not one
// bad sample. A Policy (flags or a YAML file in the style of kvq eval's
// gates) bounds each metric; the verdict is rollback when a gate failed
// significantly, promote when every gate passed with enough evidence, and
// hold otherwise.
//
// canary does not route traffic: it is the judge a gateway, Argo Rollouts
// or Flagger consults (VerdictServer serves the verdict for their web
// metric provider and webhooks). The one switch it may pull is kvq serve's admin
// route (SetRoute), when asked to act on a rollback; CheckRoute tells
// beforehand whether the key and the route are right.
//
// Watch takes a context and prints nothing; its callers render the
// windows. A Watch is one goroutine plus the probe's; VerdictServer is
// safe for concurrent use.
package canary

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Errors of the package.
var (
	ErrOptions = kvqerr.New("canary: bad options")
	ErrPolicy  = kvqerr.New("canary: bad policy")
	ErrScrape  = errors.New("canary: scrape failed")
	ErrAct     = errors.New("canary: route switch failed")
)
