// Package tokenizer turns text into token ids and back for kvq's LLM runtime.
//
// It implements the two tokenizer families that GGUF, llama2.c and Hugging
// Face models use:
//
//   - [SentencePieceBPE] ("llama" in GGUF, and llama2.c's tokenizer.bin): the
//     text gets an optional prefix space, is split into UTF-8 characters, and
//     adjacent pieces are merged greedily, always taking the pair whose
//     concatenation is a vocabulary piece with the highest score (ties: the
//     leftmost pair). Characters that are not pieces fall back to the byte
//     tokens "<0x00>".."<0xFF>". This follows llama2.c's run.c and
//     llama.cpp's SPM tokenizer (the tests check stories260K's published
//     ids). Given ranked merges instead of scores, it is Hugging Face's BPE
//     model with byte_fallback (Llama 2, TinyLlama, Mistral): unknown
//     characters become byte tokens first, then listed merges apply, lowest
//     rank first.
//   - [ByteLevelBPE] ("gpt2" in GGUF): the text is split by a pre-tokenizer
//     (the GPT-2, Llama 3 or Qwen2 regular expression, implemented as a
//     hand-written scanner because Go's regexp has no look-ahead), each
//     pre-token's bytes are spelled in the GPT-2 byte alphabet and merged by
//     rank, lowest rank first. This follows llama.cpp's BPE tokenizer,
//     including its whole-pre-token lookup for Llama 3 (Hugging Face's
//     ignore_merges).
//
// A [Vocab] carries everything a file format provides; [New] validates it and
// builds a [Tokenizer]. [ParseLlama2C] reads llama2.c's tokenizer.bin and
// [ParseHF] a Hugging Face tokenizer.json with its tokenizer_config.json
// (the Llama 2, Mistral, Llama 3, Qwen2 and GPT-2 shapes). Reading GGUF
// metadata into a Vocab is the job of the GGUF loader, not this package.
//
// # Decoding and the prefix space
//
// SentencePiece vocabularies with AddSpacePrefix encode "Hello" as " Hello".
// Decoding removes that space again: the first token of a sequence, and any
// token that directly follows BOS, loses one leading space. [Tokenizer.Decode]
// treats its argument as a sequence that starts at the beginning of the text,
// so Decode(Encode(s, addSpecial)) == s for every valid UTF-8 s when the
// vocabulary has byte tokens (and, with "▁" spelling, s does not itself
// contain "▁"). To decode a continuation (for example generated tokens) use
// [Tokenizer.TokenPiece] with the previous id, or a [Decoder]. Vocabularies
// read by [ParseHF] can break the round trip where Hugging Face's does: NFC
// changes text that is not normalized, and Metaspace's [PrefixUnlessSpace]
// and [PrefixFirstOnly] add no prefix to text that starts with a space, so
// " x" decodes to "x".
//
// # Not done here
//
// Unicode normalization is NFC only (Qwen2's normalizer, through
// golang.org/x/text/unicode/norm); no NFKC or other normalizers. No
// SentencePiece Unigram models (T5, Gemma's "t5"-style vocabularies), no
// WordPiece or WordLevel. Plain [Tokenizer.Encode] treats the text of
// special tokens as ordinary text; only [Tokenizer.EncodeWithSpecials] turns
// them into their ids. (llama.cpp splits out user-defined tokens even when
// it is not asked to parse specials; here they are matched only by
// EncodeWithSpecials, like control tokens.) [ParseHF] ignores the lstrip,
// rstrip, single_word and normalized options of added tokens and rejects
// other normalizers, pre-tokenizers and post-processors; see its
// documentation.
//
// Known differences, all outside ordinary text: invalid UTF-8 is split byte
// by byte (llama.cpp groups a lead byte with whatever follows it). The
// case-insensitive contractions of the llama3 and qwen2 pre-tokenizers fold
// Unicode case as the regex engines of Hugging Face and tiktoken do, so
// "'ſ" is a contraction; llama.cpp folds ASCII only. Hugging Face's Strip
// decoder drops the leading space of the first token that is not skipped as
// special; Decode drops it only at the start and right after BOS. Where
// Hugging Face's BPE model sees the same merge listed twice, the last one
// counts; here the first.
//
// # Concurrency
//
// A Tokenizer is immutable after [New] and safe for concurrent use. A
// [Decoder] holds per-stream state and is for one goroutine at a time.
package tokenizer
