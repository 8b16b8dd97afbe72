package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Template values mirror the Python objects a Jinja template sees:
//
//	nil          None
//	bool         bool
//	int64        int
//	float64      float
//	string       str
//	[]any        list (never mutated: the sandbox transformers uses is immutable)
//	tuple        tuple
//	*dict        dict (insertion ordered)
//	*namespace   jinja2.utils.Namespace
//	*loopContext the loop variable
//	*function    built-in functions, bound methods and macros
//	*undefined   jinja2.Undefined
type tuple []any

// dict is an insertion-ordered Python dict. Keys are hashable scalars
// (string, int64, float64, bool or nil).
type dict struct {
	keys []any
	vals map[any]any
}

func newDict(n int) *dict { return &dict{keys: make([]any, 0, n), vals: make(map[any]any, n)} }

func (d *dict) set(k, v any) {
	if _, ok := d.vals[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.vals[k] = v
}

func (d *dict) get(k any) (any, bool) {
	v, ok := d.vals[dictKey(k)]
	return v, ok
}

// dictKey folds keys that Python considers equal (1, 1.0 and True) onto one
// Go map key.
func dictKey(k any) any {
	switch k := k.(type) {
	case bool:
		if k {
			return int64(1)
		}
		return int64(0)
	case float64:
		if k == math.Trunc(k) && math.Abs(k) < 1<<62 {
			return int64(k)
		}
	}
	return k
}

// hashable reports whether k can be a dict key.
func hashable(k any) bool {
	switch k.(type) {
	case nil, bool, int64, float64, string:
		return true
	}
	return false
}

type namespace struct{ d *dict }

type undefined struct {
	hint string // the message of the UndefinedError raised on misuse
}

func (u *undefined) err() error { return fmt.Errorf("%w: %s", ErrUndefined, u.hint) }

func undefName(name string) *undefined {
	return &undefined{hint: fmt.Sprintf("'%s' is undefined", name)}
}

func undefAttr(obj any, name string) *undefined {
	return &undefined{hint: fmt.Sprintf("'%s object' has no attribute '%s'", typeName(obj), name)}
}

type kwarg struct {
	name string
	val  any
}

// function is anything callable from a template.
type function struct {
	name string
	call func(r *renderer, args []any, kw []kwarg) (any, error)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case tuple:
		return "tuple"
	case *dict:
		return "dict"
	case *namespace:
		return "Namespace"
	case *loopContext:
		return "LoopContext"
	case *function:
		return "function"
	case *undefined:
		return "Undefined"
	}
	return fmt.Sprintf("%T", v)
}

func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case string:
		return v != ""
	case []any:
		return len(v) != 0
	case tuple:
		return len(v) != 0
	case *dict:
		return len(v.keys) != 0
	case *undefined:
		return false
	}
	return true
}

// str is Python's str(v), except that Undefined prints as "".
func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case *undefined:
		return ""
	}
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

// repr is Python's repr(v).
func repr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

// maxReprDepth stops repr of a namespace that contains itself.
const maxReprDepth = 100

func writeRepr(b *strings.Builder, v any, depth int) {
	if depth > maxReprDepth || b.Len() > maxOutput {
		b.WriteString("...")
		return
	}
	depth++
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(formatFloat(v))
	case string:
		writeStringRepr(b, v)
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x, depth)
		}
		b.WriteByte(']')
	case tuple:
		b.WriteByte('(')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x, depth)
		}
		if len(v) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *dict:
		writeDictRepr(b, v, depth)
	case *namespace:
		b.WriteString("<Namespace ")
		writeDictRepr(b, v.d, depth)
		b.WriteByte('>')
	case *loopContext:
		fmt.Fprintf(b, "<LoopContext %d/%d>", v.index+1, len(v.items))
	case *function:
		fmt.Fprintf(b, "<function %s>", v.name)
	case *undefined:
		b.WriteString("Undefined")
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

func writeDictRepr(b *strings.Builder, d *dict, depth int) {
	b.WriteByte('{')
	for i, k := range d.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writeRepr(b, k, depth)
		b.WriteString(": ")
		writeRepr(b, d.vals[k], depth)
	}
	b.WriteByte('}')
}

// writeStringRepr quotes s as Python's repr does: single quotes unless the
// string holds a single quote and no double quote.
func writeStringRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x7f && r >= 0x20:
			b.WriteRune(r)
		case r < 0x100 && !pyPrintable(r):
			fmt.Fprintf(b, `\x%02x`, r)
		case !pyPrintable(r) && r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		case !pyPrintable(r):
			fmt.Fprintf(b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}

