package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Helpers shared by the JSON metrics (json-valid, json-exact, json-schema,
// tool-call).

// decodeJSON decodes exactly one JSON value, numbers as json.Number; an
// error wraps ErrNotJSON.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: empty input", ErrNotJSON)
		}
		return nil, fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the first value (at byte %d)", ErrNotJSON, dec.InputOffset())
	}
	return v, nil
}

// jsonDecoder reads JSON values from s, numbers as json.Number.
func jsonDecoder(s string) *json.Decoder {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	return dec
}

func asNumber(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		return x, true
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), true
	}
	return "", false
}

// isIntLiteral reports whether a JSON number is written without a
// fraction or an exponent.
func isIntLiteral(x json.Number) bool {
	return !strings.ContainsAny(string(x), ".eE")
}

func isIntegral(x json.Number) bool {
	if isIntLiteral(x) {
		return true
	}
	f, err := x.Float64()
	return err == nil && f == math.Trunc(f)
}

// compareNumbers compares two JSON numbers: exactly when both are integer
// literals, as float64 otherwise (out-of-range values are ±Inf).
func compareNumbers(a, b json.Number) int {
	if isIntLiteral(a) && isIntLiteral(b) {
		x, okx := new(big.Int).SetString(string(a), 10)
		y, oky := new(big.Int).SetString(string(b), 10)
		if okx && oky {
			return x.Cmp(y)
		}
	}
	x, _ := strconv.ParseFloat(string(a), 64) // json.Number is valid; ±Inf on overflow
	y, _ := strconv.ParseFloat(string(b), 64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// jsonEqual is deep equality of decoded JSON values: key order is
// irrelevant and numbers compare as numbers (1 = 1.0 = 1e0).
func jsonEqual(a, b any) bool {
	return jsonDiff(a, b, "") == ""
}

// jsonDiff describes the first difference between got and want ("" when
// equal): "/args/city: got \"Paris\", want \"London\"". Object keys are
// visited in sorted order.
func jsonDiff(got, want any, at string) string {
	loc := at
	if loc == "" {
		loc = "(root)"
	}
	if gn, ok := asNumber(got); ok {
		if wn, ok := asNumber(want); ok && compareNumbers(gn, wn) == 0 {
			return ""
		}
		return fmt.Sprintf("%s: got %s, want %s", loc, shortJSON(got), shortJSON(want))
	}
	switch g := got.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			break
		}
		return objectDiff(g, w, at)
	case []any:
		w, ok := want.([]any)
		if !ok {
			break
		}
		for i := range min(len(g), len(w)) {
			if d := jsonDiff(g[i], w[i], at+"/"+strconv.Itoa(i)); d != "" {
				return d
			}
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s: got %d elements, want %d", loc, len(g), len(w))
		}
		return ""
	case nil, bool, string:
		if got == want {
			return ""
		}
	}
	return fmt.Sprintf("%s: got %s, want %s", loc, shortJSON(got), shortJSON(want))
}

func objectDiff(g, w map[string]any, at string) string {
	keys := sortedKeys(g)
	for _, k := range sortedKeys(w) {
		if _, ok := g[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		child := at + "/" + escapePointer(k)
		gv, gok := g[k]
		wv, wok := w[k]
		switch {
		case !gok:
			return fmt.Sprintf("%s: missing, want %s", child, shortJSON(wv))
		case !wok:
			return fmt.Sprintf("%s: unexpected %s", child, shortJSON(gv))
		}
		if d := jsonDiff(gv, wv, child); d != "" {
			return d
		}
	}
	return ""
}

// shortJSON renders v as compact JSON, cut to 60 bytes.
func shortJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := strings.TrimSuffix(buf.String(), "\n")
	if len(s) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escapePointer escapes one JSON pointer segment (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// jsonKind names v's JSON type, "integer" for integral numbers.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	if x, ok := asNumber(v); ok {
		if isIntegral(x) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}
