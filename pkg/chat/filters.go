package chat

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

type filterFunc func(r *renderer, v any, args []any, kw []kwarg) (any, error)

type testFunc func(r *renderer, v any, args []any) (bool, error)

// lookupFilter returns the filter named name, or nil if it is not
// supported. transformers' tojson replaces Jinja's own.
func lookupFilter(name string) filterFunc {
	switch name {
	case "abs":
		return filterAbs
	case "capitalize":
		return strFilter(pyCapitalize)
	case "count", "length":
		return filterLength
	case "default", "d":
		return filterDefault
	case "dictsort":
		return filterDictsort
	case "first":
		return filterFirst
	case "float":
		return filterFloat
	case "indent":
		return filterIndent
	case "int":
		return filterInt
	case "items":
		return filterItems
	case "join":
		return filterJoin
	case "last":
		return filterLast
	case "list":
		return filterList
	case "lower":
		return strFilter(strings.ToLower)
	case "map":
		return filterMap
	case "max":
		return filterMinMax(1)
	case "min":
		return filterMinMax(-1)
	case "reject":
		return filterSelect(false, false)
	case "rejectattr":
		return filterSelect(false, true)
	case "replace":
		return filterReplace
	case "reverse":
		return filterReverse
	case "round":
		return filterRound
	case "safe":
		return func(_ *renderer, v any, args []any, kw []kwarg) (any, error) { return v, nil }
	case "select":
		return filterSelect(true, false)
	case "selectattr":
		return filterSelect(true, true)
	case "sort":
		return filterSort
	case "string":
		return strFilter(func(s string) string { return s })
	case "sum":
		return filterSum
	case "title":
		return strFilter(pyTitle)
	case "tojson":
		return filterToJSON
	case "trim":
		return filterTrim
	case "unique":
		return filterUnique
	case "upper":
		return strFilter(strings.ToUpper)
	}
	return nil
}

func strFilter(f func(string) string) filterFunc {
	return func(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
		if _, err := bind("filter", args, kw, nil, nil); err != nil {
			return nil, err
		}
		return f(str(v)), nil
	}
}

func filterTrim(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("trim", args, kw, []string{"chars"}, []any{nil})
	if err != nil {
		return nil, err
	}
	chars, ok, err := optString("trim", a[0])
	if err != nil {
		return nil, err
	}
	if ok {
		return strings.Trim(str(v), chars), nil
	}
	return strings.TrimFunc(str(v), isPySpace), nil
}

func filterLength(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	if _, err := bind("length", args, kw, nil, nil); err != nil {
		return nil, err
	}
	n, err := length(v)
	return int64(n), err
}

func filterDefault(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("default", args, kw, []string{"default_value", "boolean"}, []any{"", false})
	if err != nil {
		return nil, err
	}
	if _, ok := v.(*undefined); ok || truthy(a[1]) && !truthy(v) {
		return a[0], nil
	}
	return v, nil
}

func filterJoin(r *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("join", args, kw, []string{"d", "attribute"}, []any{"", nil})
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if a[1] != nil {
		if items, err = mapAttr(items, a[1], nil); err != nil {
			return nil, err
		}
	}
	parts := make([]string, len(items))
	size := 0
	for i, it := range items {
		parts[i] = str(it)
		size += len(parts[i]) + len(str(a[0]))
		if size > maxOutput {
			return nil, fmt.Errorf("%w: string over %d bytes", ErrLimit, maxOutput)
		}
	}
	return strings.Join(parts, str(a[0])), nil
}

func filterList(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	if _, err := bind("list", args, kw, nil, nil); err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return append([]any{}, items...), nil
}

