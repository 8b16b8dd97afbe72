// Package eval measures what KV-cache formats do to a model: it runs an
// fp16 (or bf16) baseline cache and candidate caches side by side over the
// same inputs — one forward per step for all of them, sharing the weights —
// and reports per cache:
//
//   - teacher-forced distribution metrics on texts (TeacherForced):
//     perplexity, KL divergence to the baseline, top-1 agreement, Δp of the
//     reference token, KLD by position; with llama-perplexity's protocol
//     and definitions on request;
//   - generation tasks decoded greedily (Generate, Run): the built-in
//     suites (BuildSuites: passkey, multi-key, copy, JSON, a refusal policy,
//     a long-context passkey grid, multi-hop, citations, tool calls;
//     RULER's synthetic tasks at lengths in the model's tokens, ruler.go)
//     and the user's own tasks from JSONL (ParseTasks), scored by
//     ScoreOutput's metrics, with paired statistics against the baseline
//     (flips, exact McNemar, bootstrap intervals);
//   - memory per token from the caches' layouts (kvq estimate's
//     accounting), decode speed, and gates that turn it all into a verdict
//     per cache and a recommendation.
//
// Run takes its work from Options and returns a Report, whose JSON form is
// stable under Schema. A Store in a directory makes long runs resumable.
//
// Concurrency: Run evaluates items in parallel with one single-thread
// runner per worker; results do not depend on the number of workers.
package eval

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// Sentinel errors of the package.
var (
	// ErrOptions reports options that cannot be run (a context longer
	// than the model's, an unknown suite, a bad gate, a bad flag value).
	ErrOptions = kvqerr.New("eval: bad options")
	// ErrStore reports an output directory that cannot be used.
	ErrStore = kvqerr.New("eval: output directory")
	// ErrTasks reports a malformed tasks file.
	ErrTasks = kvqerr.New("eval: bad tasks file")
	// ErrMetric reports an unknown metric name.
	ErrMetric = kvqerr.New("eval: unknown metric")
	// ErrReference reports a reference that cannot be used with its
	// metric: empty, an invalid regexp, unparsable JSON or tool call.
	ErrReference = kvqerr.New("eval: bad reference")
	// ErrSchema reports a malformed JSON schema.
	ErrSchema = kvqerr.New("eval: malformed JSON schema")
	// ErrNotJSON reports text that is not one JSON value.
	ErrNotJSON = errors.New("eval: not JSON")
	// ErrPhrases reports an unusable refusal phrase list.
	ErrPhrases = kvqerr.New("eval: bad refusal phrases")
)
