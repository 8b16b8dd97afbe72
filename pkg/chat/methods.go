package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// getAttr is Jinja's obj.name: a method or attribute, else the dict item
// of that name, else undefined.
func getAttr(obj any, name string) (any, error) {
	switch o := obj.(type) {
	case *undefined:
		return nil, o.err()
	case *dict:
		if m := dictMethod(o, name); m != nil {
			return m, nil
		}
		if v, ok := o.vals[name]; ok {
			return v, nil
		}
	case string:
		if m := strMethod(o, name); m != nil {
			return m, nil
		}
	case *namespace:
		if v, ok := o.d.vals[name]; ok {
			return v, nil
		}
	case *loopContext:
		if v, ok := o.attr(name); ok {
			return v, nil
		}
	}
	return undefAttr(obj, name), nil
}

// getItem is Jinja's obj[key]: the item, else the attribute named key,
// else undefined.
func getItem(obj any, key any) (any, error) {
	switch o := obj.(type) {
	case *undefined:
		return nil, o.err()
	case *dict:
		if hashable(key) {
			if v, ok := o.get(key); ok {
				return v, nil
			}
		}
	case []any:
		if v, ok := index(o, key); ok {
			return v, nil
		}
	case tuple:
		if v, ok := index(o, key); ok {
			return v, nil
		}
	case string:
		if i, ok := asInt(key); ok {
			n := int64(utf8.RuneCountInString(o))
			if i < 0 {
				i += n
			}
			if i >= 0 && i < n {
				return string([]rune(o)[i]), nil
			}
		}
	}
	if name, ok := key.(string); ok {
		return getAttr(obj, name)
	}
	return &undefined{hint: fmt.Sprintf("%s object has no element %s", typeName(obj), repr(key))}, nil
}

func index(items []any, key any) (any, bool) {
	i, ok := asInt(key)
	if !ok {
		return nil, false
	}
	if i < 0 {
		i += int64(len(items))
	}
	if i < 0 || i >= int64(len(items)) {
		return nil, false
	}
	return items[i], true
}

func (l *loopContext) attr(name string) (any, bool) {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index + 1), true
	case "index0":
		return int64(l.index), true
	case "revindex":
		return int64(n - l.index), true
	case "revindex0":
		return int64(n - l.index - 1), true
	case "first":
		return l.index == 0, true
	case "last":
		return l.index == n-1, true
	case "length":
		return int64(n), true
	case "depth":
		return int64(1), true
	case "depth0":
		return int64(0), true
	case "previtem":
		if l.index > 0 {
			return l.items[l.index-1], true
		}
		return &undefined{hint: "there is no previous item"}, true
	case "nextitem":
		if l.index < n-1 {
			return l.items[l.index+1], true
		}
		return &undefined{hint: "there is no next item"}, true
	case "cycle":
		return &function{name: "loop.cycle", call: func(_ *renderer, args []any, _ []kwarg) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("%w: no items for cycling given", ErrType)
			}
			return args[l.index%len(args)], nil
		}}, true
	}
	return nil, false
}

// required marks a parameter without a default in bind.
var required = &struct{ x int }{}

// bind matches args and kw to the parameters of fn, filling defaults; defs
// holds one default per parameter (required for none).
func bind(fn string, args []any, kw []kwarg, params []string, defs []any) ([]any, error) {
	if len(args) > len(params) {
		return nil, fmt.Errorf("%w: %s() takes at most %d arguments (%d given)", ErrType, fn, len(params), len(args))
	}
	out := make([]any, len(params))
	set := make([]bool, len(params))
	for i, a := range args {
		out[i], set[i] = a, true
	}
	for _, k := range kw {
		i := indexOf(params, k.name)
		if i < 0 {
			return nil, fmt.Errorf("%w: %s() got an unexpected keyword argument '%s'", ErrType, fn, k.name)
		}
		if set[i] {
			return nil, fmt.Errorf("%w: %s() got multiple values for argument '%s'", ErrType, fn, k.name)
		}
		out[i], set[i] = k.val, true
	}
	for i := range params {
		if set[i] {
			continue
		}
		if defs[i] == required {
			return nil, fmt.Errorf("%w: %s() missing required argument '%s'", ErrType, fn, params[i])
		}
		out[i] = defs[i]
	}
	return out, nil
}

func method(name string, params []string, defs []any, f func(a []any) (any, error)) *function {
	return &function{name: name, call: func(_ *renderer, args []any, kw []kwarg) (any, error) {
		a, err := bind(name, args, kw, params, defs)
		if err != nil {
			return nil, err
		}
		return f(a)
	}}
}

