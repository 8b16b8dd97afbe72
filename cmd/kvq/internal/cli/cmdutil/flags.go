package cmdutil

import "github.com/spf13/pflag"

// The model flags' help: one wording per flag for every command that has
// it (root's TestModelFlagsOneWording holds every command to it). A
// command's own role for a flag (eval's first cache is the baseline,
// serve's caches are pools) goes in its long help. --device's wording is
// DeviceUsage.
const (
	// ModelUsage is --model's help where the model is loaded and run.
	ModelUsage = "model: a Hugging Face directory, a .gguf file, or a llama2.c .bin (default: the built-in kvq-probe model)"
	// ModelRefUsage is --model's help where only the model's shape is
	// read (kvq estimate, kvq plan), so that a preset stands in for it.
	ModelRefUsage = "model: a preset name or its Hugging Face id (see kvq estimate --list-models), a Hugging Face directory or config.json, or a .gguf file (default: the built-in kvq-probe model)"
	// TokenizerUsage is --tokenizer's help.
	TokenizerUsage = "tokenizer file of a llama2.c model (default: tokenizer.bin, or a single tok*.bin, beside the model)"
	// CacheUsage is --cache's help where it takes one spec (kvq generate).
	CacheUsage = "KV-cache format spec (see kvq formats), e.g. fp16, int4, k=int8,v=int4, q4_0,residual=64, int4,sliding=fp16 (sliding-window layers in fp16)"
	// CachesUsage is --cache's help where it takes a list of specs.
	CachesUsage = "KV-cache format specs, comma-separated (see kvq formats); k=, v=, residual=, sink=, L<i>= and sliding= modify the spec before them (int4,sliding=fp16: the sliding-window layers in fp16)"
	// MmapUsage is --mmap's help.
	MmapUsage = "map the model's weights from its files in place (less memory, no copy) instead of reading a file of 64 MiB or more into transparent huge pages (Linux; faster decode), which kvq does when half the available memory holds it"
	// ThreadsUsage is --threads' help.
	ThreadsUsage = "CPU worker goroutines (0: all CPUs)"
)

// AddModelFlag registers --model (-m) for a model that is loaded and run,
// default empty (the built-in model).
func AddModelFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVarP(p, "model", "m", "", ModelUsage)
}

// AddModelRefFlag registers --model (-m) for a command that reads only the
// model's shape and so also takes a preset, default empty (the built-in
// model).
func AddModelRefFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVarP(p, "model", "m", "", ModelRefUsage)
}

// AddTokenizerFlag registers --tokenizer, default empty (found beside the
// model).
func AddTokenizerFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "tokenizer", "", TokenizerUsage)
}

// AddMmapFlag registers --mmap, default false (runtime.LoadOptions.Mmap).
func AddMmapFlag(fl *pflag.FlagSet, p *bool) {
	fl.BoolVar(p, "mmap", false, MmapUsage)
}

// AddCacheFlag registers --cache taking one spec, with the command's
// default.
func AddCacheFlag(fl *pflag.FlagSet, p *string, def string) {
	fl.StringVar(p, "cache", def, CacheUsage)
}

// AddCachesFlag registers --cache taking a comma-separated list of specs,
// with the command's default.
func AddCachesFlag(fl *pflag.FlagSet, p *string, def string) {
	fl.StringVar(p, "cache", def, CachesUsage)
}

// AddThreadsFlag registers --threads, default 0 (all CPUs).
func AddThreadsFlag(fl *pflag.FlagSet, p *int) {
	fl.IntVar(p, "threads", 0, ThreadsUsage)
}

// BatchInvariantUsage is --batch-invariant's help, in the commands that run
// the engine (serve, bench).
const BatchInvariantUsage = "CPU engine: a request's tokens and logprobs bit-identical to the same request alone, whatever else the step holds (slower batched decode)"

// AddBatchInvariantFlag registers --batch-invariant (engine.Options.BatchInvariant).
func AddBatchInvariantFlag(fl *pflag.FlagSet, p *bool) {
	fl.BoolVar(p, "batch-invariant", false, BatchInvariantUsage)
}

// WideUsage is --wide's help.
const WideUsage = "table output: every column and line at full length, however wide (default: fit the terminal, 100 columns off one)"

// AddWideFlag registers --wide, default false (table output fits the
// terminal; see FitReport).
func AddWideFlag(fl *pflag.FlagSet, p *bool) {
	fl.BoolVar(p, "wide", false, WideUsage)
}
