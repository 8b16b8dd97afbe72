package chat

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Limits that keep a hostile template from running away with memory or
// time. Real chat templates stay far below them.
const (
	maxOutput    = 16 << 20 // bytes of rendered text, in total and per value
	maxSteps     = 1 << 22  // statements, expressions and loop iterations
	maxRange     = 1 << 20  // items from range()
	maxCallDepth = 100      // nested macro calls
)

type scope struct {
	vars   map[string]any
	parent *scope
}

func newScope(parent *scope) *scope { return &scope{vars: make(map[string]any), parent: parent} }

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

type loopContext struct {
	items []any
	index int
}

type ctrl uint8

const (
	ctrlNone ctrl = iota
	ctrlBreak
	ctrlContinue
)

type renderer struct {
	t     *Template
	out   *strings.Builder
	steps int
	depth int
}

func (r *renderer) step() error {
	r.steps++
	if r.steps > maxSteps {
		return fmt.Errorf("%w: more than %d steps", ErrLimit, maxSteps)
	}
	return nil
}

func (r *renderer) write(s string) error {
	if r.out.Len()+len(s) > maxOutput {
		return fmt.Errorf("%w: output over %d bytes", ErrLimit, maxOutput)
	}
	r.out.WriteString(s)
	return nil
}

// wrap attaches the position pos to err, unless an inner expression already
// did.
func (r *renderer) wrap(pos int, err error) error {
	var re *RenderError
	if errors.As(err, &re) {
		return err
	}
	line, col := position(r.t.src, pos)
	var ue *UnsupportedError
	if errors.As(err, &ue) && ue.Line == 0 {
		ue.Line, ue.Col = line, col
	}
	return &RenderError{Line: line, Col: col, Err: err}
}

// capture renders body into a string.
func (r *renderer) capture(body []node, sc *scope) (string, error) {
	saved := r.out
	var b strings.Builder
	r.out = &b
	_, err := r.exec(body, sc)
	r.out = saved
	return b.String(), err
}

func (r *renderer) exec(body []node, sc *scope) (ctrl, error) {
	for _, n := range body {
		if err := r.step(); err != nil {
			return ctrlNone, r.wrap(n.nodePos(), err)
		}
		c, err := r.execNode(n, sc)
		if err != nil {
			return ctrlNone, r.wrap(n.nodePos(), err)
		}
		if c != ctrlNone {
			return c, nil
		}
	}
	return ctrlNone, nil
}

func (r *renderer) execNode(n node, sc *scope) (ctrl, error) {
	switch n := n.(type) {
	case *textNode:
		return ctrlNone, r.write(n.text)
	case *outputNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return ctrlNone, err
		}
		return ctrlNone, r.write(str(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c, sc)
			if err != nil {
				return ctrlNone, err
			}
			if truthy(v) {
				return r.exec(n.bodies[i], sc)
			}
		}
		return r.exec(n.els, sc)
	case *forNode:
		return r.execFor(n, sc)
	case *setNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return ctrlNone, err
		}
		return ctrlNone, r.assign(n.target, v, sc)
	case *setBlockNode:
		s, err := r.capture(n.body, sc)
		if err != nil {
			return ctrlNone, err
		}
		v, err := r.applyFilters(n.filters, s, sc)
		if err != nil {
			return ctrlNone, err
		}
		return ctrlNone, r.assign(n.target, v, sc)
	case *blockNode:
		s, err := r.capture(n.body, sc)
		if err != nil {
			return ctrlNone, err
		}
		v, err := r.applyFilters(n.filters, s, sc)
		if err != nil {
			return ctrlNone, err
		}
		return ctrlNone, r.write(str(v))
	case *macroNode:
		sc.vars[n.name] = r.macro(n, sc)
		return ctrlNone, nil
	case *loopCtlNode:
		if n.brk {
			return ctrlBreak, nil
		}
		return ctrlContinue, nil
	}
	panic(fmt.Sprintf("chat: unknown node %T", n)) // programmer error: the parser made it
}

func (r *renderer) applyFilters(filters []*filterExpr, v any, sc *scope) (any, error) {
	for _, f := range filters {
		var err error
		if v, err = r.callFilter(f, v, sc); err != nil {
			return nil, r.wrap(f.pos, err)
		}
	}
	return v, nil
}

