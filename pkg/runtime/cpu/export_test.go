package cpu

// SetQueryRows bounds the query rows of s's attention tasks (tokens ×
// heads per KV head); n = heads per KV head makes prefill attend one query
// token at a time, as the runtime did before query blocks.
func SetQueryRows(s *Storage, n int) { s.queryRows = n }
