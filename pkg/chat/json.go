package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonOptions are the arguments of transformers' tojson filter, which calls
// Python's json.dumps (not Jinja's HTML-safe tojson).
type jsonOptions struct {
	ensureASCII bool
	pretty      bool   // indent is not None
	indent      string // one level of indentation
	itemSep     string
	keySep      string
	sortKeys    bool
}

func toJSON(v any, o jsonOptions) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, o, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, v any, o jsonOptions, level int) error {
	if b.Len() > maxOutput {
		return fmt.Errorf("%w: JSON over %d bytes", ErrLimit, maxOutput)
	}
	if level > maxReprDepth {
		return fmt.Errorf("%w: JSON nested deeper than %d", ErrLimit, maxReprDepth)
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(jsonFloat(v))
	case string:
		writeJSONString(b, v, o.ensureASCII)
	case []any:
		return writeJSONArray(b, v, o, level)
	case tuple:
		return writeJSONArray(b, v, o, level)
	case *dict:
		return writeJSONObject(b, v, o, level)
	default:
		return fmt.Errorf("%w: Object of type %s is not JSON serializable", ErrType, typeName(v))
	}
	return nil
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return formatFloat(f)
}

func (o jsonOptions) newline(b *strings.Builder, level int) {
	if o.pretty {
		b.WriteByte('\n')
		for range level {
			b.WriteString(o.indent)
		}
	}
}

func writeJSONArray(b *strings.Builder, items []any, o jsonOptions, level int) error {
	if len(items) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		o.newline(b, level+1)
		if err := writeJSON(b, it, o, level+1); err != nil {
			return err
		}
	}
	o.newline(b, level)
	b.WriteByte(']')
	return nil
}

func writeJSONObject(b *strings.Builder, d *dict, o jsonOptions, level int) error {
	if len(d.keys) == 0 {
		b.WriteString("{}")
		return nil
	}
	keys := d.keys
	if o.sortKeys {
		keys = append([]any{}, keys...)
		if err := sortValues(keys, func(k any) any { return k }, false); err != nil {
			return err
		}
	}
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		o.newline(b, level+1)
		var ks string
		switch k := k.(type) {
		case string:
			ks = k
		case nil, bool, int64:
			ks = toJSONScalar(k)
		case float64:
			ks = jsonFloat(k)
		default:
			return fmt.Errorf("%w: keys must be str, int, float, bool or None, not %s", ErrType, typeName(k))
		}
		writeJSONString(b, ks, o.ensureASCII)
		b.WriteString(o.keySep)
		if err := writeJSON(b, d.vals[k], o, level+1); err != nil {
			return err
		}
	}
	o.newline(b, level)
	b.WriteByte('}')
	return nil
}

func toJSONScalar(v any) string {
	s, _ := toJSON(v, jsonOptions{})
	return s
}

// writeJSONString quotes s as Python's json.dumps does.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || ensureASCII && r == 0x7f:
				fmt.Fprintf(b, `\u%04x`, r)
			case ensureASCII && r > 0x7f && r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			case ensureASCII && r >= 0x10000:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// fromGo converts an Options.Extra value to a template value.
func fromGo(v any) (any, error) {
	return fromGoDepth(v, 0)
}

func fromGoDepth(v any, depth int) (any, error) {
	if depth > maxReprDepth {
		return nil, errors.New("nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool, int64, float64, string:
		return x, nil
	case json.RawMessage:
		return decodeJSON(x)
	case json.Number:
		return jsonNumber(x)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return nil, fmt.Errorf("integer %d out of range", u)
		}
		return int64(u), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			e, err := fromGoDepth(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key type %s is not string", rv.Type().Key())
		}
		if rv.IsNil() {
			return nil, nil
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		d := newDict(len(keys))
		for _, k := range keys {
			e, err := fromGoDepth(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			d.set(k, e)
		}
		return d, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return fromGoDepth(rv.Elem().Interface(), depth+1)
	}
	return nil, fmt.Errorf("unsupported type %T", v)
}

// decodeJSON decodes JSON keeping the order of object keys, with Python's
// json.loads number typing (integers stay integers).
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxReprDepth {
		return nil, errors.New("JSON nested too deeply")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '[':
			out := []any{}
			for dec.More() {
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		case '{':
			d := newDict(4)
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return jsonNumber(t)
	case string:
		if !utf8.ValidString(t) {
			return strings.ToValidUTF8(t, "\uFFFD"), nil
		}
		return t, nil
	}
	return t, nil // nil or bool
}

func jsonNumber(n json.Number) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return nil, err
	}
	return f, nil
}