func (r *renderer) execFor(n *forNode, sc *scope) (ctrl, error) {
	seq, err := r.eval(n.iter, sc)
	if err != nil {
		return ctrlNone, err
	}
	items, err := iterate(seq)
	if err != nil {
		return ctrlNone, r.wrap(n.iter.exprPos(), err)
	}
	if n.cond != nil {
		var kept []any
		for _, it := range items {
			if err := r.step(); err != nil {
				return ctrlNone, err
			}
			isc := newScope(sc)
			if err := r.assign(n.target, it, isc); err != nil {
				return ctrlNone, err
			}
			ok, err := r.eval(n.cond, isc)
			if err != nil {
				return ctrlNone, err
			}
			if truthy(ok) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.exec(n.els, sc)
	}
	for i, it := range items {
		if err := r.step(); err != nil {
			return ctrlNone, err
		}
		isc := newScope(sc)
		if err := r.assign(n.target, it, isc); err != nil {
			return ctrlNone, err
		}
		isc.vars["loop"] = &loopContext{items: items, index: i}
		c, err := r.exec(n.body, isc)
		if err != nil {
			return ctrlNone, err
		}
		if c == ctrlBreak {
			break
		}
	}
	return ctrlNone, nil
}

func (r *renderer) assign(t target, v any, sc *scope) error {
	if t.attr != "" {
		ns, _ := sc.lookup(t.names[0])
		n, ok := ns.(*namespace)
		if !ok {
			return fmt.Errorf("%w: cannot assign attribute on non-namespace object '%s'", ErrType, t.names[0])
		}
		n.d.set(t.attr, v)
		return nil
	}
	if !t.tuple {
		sc.vars[t.names[0]] = v
		return nil
	}
	items, err := iterate(v)
	if err != nil {
		return err
	}
	if len(items) != len(t.names) {
		return fmt.Errorf("%w: cannot unpack %d values into %d names", ErrType, len(items), len(t.names))
	}
	for i, name := range t.names {
		sc.vars[name] = items[i]
	}
	return nil
}

func (r *renderer) macro(n *macroNode, def *scope) *function {
	return &function{name: n.name, call: func(r *renderer, args []any, kw []kwarg) (any, error) {
		if len(args) > len(n.params) {
			return nil, fmt.Errorf("%w: macro '%s' takes not more than %d argument(s)", ErrType, n.name, len(n.params))
		}
		r.depth++
		defer func() { r.depth-- }()
		if r.depth > maxCallDepth {
			return nil, fmt.Errorf("%w: macro calls nested deeper than %d", ErrLimit, maxCallDepth)
		}
		sc := newScope(def)
		for i, a := range args {
			sc.vars[n.params[i]] = a
		}
		for _, k := range kw {
			i := indexOf(n.params, k.name)
			if i < 0 {
				return nil, fmt.Errorf("%w: macro '%s' has no argument '%s'", ErrType, n.name, k.name)
			}
			if i < len(args) {
				return nil, fmt.Errorf("%w: macro '%s' got multiple values for argument '%s'", ErrType, n.name, k.name)
			}
			sc.vars[k.name] = k.val
		}
		for i, p := range n.params {
			if _, ok := sc.vars[p]; ok {
				continue
			}
			if n.defaults[i] == nil {
				sc.vars[p] = undefName(p)
				continue
			}
			v, err := r.eval(n.defaults[i], sc)
			if err != nil {
				return nil, err
			}
			sc.vars[p] = v
		}
		return r.capture(n.body, sc)
	}}
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

func (r *renderer) eval(e expr, sc *scope) (any, error) {
	if err := r.step(); err != nil {
		return nil, r.wrap(e.exprPos(), err)
	}
	v, err := r.eval1(e, sc)
	if err != nil {
		return nil, r.wrap(e.exprPos(), err)
	}
	return v, nil
}

func (r *renderer) evalAll(xs []expr, sc *scope) ([]any, error) {
	out := make([]any, len(xs))
	for i, x := range xs {
		v, err := r.eval(x, sc)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *renderer) evalKwargs(kws []kwExpr, sc *scope) ([]kwarg, error) {
	if len(kws) == 0 {
		return nil, nil
	}
	out := make([]kwarg, len(kws))
	for i, k := range kws {
		v, err := r.eval(k.x, sc)
		if err != nil {
			return nil, err
		}
		out[i] = kwarg{name: k.name, val: v}
	}
	return out, nil
}

func (r *renderer) eval1(e expr, sc *scope) (any, error) {
	switch e := e.(type) {
	case *literal:
		return e.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(e.name); ok {
			return v, nil
		}
		return undefName(e.name), nil
	case *attrExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, e.name)
	case *itemExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		key, err := r.eval(e.key, sc)
		if err != nil {
			return nil, err
		}
		return getItem(obj, key)
	case *sliceExpr:
		return r.evalSlice(e, sc)
	case *callExpr:
		fn, err := r.eval(e.fn, sc)
		if err != nil {
			return nil, err
		}
		args, err := r.evalAll(e.args, sc)
		if err != nil {
			return nil, err
		}
		kw, err := r.evalKwargs(e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		return r.call(fn, args, kw)
	case *filterExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		return r.callFilter(e, x, sc)
	case *testExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		args, err := r.evalAll(e.args, sc)
		if err != nil {
			return nil, err
		}
		ok, err := e.fn(r, x, args)
		if err != nil {
			return nil, err
		}
		return ok != e.negate, nil
	case *unaryExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		return unary(e.op, x)
	case *binExpr:
		return r.evalBinary(e, sc)
	case *compareExpr:
		l, err := r.eval(e.first, sc)
		if err != nil {
			return nil, err
		}
		for i, op := range e.ops {
			rv, err := r.eval(e.rest[i], sc)
			if err != nil {
				return nil, err
			}
			ok, err := compareOp(op, l, rv)
			if err != nil {
				return nil, r.wrap(e.rest[i].exprPos(), err)
			}
			if !ok {
				return false, nil
			}
			l = rv
		}
		return true, nil
	case *condExpr:
		t, err := r.eval(e.test, sc)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return r.eval(e.then, sc)
		}
		if e.els == nil {
			return &undefined{hint: "the inline if-expression evaluated to false and no else section was defined"}, nil
		}
		return r.eval(e.els, sc)
	case *listExpr:
		return r.evalAll(e.items, sc)
	case *tupleExpr:
		items, err := r.evalAll(e.items, sc)
		return tuple(items), err
	case *dictExpr:
		d := newDict(len(e.keys))
		for i := range e.keys {
			k, err := r.eval(e.keys[i], sc)
			if err != nil {
				return nil, err
			}
			if !hashable(k) {
				return nil, fmt.Errorf("%w: unhashable type: '%s'", ErrType, typeName(k))
			}
			v, err := r.eval(e.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.set(dictKey(k), v)
		}
		return d, nil
	}
	panic(fmt.Sprintf("chat: unknown expression %T", e)) // programmer error: the parser made it
}

func (r *renderer) callFilter(f *filterExpr, x any, sc *scope) (any, error) {
	args, err := r.evalAll(f.args, sc)
	if err != nil {
		return nil, err
	}
	kw, err := r.evalKwargs(f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	return f.fn(r, x, args, kw)
}

func (r *renderer) call(fn any, args []any, kw []kwarg) (any, error) {
	switch f := fn.(type) {
	case *function:
		return f.call(r, args, kw)
	case *undefined:
		return nil, f.err()
	}
	return nil, fmt.Errorf("%w: '%s' object is not callable", ErrType, typeName(fn))
}

func (r *renderer) evalBinary(e *binExpr, sc *scope) (any, error) {
	l, err := r.eval(e.l, sc)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(e.r, sc)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(e.r, sc)
	}
	rv, err := r.eval(e.r, sc)
	if err != nil {
		return nil, err
	}
	if e.op == "~" {
		s := str(l) + str(rv)
		if len(s) > maxOutput {
			return nil, fmt.Errorf("%w: string over %d bytes", ErrLimit, maxOutput)
		}
		return s, nil
	}
	return arith(e.op, l, rv)
}

func (r *renderer) evalSlice(e *sliceExpr, sc *scope) (any, error) {
	obj, err := r.eval(e.obj, sc)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, x := range []expr{e.lo, e.hi, e.step} {
		if x == nil {
			continue
		}
		v, err := r.eval(x, sc)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if u, ok := v.(*undefined); ok {
			return nil, u.err()
		}
		n, ok := asInt(v)
		if !ok {
			return nil, fmt.Errorf("%w: slice indices must be integers or None, not %s", ErrType, typeName(v))
		}
		bounds[i] = &n
	}
	return slice(obj, bounds[0], bounds[1], bounds[2])
}

// slice is Python's obj[lo:hi:step] for lists, tuples and strings.
func slice(obj any, lo, hi, step *int64) (any, error) {
	var items []any
	switch o := obj.(type) {
	case []any:
		items = o
	case tuple:
		items = o
	case string:
		items = chars(o)
	case *undefined:
		return nil, o.err()
	default:
		return nil, fmt.Errorf("%w: '%s' object is not subscriptable", ErrType, typeName(obj))
	}
	st := int64(1)
	if step != nil {
		st = *step
	}
	if st == 0 {
		return nil, fmt.Errorf("%w: slice step cannot be zero", ErrType)
	}
	n := int64(len(items))
	adjust := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += n
			if v < 0 {
				if st < 0 {
					return -1
				}
				return 0
			}
		} else if v >= n {
			if st < 0 {
				return n - 1
			}
			return n
		}
		return v
	}
	var start, stop int64
	if st > 0 {
		start, stop = adjust(lo, 0), adjust(hi, n)
	} else {
		start, stop = adjust(lo, n-1), adjust(hi, -1)
	}
	var out []any
	for i := start; (st > 0 && i < stop) || (st < 0 && i > stop); i += st {
		out = append(out, items[i])
	}
	switch obj.(type) {
	case string:
		var b strings.Builder
		for _, c := range out {
			b.WriteString(c.(string))
		}
		return b.String(), nil
	case tuple:
		return tuple(out), nil
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

func unary(op string, x any) (any, error) {
	if op == "not" {
		return !truthy(x), nil
	}
	if u, ok := x.(*undefined); ok {
		return nil, u.err()
	}
	switch v := x.(type) {
	case bool, int64:
		i, _ := asInt(v)
		if op == "-" {
			return -i, nil
		}
		return i, nil
	case float64:
		if op == "-" {
			return -v, nil
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w: bad operand type for unary %s: '%s'", ErrType, op, typeName(x))
}

func compareOp(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	c, err := compare(l, r)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c == -1, nil
	case "<=":
		return c == -1 || c == 0, nil
	case ">":
		return c == 1, nil
	case ">=":
		return c == 1 || c == 0, nil
	}
	return false, nil
}

// contains is Python's item in container.
func contains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			if u, isU := item.(*undefined); isU {
				return false, u.err()
			}
			return false, fmt.Errorf("%w: 'in <string>' requires string as left operand, not %s", ErrType, typeName(item))
		}
		return strings.Contains(c, s), nil
	case []any:
		return containsSeq(c, item), nil
	case tuple:
		return containsSeq(c, item), nil
	case *dict:
		if !hashable(item) {
			if _, isU := item.(*undefined); isU {
				return false, nil
			}
			return false, fmt.Errorf("%w: unhashable type: '%s'", ErrType, typeName(item))
		}
		_, ok := c.get(item)
		return ok, nil
	case *undefined:
		return false, nil
	case *loopContext:
		return containsSeq(c.items, item), nil
	}
	return false, fmt.Errorf("%w: argument of type '%s' is not iterable", ErrType, typeName(container))
}

func containsSeq(items []any, x any) bool {
	for _, it := range items {
		if equal(it, x) {
			return true
		}
	}
	return false
}

func arith(op string, l, r any) (any, error) {
	if u, ok := l.(*undefined); ok {
		return nil, u.err()
	}
	if u, ok := r.(*undefined); ok {
		return nil, u.err()
	}
	li, lInt := asInt(l)
	ri, rInt := asInt(r)
	lf, lNum := toFloatExact(l)
	rf, rNum := toFloatExact(r)
	switch op {
	case "+":
		switch {
		case lInt && rInt:
			sum := li + ri
			if (li >= 0) == (ri >= 0) && (sum >= 0) != (li >= 0) {
				return nil, errOverflow
			}
			return sum, nil
		case lNum && rNum:
			return lf + rf, nil
		}
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				if len(a)+len(b) > maxOutput {
					return nil, fmt.Errorf("%w: string over %d bytes", ErrLimit, maxOutput)
				}
				return a + b, nil
			}
		case []any:
			if b, ok := r.([]any); ok {
				if err := itemLimit(len(a)+len(b), 1); err != nil {
					return nil, err
				}
				return append(append(make([]any, 0, len(a)+len(b)), a...), b...), nil
			}
		case tuple:
			if b, ok := r.(tuple); ok {
				if err := itemLimit(len(a)+len(b), 1); err != nil {
					return nil, err
				}
				return append(append(make(tuple, 0, len(a)+len(b)), a...), b...), nil
			}
		}
	case "-":
		switch {
		case lInt && rInt:
			d := li - ri
			if (li >= 0) != (ri >= 0) && (d >= 0) != (li >= 0) {
				return nil, errOverflow
			}
			return d, nil
		case lNum && rNum:
			return lf - rf, nil
		}
	case "*":
		switch {
		case lInt && rInt:
			return mulInt(li, ri)
		case lNum && rNum:
			return lf * rf, nil
		case rInt:
			return repeat(l, ri)
		case lInt:
			return repeat(r, li)
		}
	case "/":
		if lNum && rNum {
			if rf == 0 {
				return nil, fmt.Errorf("%w: division by zero", ErrType)
			}
			return lf / rf, nil
		}
	case "//":
		switch {
		case lInt && rInt:
			if ri == 0 {
				return nil, fmt.Errorf("%w: integer division or modulo by zero", ErrType)
			}
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		case lNum && rNum:
			if rf == 0 {
				return nil, fmt.Errorf("%w: float floor division by zero", ErrType)
			}
			return math.Floor(lf / rf), nil
		}
	case "%":
		switch {
		case lInt && rInt:
			if ri == 0 {
				return nil, fmt.Errorf("%w: integer division or modulo by zero", ErrType)
			}
			m := li % ri
			if m != 0 && ((m < 0) != (ri < 0)) {
				m += ri
			}
			return m, nil
		case lNum && rNum:
			if rf == 0 {
				return nil, fmt.Errorf("%w: float modulo", ErrType)
			}
			m := math.Mod(lf, rf)
			if m != 0 && ((m < 0) != (rf < 0)) {
				m += rf
			}
			return m, nil
		}
		if _, ok := l.(string); ok {
			return nil, &UnsupportedError{Feature: "printf-style string formatting with %"}
		}
	case "**":
		switch {
		case lInt && rInt && ri >= 0:
			return intPow(li, ri)
		case lNum && rNum:
			if lf == 0 && rf < 0 {
				return nil, fmt.Errorf("%w: 0.0 cannot be raised to a negative power", ErrType)
			}
			return math.Pow(lf, rf), nil
		}
	}
	return nil, fmt.Errorf("%w: unsupported operand type(s) for %s: '%s' and '%s'", ErrType, op, typeName(l), typeName(r))
}