func filterFirst(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	if _, err := bind("first", args, kw, nil, nil); err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &undefined{hint: "No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

func filterLast(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	if _, err := bind("last", args, kw, nil, nil); err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &undefined{hint: "No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

func filterReplace(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("replace", args, kw, []string{"old", "new", "count"}, []any{required, required, nil})
	if err != nil {
		return nil, err
	}
	if a[2] == nil {
		a[2] = int64(-1)
	}
	return pyReplace("replace", str(v), str(a[0]), str(a[1]), a[2])
}

// pyInt is Python's int() of a string: surrounding whitespace, a sign and
// underscores between digits are allowed.
func pyInt(s string, base int) (int64, bool) {
	s = strings.TrimFunc(s, isPySpace)
	sign := ""
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		sign, s = s[:1], s[1:]
	}
	if len(s) > 2 && s[0] == '0' {
		if p := map[int]byte{16: 'x', 8: 'o', 2: 'b'}[base]; p != 0 && s[1]|0x20 == p {
			s = s[2:]
			if strings.HasPrefix(s, "_") {
				s = s[1:]
			}
		}
	}
	if strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return 0, false
	}
	n, err := strconv.ParseInt(sign+strings.ReplaceAll(s, "_", ""), base, 64)
	return n, err == nil
}

func pyFloat(s string) (float64, bool) {
	s = strings.TrimFunc(s, isPySpace)
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "inf", "infinity", "nan":
	default:
		if strings.ContainsAny(s, "xXpP") || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	return f, err == nil || isRangeErr(err)
}

func filterInt(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("int", args, kw, []string{"default", "base"}, []any{int64(0), int64(10)})
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *undefined:
		return nil, x.err()
	case bool, int64:
		n, _ := asInt(x)
		return n, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return a[0], nil
		}
		return int64(x), nil
	case string:
		base, ok := asInt(a[1])
		if !ok || base < 2 || base > 36 {
			return nil, fmt.Errorf("%w: int() base must be between 2 and 36", ErrType)
		}
		if n, ok := pyInt(x, int(base)); ok {
			return n, nil
		}
		if f, ok := pyFloat(x); ok && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return int64(f), nil
		}
	}
	return a[0], nil
}

func filterFloat(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("float", args, kw, []string{"default"}, []any{0.0})
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *undefined:
		return nil, x.err()
	case bool, int64, float64:
		f, _ := toFloatExact(x)
		return f, nil
	case string:
		if f, ok := pyFloat(x); ok {
			return f, nil
		}
	}
	return a[0], nil
}

func filterAbs(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	if _, err := bind("abs", args, kw, nil, nil); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case bool, int64:
		n, _ := asInt(x)
		if n < 0 {
			n = -n
		}
		return n, nil
	case float64:
		return math.Abs(x), nil
	case *undefined:
		return nil, x.err()
	}
	return nil, fmt.Errorf("%w: bad operand type for abs(): '%s'", ErrType, typeName(v))
}

func filterRound(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("round", args, kw, []string{"precision", "method"}, []any{int64(0), "common"})
	if err != nil {
		return nil, err
	}
	prec, ok := asInt(a[0])
	if !ok || prec < -308 || prec > 308 {
		return nil, fmt.Errorf("%w: round() precision must be a small integer", ErrType)
	}
	if u, ok := v.(*undefined); ok {
		return nil, u.err()
	}
	if n, ok := asInt(v); ok && prec >= 0 {
		if a[1] == "common" {
			return n, nil
		}
		return float64(n), nil
	}
	f, ok := toFloatExact(v)
	if !ok {
		return nil, fmt.Errorf("%w: type %s doesn't define __round__ method", ErrType, typeName(v))
	}
	scale := math.Pow(10, float64(prec))
	switch a[1] {
	case "common":
		if prec >= 0 {
			// strconv rounds the exact binary value half to even, as
			// Python's round does.
			r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(prec), 64), 64)
			if err != nil {
				return f, nil
			}
			return r, nil
		}
		return math.RoundToEven(f*scale) / scale, nil
	case "ceil":
		return math.Ceil(f*scale) / scale, nil
	case "floor":
		return math.Floor(f*scale) / scale, nil
	}
	return nil, fmt.Errorf("%w: method must be 'common', 'ceil' or 'floor'", ErrType)
}