// pyPrintable approximates Python's str.isprintable for one character.
func pyPrintable(r rune) bool {
	if r == utf8.RuneError {
		return true // decoding errors print as U+FFFD
	}
	return unicode.IsPrint(r)
}

// formatFloat is Python's float.__repr__.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±dd
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign = "-"
		exp = -exp
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, exp)
}

// equal is Python's ==.
func equal(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool, int64, float64:
		x, ok1 := toFloatExact(a)
		y, ok2 := toFloatExact(b)
		if ai, ok := asInt(a); ok {
			if bi, ok := asInt(b); ok {
				return ai == bi
			}
		}
		return ok1 && ok2 && x == y
	case string:
		s, ok := b.(string)
		return ok && a == s
	case []any:
		l, ok := b.([]any)
		return ok && seqEqual(a, l)
	case tuple:
		t, ok := b.(tuple)
		return ok && seqEqual(a, t)
	case *dict:
		d, ok := b.(*dict)
		if !ok || len(a.keys) != len(d.keys) {
			return false
		}
		for _, k := range a.keys {
			v, ok := d.vals[k]
			if !ok || !equal(a.vals[k], v) {
				return false
			}
		}
		return true
	case *undefined:
		_, ok := b.(*undefined)
		return ok
	}
	return a == b
}

func seqEqual(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// asInt returns v as an integer when it is an int or a bool.
func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func toFloatExact(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func isNumber(v any) bool {
	switch v.(type) {
	case bool, int64, float64:
		return true
	}
	return false
}

// iterate returns the items a Python for loop over v visits.
func iterate(v any) ([]any, error) {
	switch v := v.(type) {
	case []any:
		return v, nil
	case tuple:
		return v, nil
	case *dict:
		return append([]any(nil), v.keys...), nil
	case string:
		return chars(v), nil
	case *undefined:
		return nil, nil
	case *loopContext:
		return v.items, nil
	}
	return nil, fmt.Errorf("%w: '%s' object is not iterable", ErrType, typeName(v))
}

func chars(s string) []any {
	out := make([]any, 0, len(s))
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

func length(v any) (int, error) {
	switch v := v.(type) {
	case string:
		return utf8.RuneCountInString(v), nil
	case []any:
		return len(v), nil
	case tuple:
		return len(v), nil
	case *dict:
		return len(v.keys), nil
	case *undefined:
		return 0, nil
	case *loopContext:
		return len(v.items), nil
	}
	return 0, fmt.Errorf("%w: object of type '%s' has no len()", ErrType, typeName(v))
}

// compare is Python's ordering for <, <=, > and >=; it returns -1, 0 or 1.
func compare(a, b any) (int, error) {
	if u, ok := a.(*undefined); ok {
		return 0, u.err()
	}
	if u, ok := b.(*undefined); ok {
		return 0, u.err()
	}
	if isNumber(a) && isNumber(b) {
		if ai, ok := asInt(a); ok {
			if bi, ok := asInt(b); ok {
				return cmpOrdered(ai, bi), nil
			}
		}
		x, _ := toFloatExact(a)
		y, _ := toFloatExact(b)
		if math.IsNaN(x) || math.IsNaN(y) {
			return 2, nil // unordered: every comparison is false
		}
		return cmpOrdered(x, y), nil
	}
	switch a := a.(type) {
	case string:
		if s, ok := b.(string); ok {
			return strings.Compare(a, s), nil
		}
	case []any:
		if l, ok := b.([]any); ok {
			return compareSeq(a, l)
		}
	case tuple:
		if t, ok := b.(tuple); ok {
			return compareSeq(a, t)
		}
	}
	return 0, fmt.Errorf("%w: ordering not supported between instances of '%s' and '%s'", ErrType, typeName(a), typeName(b))
}

func compareSeq(a, b []any) (int, error) {
	for i := 0; i < len(a) && i < len(b); i++ {
		if equal(a[i], b[i]) {
			continue
		}
		return compare(a[i], b[i])
	}
	return cmpOrdered(len(a), len(b)), nil
}

func cmpOrdered[T int | int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortValues sorts items in place with Python ordering, keyed by key.
func sortValues(items []any, key func(any) any, reverse bool) error {
	var err error
	sort.SliceStable(items, func(i, j int) bool {
		c, e := compare(key(items[i]), key(items[j]))
		if e != nil && err == nil {
			err = e
		}
		if reverse {
			return c == 1
		}
		return c == -1
	})
	return err
}