// errOverflow reports integer arithmetic past int64: Python's integers are
// unbounded, and a wrapped result would be silently wrong.
var errOverflow = fmt.Errorf("%w: integer overflow", ErrLimit)

func mulInt(a, b int64) (int64, error) {
	if a == 0 || b == 0 {
		return 0, nil
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, errOverflow
	}
	return p, nil
}

func intPow(b, e int64) (int64, error) {
	switch b {
	case 0:
		if e == 0 {
			return 1, nil
		}
		return 0, nil
	case 1:
		return 1, nil
	case -1:
		if e%2 == 0 {
			return 1, nil
		}
		return -1, nil
	}
	out := int64(1)
	for ; e > 0; e-- { // |b| >= 2 overflows within 63 steps
		var err error
		if out, err = mulInt(out, b); err != nil {
			return 0, err
		}
	}
	return out, nil
}

// repeat is Python's sequence * n.
func repeat(seq any, n int64) (any, error) {
	if n < 0 {
		n = 0
	}
	switch s := seq.(type) {
	case string:
		if len(s) != 0 && n > int64(maxOutput/len(s)) {
			return nil, fmt.Errorf("%w: string over %d bytes", ErrLimit, maxOutput)
		}
		return strings.Repeat(s, int(n)), nil
	case []any:
		if err := itemLimit(len(s), n); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(s)*int(n))
		for range n {
			out = append(out, s...)
		}
		return out, nil
	case tuple:
		if err := itemLimit(len(s), n); err != nil {
			return nil, err
		}
		out := make(tuple, 0, len(s)*int(n))
		for range n {
			out = append(out, s...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: can't multiply sequence by non-int of type '%s'", ErrType, typeName(seq))
}

// itemLimit bounds lists built from n copies of l items.
func itemLimit(l int, n int64) error {
	if l != 0 && n > int64(maxRange/l) {
		return fmt.Errorf("%w: list over %d items", ErrLimit, maxRange)
	}
	return nil
}