func filterItems(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	if _, err := bind("items", args, kw, nil, nil); err != nil {
		return nil, err
	}
	switch d := v.(type) {
	case *undefined:
		return []any{}, nil
	case *dict:
		return dictItems(d), nil
	}
	return nil, fmt.Errorf("%w: can only get item pairs from a mapping", ErrType)
}

// sortKey lowers strings unless caseSensitive, for sort, dictsort, unique,
// min and max.
func sortKey(caseSensitive bool) func(any) any {
	return func(v any) any {
		if s, ok := v.(string); ok && !caseSensitive {
			return strings.ToLower(s)
		}
		return v
	}
}

func filterDictsort(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("dictsort", args, kw, []string{"case_sensitive", "by", "reverse"}, []any{false, "key", false})
	if err != nil {
		return nil, err
	}
	d, ok := v.(*dict)
	if !ok {
		return nil, fmt.Errorf("%w: dictsort needs a mapping, not %s", ErrType, typeName(v))
	}
	pos := 0
	switch a[1] {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, fmt.Errorf("%w: you can only sort by either 'key' or 'value'", ErrType)
	}
	items := dictItems(d)
	key := sortKey(truthy(a[0]))
	err = sortValues(items, func(it any) any { return key(it.(tuple)[pos]) }, truthy(a[2]))
	return items, err
}

func filterSort(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("sort", args, kw, []string{"reverse", "case_sensitive", "attribute"}, []any{false, false, nil})
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	items = append([]any{}, items...)
	keys := items
	if a[2] != nil {
		if keys, err = mapAttr(items, a[2], nil); err != nil {
			return nil, err
		}
	}
	lower := sortKey(truthy(a[1]))
	idx := make([]any, len(items))
	for i := range idx {
		idx[i] = int64(i)
	}
	err = sortValues(idx, func(i any) any { return lower(keys[i.(int64)]) }, truthy(a[0]))
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j.(int64)]
	}
	return out, err
}

func filterReverse(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	if _, err := bind("reverse", args, kw, nil, nil); err != nil {
		return nil, err
	}
	if s, ok := v.(string); ok {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs), nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return out, nil
}

