// Package chat renders Hugging Face chat templates: the Jinja2 template in
// a tokenizer_config.json's "chat_template", applied to a conversation as
// transformers' apply_chat_template(messages, tokenize=False) does.
//
// The package holds its own small Jinja2 engine: a lexer, a parser to an
// AST and an evaluator, with the environment transformers sets up
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off, the
// loopcontrols extension, an immutable sandbox). Templates see:
//
//   - messages: a list of {"role", "content", ...} dicts, with any
//     Message.Fields (tool_calls, tool_call_id, name, ...) after role and
//     content;
//   - add_generation_prompt, bos_token and eos_token;
//   - tools and documents, none unless Options.Extra sets them;
//   - raise_exception(msg), which makes Render fail with a *RaiseError;
//   - strftime_now(format), on the clock in Options.Now;
//   - namespace(), range() and dict(), and any Options.Extra variable.
//
// Supported Jinja: {% if/elif/else %}, {% for %} (loop.index, index0,
// revindex, revindex0, first, last, length, previtem, nextitem, cycle; an
// "if" filter; else; break and continue), {% set %} (names, tuples,
// namespace attributes, blocks), {% macro %}, {% filter %}, {% raw %},
// transformers' {% generation %}, comments and whitespace control. All of
// Jinja's expression syntax except *args and **kwargs: literals, lists,
// tuples, dicts, attribute and item access, slices, calls, filters, tests,
// arithmetic with Python semantics, comparisons, in, and, or, not, ~ and
// inline if. Values behave like their Python counterparts when printed,
// compared, tested for truth or encoded by tojson (transformers' version:
// json.dumps with ensure_ascii=False). An undefined value prints as "" and
// is false; using it any other way fails with ErrUndefined, as with
// Jinja's default Undefined.
//
// The filters are abs, capitalize, count, d, default, dictsort, first,
// float, indent, int, items, join, last, length, list, lower, map, max,
// min, reject, rejectattr, replace, reverse, round, safe, select,
// selectattr, sort, string, sum, title, tojson, trim, unique and upper.
// The string methods are strip, lstrip, rstrip, split, rsplit,
// startswith, endswith, lower, upper, title, capitalize, replace, find,
// rfind, count, join and the is* predicates; dicts have items, keys,
// values and get.
//
// Not supported, reported as *UnsupportedError when the template uses
// them: template inheritance and loading ({% extends %}, {% block %},
// {% include %}, {% import %}), {% with %}, {% call %}, recursive loops,
// printf-style "%" formatting, and any filter or test not listed above.
// Integers are 64-bit: arithmetic that would overflow fails with ErrLimit
// instead of growing as Python's integers do. A render also fails with
// ErrLimit past 16 MiB of output or about 4 million evaluation steps, so
// a hostile template cannot run away.
//
// TestGolden checks the engine against Python's Jinja2, set up as
// transformers sets it up, on 20 real chat templates (Llama 2 and 3.x,
// Mistral, Qwen2.5 and 3, Gemma 2 and 3, Phi-3.5 and 4, DeepSeek-R1,
// GPT-OSS, Granite, SmolLM3, Command-R, Hermes 3) and 15 conversations with
// system prompts, tools and tool calls; testdata/templates/README.md has the
// sources and the result.
//
// A *Template is immutable once compiled and safe for concurrent use.
package chat