func dictMethod(d *dict, name string) *function {
	switch name {
	case "items":
		return method("dict.items", nil, nil, func([]any) (any, error) { return dictItems(d), nil })
	case "keys":
		return method("dict.keys", nil, nil, func([]any) (any, error) { return append([]any{}, d.keys...), nil })
	case "values":
		return method("dict.values", nil, nil, func([]any) (any, error) {
			out := make([]any, len(d.keys))
			for i, k := range d.keys {
				out[i] = d.vals[k]
			}
			return out, nil
		})
	case "get":
		return &function{name: "dict.get", call: func(_ *renderer, args []any, kw []kwarg) (any, error) {
			if len(kw) > 0 {
				return nil, fmt.Errorf("%w: dict.get() takes no keyword arguments", ErrType)
			}
			a, err := bind("dict.get", args, nil, []string{"key", "default"}, []any{required, nil})
			if err != nil {
				return nil, err
			}
			if hashable(a[0]) {
				if v, ok := d.get(a[0]); ok {
					return v, nil
				}
			}
			return a[1], nil
		}}
	}
	return nil
}

func dictItems(d *dict) []any {
	out := make([]any, len(d.keys))
	for i, k := range d.keys {
		out[i] = tuple{k, d.vals[k]}
	}
	return out
}

// optString returns v as a string, or ok=false for None.
func optString(fn string, v any) (s string, ok bool, err error) {
	switch v := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return v, true, nil
	}
	return "", false, fmt.Errorf("%w: %s() argument must be str or None, not %s", ErrType, fn, typeName(v))
}

func strArg(fn string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s() argument must be str, not %s", ErrType, fn, typeName(v))
	}
	return s, nil
}

func strMethod(s, name string) *function {
	fn := "str." + name
	switch name {
	case "strip", "lstrip", "rstrip":
		return method(fn, []string{"chars"}, []any{nil}, func(a []any) (any, error) {
			chars, ok, err := optString(fn, a[0])
			if err != nil {
				return nil, err
			}
			cut := isPySpace
			if ok {
				cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
			}
			switch name {
			case "lstrip":
				return strings.TrimLeftFunc(s, cut), nil
			case "rstrip":
				return strings.TrimRightFunc(s, cut), nil
			}
			return strings.TrimFunc(s, cut), nil
		})
	case "startswith", "endswith":
		return method(fn, []string{"prefix"}, []any{required}, func(a []any) (any, error) {
			var cands []any
			switch p := a[0].(type) {
			case string:
				cands = []any{p}
			case tuple:
				cands = p
			default:
				return nil, fmt.Errorf("%w: %s first arg must be str or a tuple of str, not %s", ErrType, fn, typeName(a[0]))
			}
			for _, c := range cands {
				p, err := strArg(fn, c)
				if err != nil {
					return nil, err
				}
				if name == "startswith" && strings.HasPrefix(s, p) || name == "endswith" && strings.HasSuffix(s, p) {
					return true, nil
				}
			}
			return false, nil
		})
	case "split", "rsplit":
		return method(fn, []string{"sep", "maxsplit"}, []any{nil, int64(-1)}, func(a []any) (any, error) {
			sep, hasSep, err := optString(fn, a[0])
			if err != nil {
				return nil, err
			}
			maxsplit, ok := asInt(a[1])
			if !ok {
				return nil, fmt.Errorf("%w: %s() maxsplit must be an integer", ErrType, fn)
			}
			if hasSep && sep == "" {
				return nil, fmt.Errorf("%w: empty separator", ErrType)
			}
			return pySplit(s, sep, hasSep, maxsplit, name == "rsplit"), nil
		})
	case "lower":
		return method(fn, nil, nil, func([]any) (any, error) { return strings.ToLower(s), nil })
	case "upper":
		return method(fn, nil, nil, func([]any) (any, error) { return strings.ToUpper(s), nil })
	case "title":
		return method(fn, nil, nil, func([]any) (any, error) { return pyTitle(s), nil })
	case "capitalize":
		return method(fn, nil, nil, func([]any) (any, error) { return pyCapitalize(s), nil })
	case "replace":
		return method(fn, []string{"old", "new", "count"}, []any{required, required, int64(-1)}, func(a []any) (any, error) {
			return pyReplace(fn, s, a[0], a[1], a[2])
		})
	case "find", "rfind", "count":
		return method(fn, []string{"sub"}, []any{required}, func(a []any) (any, error) {
			sub, err := strArg(fn, a[0])
			if err != nil {
				return nil, err
			}
			switch name {
			case "count":
				return int64(strings.Count(s, sub)), nil
			case "find":
				return runeIndex(s, strings.Index(s, sub)), nil
			}
			return runeIndex(s, strings.LastIndex(s, sub)), nil
		})
	case "join":
		return method(fn, []string{"iterable"}, []any{required}, func(a []any) (any, error) {
			items, err := iterate(a[0])
			if err != nil {
				return nil, err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				if parts[i], err = strArg(fn, it); err != nil {
					return nil, err
				}
			}
			return strings.Join(parts, s), nil
		})
	case "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper":
		return method(fn, nil, nil, func([]any) (any, error) { return strPredicate(name, s), nil })
	}
	return nil
}