func filterUnique(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("unique", args, kw, []string{"case_sensitive", "attribute"}, []any{false, nil})
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	keys := items
	if a[1] != nil {
		if keys, err = mapAttr(items, a[1], nil); err != nil {
			return nil, err
		}
	}
	lower := sortKey(truthy(a[0]))
	var out, seen []any
	for i, it := range items {
		k := lower(keys[i])
		if containsSeq(seen, k) {
			continue
		}
		seen = append(seen, k)
		out = append(out, it)
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

func filterSum(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("sum", args, kw, []string{"attribute", "start"}, []any{nil, int64(0)})
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if a[0] != nil {
		if items, err = mapAttr(items, a[0], nil); err != nil {
			return nil, err
		}
	}
	total := a[1]
	for _, it := range items {
		if total, err = arith("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func filterMinMax(sign int) filterFunc {
	return func(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
		a, err := bind("min/max", args, kw, []string{"case_sensitive", "attribute"}, []any{false, nil})
		if err != nil {
			return nil, err
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return &undefined{hint: "No aggregated item, sequence was empty."}, nil
		}
		keys := items
		if a[1] != nil {
			if keys, err = mapAttr(items, a[1], nil); err != nil {
				return nil, err
			}
		}
		lower := sortKey(truthy(a[0]))
		best := 0
		for i := 1; i < len(items); i++ {
			c, err := compare(lower(keys[i]), lower(keys[best]))
			if err != nil {
				return nil, err
			}
			if c == sign {
				best = i
			}
		}
		return items[best], nil
	}
}

func filterIndent(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("indent", args, kw, []string{"width", "first", "blank"}, []any{int64(4), false, false})
	if err != nil {
		return nil, err
	}
	ind, ok := a[0].(string)
	if !ok {
		n, isInt := asInt(a[0])
		if !isInt || n > 1<<10 {
			return nil, fmt.Errorf("%w: indent width must be a small integer or a string", ErrType)
		}
		ind = strings.Repeat(" ", int(max(n, 0)))
	}
	lines := strings.Split(str(v), "\n")
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
			if l != "" || truthy(a[2]) {
				b.WriteString(ind)
			}
		} else if truthy(a[1]) {
			b.WriteString(ind)
		}
		b.WriteString(l)
		if b.Len() > maxOutput {
			return nil, fmt.Errorf("%w: string over %d bytes", ErrLimit, maxOutput)
		}
	}
	return b.String(), nil
}

// attrPath resolves a dotted attribute such as "function.name" (integer
// parts index lists), as Jinja's make_attrgetter does.
func attrPath(item any, path any) (any, error) {
	p, ok := path.(string)
	if !ok {
		return getItem(item, path)
	}
	for _, part := range strings.Split(p, ".") {
		var key any = part
		if n, err := strconv.ParseInt(part, 10, 64); err == nil {
			key = n
		}
		var err error
		if item, err = getItem(item, key); err != nil {
			return nil, err
		}
	}
	return item, nil
}

// mapAttr maps items to their attribute path; def replaces undefined
// results when not nil.
func mapAttr(items []any, path any, def any) ([]any, error) {
	out := make([]any, len(items))
	for i, it := range items {
		v, err := attrPath(it, path)
		if err != nil {
			return nil, err
		}
		if _, ok := v.(*undefined); ok && def != nil {
			v = def
		}
		out[i] = v
	}
	return out, nil
}

func filterMap(r *renderer, v any, args []any, kw []kwarg) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		var attr, def any
		for _, k := range kw {
			switch k.name {
			case "attribute":
				attr = k.val
			case "default":
				def = k.val
			default:
				return nil, fmt.Errorf("%w: map() got an unexpected keyword argument '%s'", ErrType, k.name)
			}
		}
		if attr == nil {
			return nil, fmt.Errorf("%w: map() needs a filter name or attribute=", ErrType)
		}
		return mapAttr(items, attr, def)
	}
	name, ok := args[0].(string)
	f := lookupFilter(name)
	if !ok || f == nil {
		return nil, &UnsupportedError{Feature: fmt.Sprintf("filter %s in map()", repr(args[0]))}
	}
	out := make([]any, len(items))
	for i, it := range items {
		if out[i], err = f(r, it, args[1:], kw); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// filterSelect builds select, reject, selectattr and rejectattr.
func filterSelect(keep, byAttr bool) filterFunc {
	return func(r *renderer, v any, args []any, kw []kwarg) (any, error) {
		if len(kw) > 0 {
			return nil, fmt.Errorf("%w: select filters take no keyword arguments", ErrType)
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		var attr any
		if byAttr {
			if len(args) == 0 {
				return nil, fmt.Errorf("%w: missing parameter for attribute name", ErrType)
			}
			attr, args = args[0], args[1:]
		}
		var test testFunc
		if len(args) > 0 {
			name, ok := args[0].(string)
			if test = lookupTest(name); !ok || test == nil {
				return nil, &UnsupportedError{Feature: fmt.Sprintf("test %s", repr(args[0]))}
			}
			args = args[1:]
		}
		out := []any{}
		for _, it := range items {
			x := it
			if byAttr {
				if x, err = attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			ok := truthy(x)
			if test != nil {
				if ok, err = test(r, x, args); err != nil {
					return nil, err
				}
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return out, nil
	}
}

func filterToJSON(_ *renderer, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("tojson", args, kw, []string{"ensure_ascii", "indent", "separators", "sort_keys"},
		[]any{false, nil, nil, false})
	if err != nil {
		return nil, err
	}
	o := jsonOptions{ensureASCII: truthy(a[0]), sortKeys: truthy(a[3]), itemSep: ", ", keySep: ": "}
	switch ind := a[1].(type) {
	case nil:
	case string:
		o.indent, o.pretty = ind, true
		o.itemSep = ","
	default:
		n, ok := asInt(ind)
		if !ok || n > 1<<10 {
			return nil, fmt.Errorf("%w: tojson indent must be a small integer or a string", ErrType)
		}
		o.indent, o.pretty = strings.Repeat(" ", int(max(n, 0))), true
		o.itemSep = ","
	}
	if a[2] != nil {
		seps, err := iterate(a[2])
		if err != nil || len(seps) != 2 {
			return nil, fmt.Errorf("%w: tojson separators must be a pair of strings", ErrType)
		}
		if o.itemSep, err = strArg("tojson", seps[0]); err != nil {
			return nil, err
		}
		if o.keySep, err = strArg("tojson", seps[1]); err != nil {
			return nil, err
		}
	}
	return toJSON(v, o)
}

// lookupTest returns the Jinja test named name, or nil.
func lookupTest(name string) testFunc {
	simple := func(f func(v any) bool) testFunc {
		return func(_ *renderer, v any, args []any) (bool, error) {
			if len(args) > 0 {
				return false, fmt.Errorf("%w: test '%s' takes no arguments", ErrType, name)
			}
			return f(v), nil
		}
	}
	binary := func(f func(a, b any) (bool, error)) testFunc {
		return func(_ *renderer, v any, args []any) (bool, error) {
			if len(args) != 1 {
				return false, fmt.Errorf("%w: test '%s' takes one argument", ErrType, name)
			}
			return f(v, args[0])
		}
	}
	cmp := func(op string) testFunc {
		return binary(func(a, b any) (bool, error) { return compareOp(op, a, b) })
	}
	switch name {
	case "defined":
		return simple(func(v any) bool { _, u := v.(*undefined); return !u })
	case "undefined":
		return simple(func(v any) bool { _, u := v.(*undefined); return u })
	case "none":
		return simple(func(v any) bool { return v == nil })
	case "boolean":
		return simple(func(v any) bool { _, ok := v.(bool); return ok })
	case "true":
		return simple(func(v any) bool { return v == true })
	case "false":
		return simple(func(v any) bool { return v == false })
	case "integer":
		return simple(func(v any) bool { _, ok := v.(int64); return ok })
	case "float":
		return simple(func(v any) bool { _, ok := v.(float64); return ok })
	case "number":
		return simple(isNumber)
	case "string":
		return simple(func(v any) bool { _, ok := v.(string); return ok })
	case "mapping":
		return simple(func(v any) bool { _, ok := v.(*dict); return ok })
	case "iterable":
		return simple(func(v any) bool { _, err := iterate(v); return err == nil })
	case "sequence":
		return simple(func(v any) bool {
			switch v.(type) {
			case string, []any, tuple, *dict, *undefined:
				return true
			}
			return false
		})
	case "callable":
		return simple(func(v any) bool {
			switch v.(type) {
			case *function, *undefined: // Undefined has a __call__ that raises
				return true
			}
			return false
		})
	case "lower":
		return simple(func(v any) bool { return strPredicate("islower", str(v)) })
	case "upper":
		return simple(func(v any) bool { return strPredicate("isupper", str(v)) })
	case "odd", "even":
		return func(_ *renderer, v any, args []any) (bool, error) {
			n, ok := asInt(v)
			if !ok || len(args) > 0 {
				return false, fmt.Errorf("%w: test '%s' needs an integer", ErrType, name)
			}
			return (n%2 != 0) == (name == "odd"), nil
		}
	case "divisibleby":
		return binary(func(a, b any) (bool, error) {
			m, err := arith("%", a, b)
			if err != nil {
				return false, err
			}
			return equal(m, int64(0)), nil
		})
	case "sameas":
		return binary(func(a, b any) (bool, error) {
			switch a.(type) {
			case nil, bool:
				return a == b, nil
			}
			return equal(a, b) && typeName(a) == typeName(b), nil
		})
	case "in":
		return binary(func(a, b any) (bool, error) { return contains(b, a) })
	case "eq", "equalto", "==":
		return cmp("==")
	case "ne", "!=":
		return cmp("!=")
	case "lt", "lessthan", "<":
		return cmp("<")
	case "le", "<=":
		return cmp("<=")
	case "gt", "greaterthan", ">":
		return cmp(">")
	case "ge", ">=":
		return cmp(">=")
	}
	return nil
}
