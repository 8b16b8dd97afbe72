package chat

import (
	"fmt"
	"strings"
	"time"
)

// globals are the functions every template sees: Jinja's namespace, range
// and dict, and transformers' raise_exception and strftime_now.
func globals(now func() time.Time) map[string]*function {
	return map[string]*function{
		"raise_exception": {name: "raise_exception", call: func(_ *renderer, args []any, kw []kwarg) (any, error) {
			a, err := bind("raise_exception", args, kw, []string{"message"}, []any{required})
			if err != nil {
				return nil, err
			}
			return nil, &RaiseError{Msg: str(a[0])}
		}},
		"strftime_now": {name: "strftime_now", call: func(_ *renderer, args []any, kw []kwarg) (any, error) {
			a, err := bind("strftime_now", args, kw, []string{"format"}, []any{required})
			if err != nil {
				return nil, err
			}
			format, err := strArg("strftime_now", a[0])
			if err != nil {
				return nil, err
			}
			return strftime(now(), format)
		}},
		"namespace": {name: "namespace", call: func(_ *renderer, args []any, kw []kwarg) (any, error) {
			d, err := dictCall("namespace", args, kw)
			if err != nil {
				return nil, err
			}
			return &namespace{d: d}, nil
		}},
		"dict": {name: "dict", call: func(_ *renderer, args []any, kw []kwarg) (any, error) {
			return dictCall("dict", args, kw)
		}},
		"range": {name: "range", call: callRange},
	}
}

// dictCall builds a dict from an optional mapping and keyword arguments.
func dictCall(fn string, args []any, kw []kwarg) (*dict, error) {
	d := newDict(len(kw))
	switch len(args) {
	case 0:
	case 1:
		src, ok := args[0].(*dict)
		if !ok {
			return nil, fmt.Errorf("%w: %s() argument must be a mapping, not %s", ErrType, fn, typeName(args[0]))
		}
		for _, k := range src.keys {
			d.set(k, src.vals[k])
		}
	default:
		return nil, fmt.Errorf("%w: %s() takes at most 1 positional argument", ErrType, fn)
	}
	for _, k := range kw {
		d.set(k.name, k.val)
	}
	return d, nil
}

func callRange(_ *renderer, args []any, kw []kwarg) (any, error) {
	if len(kw) > 0 || len(args) == 0 || len(args) > 3 {
		return nil, fmt.Errorf("%w: range() takes 1 to 3 positional arguments", ErrType)
	}
	var n [3]int64
	for i, a := range args {
		v, ok := asInt(a)
		if !ok {
			if u, isU := a.(*undefined); isU {
				return nil, u.err()
			}
			return nil, fmt.Errorf("%w: '%s' object cannot be interpreted as an integer", ErrType, typeName(a))
		}
		n[i] = v
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(args) > 1 {
		start, stop = n[0], n[1]
	}
	if len(args) == 3 {
		step = n[2]
	}
	if step == 0 {
		return nil, fmt.Errorf("%w: range() arg 3 must not be zero", ErrType)
	}
	var count int64
	switch {
	case step > 0 && stop > start:
		count = (stop - start + step - 1) / step
	case step < 0 && stop < start:
		count = (start - stop - step - 1) / -step
	}
	if count < 0 || count > maxRange {
		return nil, fmt.Errorf("%w: range() of more than %d items", ErrLimit, maxRange)
	}
	out := make([]any, count)
	for i := range out {
		out[i] = start + int64(i)*step
	}
	return out, nil
}

// strftime formats t like Python's time.strftime in the C locale, for the
// directives chat templates use.
func strftime(t time.Time, format string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			b.WriteByte('%')
			break
		}
		pad := true // glibc's "%-d" drops the padding
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(v, width int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", width, v)
			} else {
				fmt.Fprintf(&b, "%d", v)
			}
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		switch format[i] {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if pad {
				fmt.Fprintf(&b, "%2d", t.Day())
			} else {
				num(t.Day(), 2)
			}
		case 'f':
			num(t.Nanosecond()/1000, 6)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num(hour12, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'S':
			num(t.Second(), 2)
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			num(wd, 1)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			num(t.Year(), 4)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case '%':
			b.WriteByte('%')
		default:
			return "", &UnsupportedError{Feature: fmt.Sprintf("strftime directive %%%c", format[i])}
		}
	}
	return b.String(), nil
}
