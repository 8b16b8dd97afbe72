package cpu

// SetQueryRows bounds the query rows of s's attention tasks (tokens ×
// heads per KV head); n = heads per KV head makes prefill attend one query
// token at a time, as the runtime did before query blocks.
func SetQueryRows(s *Storage, n int) { s.queryRows = n }

// PackTokens is packTokens: the token rows from which products over dt
// take simd's packed path.
var PackTokens = packTokens
