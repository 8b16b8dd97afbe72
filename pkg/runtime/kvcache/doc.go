// Package kvcache is the paged KV cache of kvq's runtime.
//
// A Cache owns a fixed pool of blocks (pages) of BlockTokens tokens, shared by
// any number of sequences, as in vLLM's paged attention. Block ids are shared
// across layers: block b holds, for every layer, the keys and the values of
// BlockTokens consecutive tokens of one sequence, stored per KV head as a
// tile in that layer's quant.Format. Full blocks can be shared between
// sequences after Fork (reference counted); a fork copies only the partially
// filled tail block (and, for prompt-flushed formats, the blocks a staged
// group will be written into), so writes never touch shared blocks.
//
// Window-only storage: when the geometry gives the sliding layers' window
// (Geometry.Window), those layers take their blocks from a pool of their
// own (ids after the full pool's) through a second block table per
// sequence, and at each Commit give back the blocks wholly before the
// window of the sequence's next token, as vLLM's hybrid allocator does.
// A sequence then holds, per sliding layer, at most
// Layout.SlideBlocksFor(n, chunk) blocks; Truncate refuses to go back past
// what they still hold. LayoutOptions.FullSliding keeps every position.
//
// Quantized layers may keep fp16 side windows per sequence: the first Sink
// tokens, the most recent Residual tokens, and the tokens of a not yet complete
// group for formats that quantize several tokens together (TokenGroup > 1).
// Groups are counted from position 0, except for quant.PromptFlusher
// formats (Hugging Face's QuantizedCache): a sequence's prompt (its first
// Begin) is quantized at once and groups are counted from its end.
// Attention reads a position from the first window that holds it, otherwise
// from its block.
//
// Layout is the byte accounting of a configuration and the single source of
// truth for memory: Cache allocates exactly what Layout says, and kvq estimate
// prints the same numbers.
//
// Concurrency: the management API (AddSeq, Fork, Remove, Begin) must not run
// concurrently with anything else. Within one forward step, Put calls for
// different sequences or layers may run concurrently, and Attend calls may run
// concurrently with each other once the Puts of that layer are done.
package kvcache