// runeIndex converts a byte index (or -1) to a character index.
func runeIndex(s string, i int) int64 {
	if i < 0 {
		return -1
	}
	return int64(utf8.RuneCountInString(s[:i]))
}

func pyReplace(fn, s string, oldV, newV, countV any) (any, error) {
	old, err := strArg(fn, oldV)
	if err != nil {
		return nil, err
	}
	repl, err := strArg(fn, newV)
	if err != nil {
		return nil, err
	}
	n, ok := asInt(countV)
	if !ok {
		return nil, fmt.Errorf("%w: %s() count must be an integer", ErrType, fn)
	}
	if n < 0 || n > int64(len(s))+1 {
		n = -1
	}
	if old != "" || n != 0 {
		matches := int64(strings.Count(s, old))
		if n >= 0 && n < matches {
			matches = n
		}
		if int64(len(s))+matches*int64(len(repl)) > maxOutput {
			return nil, fmt.Errorf("%w: string over %d bytes", ErrLimit, maxOutput)
		}
	}
	return strings.Replace(s, old, repl, int(n)), nil
}

func strPredicate(name, s string) bool {
	if s == "" {
		return false
	}
	all := func(f func(rune) bool) bool {
		for _, r := range s {
			if !f(r) {
				return false
			}
		}
		return true
	}
	cased := func(want func(rune) bool, other func(rune) bool) bool {
		seen := false
		for _, r := range s {
			if other(r) {
				return false
			}
			if want(r) {
				seen = true
			}
		}
		return seen
	}
	switch name {
	case "isdigit":
		return all(unicode.IsDigit)
	case "isalpha":
		return all(unicode.IsLetter)
	case "isalnum":
		return all(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) })
	case "isspace":
		return all(isPySpace)
	case "islower":
		return cased(unicode.IsLower, func(r rune) bool { return unicode.IsUpper(r) || unicode.IsTitle(r) })
	case "isupper":
		return cased(unicode.IsUpper, func(r rune) bool { return unicode.IsLower(r) || unicode.IsTitle(r) })
	}
	return false
}

// pySplit is Python's str.split and str.rsplit.
func pySplit(s, sep string, hasSep bool, maxsplit int64, fromRight bool) []any {
	var parts []string
	if hasSep {
		if maxsplit < 0 {
			parts = strings.Split(s, sep)
		} else if !fromRight {
			parts = strings.SplitN(s, sep, int(min(maxsplit, int64(len(s))))+1)
		} else {
			parts = rsplitN(s, sep, maxsplit)
		}
	} else {
		fields := strings.FieldsFunc(s, isPySpace)
		if maxsplit < 0 || maxsplit >= int64(len(fields)) {
			parts = fields
		} else if !fromRight {
			parts = splitWhitespaceN(s, int(maxsplit))
		} else {
			parts = rsplitWhitespaceN(s, int(maxsplit))
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}

func rsplitN(s, sep string, n int64) []string {
	var rev []string
	for ; n > 0; n-- {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

func splitWhitespaceN(s string, n int) []string {
	var out []string
	s = strings.TrimLeftFunc(s, isPySpace)
	for ; n > 0 && s != ""; n-- {
		i := strings.IndexFunc(s, isPySpace)
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = strings.TrimLeftFunc(s[i:], isPySpace)
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func rsplitWhitespaceN(s string, n int) []string {
	var rev []string
	s = strings.TrimRightFunc(s, isPySpace)
	for ; n > 0 && s != ""; n-- {
		i := strings.LastIndexFunc(s, isPySpace)
		if i < 0 {
			break
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		rev = append(rev, s[i+w:])
		s = strings.TrimRightFunc(s[:i], isPySpace)
	}
	var out []string
	if s != "" {
		out = append(out, s)
	}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyTitle is Python's str.title: a cased character after an uncased one
// starts a word.
func pyTitle(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if prev {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prev = isCased(r)
	}
	return b.String()
}

func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}
