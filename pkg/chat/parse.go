package chat

import (
	"fmt"
	"slices"
)

// maxNesting bounds the nesting of expressions and blocks, so that a
// hostile template cannot exhaust the stack of the recursive descent.
const maxNesting = 200

// parser builds the AST with Jinja's grammar and operator precedence
// (jinja2/parser.py): or < and < not < comparisons < + - < ~ < * / // %
// < ** < unary - + < filters, tests and postfix.
type parser struct {
	src   string
	toks  []token
	i     int
	loops int // enclosing for loops, for break and continue
	depth int
}

// unsupportedTags are Jinja tags that chat templates do not need.
var unsupportedTags = []string{"extends", "block", "include", "import", "from", "with",
	"autoescape", "call", "do", "trans", "pluralize"}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tkEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	line, col := position(p.src, pos)
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) unsupported(pos int, feature string) error {
	line, col := position(p.src, pos)
	return &UnsupportedError{Line: line, Col: col, Feature: feature}
}

func describe(t token) string {
	switch t.kind {
	case tkName, tkOp:
		return fmt.Sprintf("'%s'", t.val)
	case tkInt, tkFloat:
		return t.val
	case tkString:
		return "string " + repr(t.val)
	}
	return t.kind.String()
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tkOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.peek()
	return t.kind == tkName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.i++
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.skipOp(op) {
		t := p.peek()
		return p.errAt(t.pos, "expected '%s', got %s", op, describe(t))
	}
	return nil
}

func (p *parser) expectKind(k tokKind) (token, error) {
	t := p.peek()
	if t.kind != k {
		return t, p.errAt(t.pos, "expected %s, got %s", k, describe(t))
	}
	return p.next(), nil
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > maxNesting {
		return p.errAt(pos, "template nested too deeply")
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) parseTemplate() ([]node, error) {
	body, end, err := p.subparse()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, p.errAt(p.toks[p.i-1].pos, "unexpected '%s'", end)
	}
	return body, nil
}

// subparse parses nodes until one of the block tags in ends, which it
// consumes and returns; at the end of the template it returns "".
func (p *parser) subparse(ends ...string) ([]node, string, error) {
	var body []node
	for {
		t := p.next()
		switch t.kind {
		case tkEOF:
			if len(ends) > 0 {
				return nil, "", p.errAt(t.pos, "unexpected end of template, expected '%s'", ends[len(ends)-1])
			}
			return body, "", nil
		case tkText:
			body = append(body, &textNode{pos: t.pos, text: t.val})
		case tkVarBegin:
			x, err := p.parseTuple(false)
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tkVarEnd); err != nil {
				return nil, "", err
			}
			body = append(body, &outputNode{pos: x.exprPos(), x: x})
		case tkBlockBegin:
			name, err := p.expectKind(tkName)
			if err != nil {
				return nil, "", err
			}
			if slices.Contains(ends, name.val) {
				return body, name.val, nil
			}
			n, err := p.parseStatement(name)
			if err != nil {
				return nil, "", err
			}
			body = append(body, n)
		default:
			return nil, "", p.errAt(t.pos, "unexpected %s", describe(t))
		}
	}
}

// endBlock expects the closing "%}" of a block tag.
func (p *parser) endBlock() error {
	_, err := p.expectKind(tkBlockEnd)
	return err
}

func (p *parser) parseStatement(name token) (node, error) {
	if err := p.enter(name.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch name.val {
	case "if":
		return p.parseIf(name.pos)
	case "for":
		return p.parseFor(name.pos)
	case "set":
		return p.parseSet(name.pos)
	case "macro":
		return p.parseMacro(name.pos)
	case "break", "continue":
		if p.loops == 0 {
			return nil, p.errAt(name.pos, "'%s' outside of a loop", name.val)
		}
		return &loopCtlNode{pos: name.pos, brk: name.val == "break"}, p.endBlock()
	case "filter":
		filters, err := p.parseFilterChain(nil, false)
		if err != nil {
			return nil, err
		}
		return p.parseBlockBody(name.pos, filters, "endfilter")
	case "generation":
		// transformers' AssistantTracker tag, which only marks the span of
		// assistant tokens; rendering is unaffected.
		return p.parseBlockBody(name.pos, nil, "endgeneration")
	}
	if slices.Contains(unsupportedTags, name.val) {
		return nil, p.unsupported(name.pos, fmt.Sprintf("{%% %s %%} tag", name.val))
	}
	return nil, p.errAt(name.pos, "unknown tag '%s'", name.val)
}

func (p *parser) parseBlockBody(pos int, filters []*filterExpr, end string) (node, error) {
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	body, _, err := p.subparse(end)
	if err != nil {
		return nil, err
	}
	return &blockNode{pos: pos, filters: filters, body: body}, p.endBlock()
}

func (p *parser) parseIf(pos int) (node, error) {
	n := &ifNode{pos: pos}
	for {
		cond, err := p.parseTuple(false)
		if err != nil {
			return nil, err
		}
		if err := p.endBlock(); err != nil {
			return nil, err
		}
		body, end, err := p.subparse("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.endBlock(); err != nil {
				return nil, err
			}
			if n.els, _, err = p.subparse("endif"); err != nil {
				return nil, err
			}
		}
		return n, p.endBlock()
	}
}

func (p *parser) parseFor(pos int) (node, error) {
	tgt, err := p.parseTarget(false)
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		t := p.peek()
		return nil, p.errAt(t.pos, "expected 'in', got %s", describe(t))
	}
	n := &forNode{pos: pos, target: tgt}
	if n.iter, err = p.parseTupleNoCond("recursive"); err != nil {
		return nil, err
	}
	if p.skipName("if") {
		if n.cond, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, p.unsupported(p.peek().pos, "recursive for loops")
	}
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	p.loops++
	body, end, err := p.subparse("endfor", "else")
	p.loops--
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.endBlock(); err != nil {
			return nil, err
		}
		if n.els, _, err = p.subparse("endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.endBlock()
}

// parseTarget parses an assignment target: a name, names separated by
// commas (optionally in parentheses) or, when nsAttr, ns.attr.
func (p *parser) parseTarget(nsAttr bool) (target, error) {
	var tgt target
	if nsAttr && p.peek().kind == tkName && p.toks[p.i+1].kind == tkOp && p.toks[p.i+1].val == "." {
		ns := p.next()
		p.next()
		attr, err := p.expectKind(tkName)
		if err != nil {
			return tgt, err
		}
		return target{names: []string{ns.val}, attr: attr.val}, nil
	}
	paren := p.skipOp("(")
	for {
		t, err := p.expectKind(tkName)
		if err != nil {
			return tgt, err
		}
		switch t.val {
		case "true", "false", "none", "True", "False", "None", "in":
			return tgt, p.errAt(t.pos, "cannot assign to '%s'", t.val)
		}
		tgt.names = append(tgt.names, t.val)
		if !p.skipOp(",") {
			break
		}
		tgt.tuple = true
		if p.isName("in") || p.isOp("=") || p.isOp(")") {
			break
		}
	}
	if paren {
		tgt.tuple = true
		if err := p.expectOp(")"); err != nil {
			return tgt, err
		}
	}
	return tgt, nil
}

func (p *parser) parseSet(pos int) (node, error) {
	tgt, err := p.parseTarget(true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		x, err := p.parseTuple(false)
		if err != nil {
			return nil, err
		}
		return &setNode{pos: pos, target: tgt, x: x}, p.endBlock()
	}
	if tgt.tuple || tgt.attr != "" {
		return nil, p.errAt(p.peek().pos, "expected '='")
	}
	filters, err := p.parseFilterChain(nil, true)
	if err != nil {
		return nil, err
	}
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	body, _, err := p.subparse("endset")
	if err != nil {
		return nil, err
	}
	return &setBlockNode{pos: pos, target: tgt, filters: filters, body: body}, p.endBlock()
}

func (p *parser) parseMacro(pos int) (node, error) {
	name, err := p.expectKind(tkName)
	if err != nil {
		return nil, err
	}
	n := &macroNode{pos: pos, name: name.val}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.skipOp(")") {
		if len(n.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.skipOp(")") {
				break
			}
		}
		param, err := p.expectKind(tkName)
		if err != nil {
			return nil, err
		}
		var def expr
		if p.skipOp("=") {
			if def, err = p.parseExpression(true); err != nil {
				return nil, err
			}
		} else if len(n.defaults) > 0 && n.defaults[len(n.defaults)-1] != nil {
			return nil, p.errAt(param.pos, "non-default argument follows default argument")
		}
		n.params = append(n.params, param.val)
		n.defaults = append(n.defaults, def)
	}
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	loops := p.loops
	p.loops = 0
	body, _, err := p.subparse("endmacro")
	p.loops = loops
	if err != nil {
		return nil, err
	}
	n.body = body
	return n, p.endBlock()
}

// isTupleEnd reports whether the current token ends a tuple.
func (p *parser) isTupleEnd(extra string) bool {
	t := p.peek()
	switch t.kind {
	case tkVarEnd, tkBlockEnd, tkEOF:
		return true
	case tkOp:
		return t.val == ")"
	case tkName:
		return extra != "" && t.val == extra
	}
	return false
}

// parseTuple parses expressions separated by commas; more than one, or a
// trailing comma, makes a tuple.
func (p *parser) parseTuple(explicitParens bool) (expr, error) {
	return p.parseTupleOpts(explicitParens, true, "")
}

func (p *parser) parseTupleNoCond(extraEnd string) (expr, error) {
	return p.parseTupleOpts(false, false, extraEnd)
}

func (p *parser) parseTupleOpts(explicitParens, withCond bool, extraEnd string) (expr, error) {
	pos := p.peek().pos
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if !p.skipOp(",") {
				break
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		x, err := p.parseExpression(withCond)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) == 1 {
			return items[0], nil
		}
		if !explicitParens {
			t := p.peek()
			return nil, p.errAt(t.pos, "expected an expression, got %s", describe(t))
		}
	}
	return &tupleExpr{pos: pos, items: items}, nil
}

func (p *parser) parseExpression(withCond bool) (expr, error) {
	t := p.peek()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	if withCond {
		return p.parseCondExpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondExpr() (expr, error) {
	pos := p.peek().pos
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els expr
		if p.skipName("else") {
			if els, err = p.parseCondExpr(); err != nil {
				return nil, err
			}
		}
		x = &condExpr{pos: pos, test: test, then: x, els: els}
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	for err == nil && p.isName("or") {
		pos := p.next().pos
		var r expr
		if r, err = p.parseAnd(); err == nil {
			l = &binExpr{pos: pos, op: "or", l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) parseAnd() (expr, error) {
	l, err := p.parseNot()
	for err == nil && p.isName("and") {
		pos := p.next().pos
		var r expr
		if r, err = p.parseNot(); err == nil {
			l = &binExpr{pos: pos, op: "and", l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: t.pos, op: "not", x: x}, nil
	}
	return p.parseCompare()
}

var compareOps = []string{"==", "!=", "<", "<=", ">", ">="}

func (p *parser) parseCompare() (expr, error) {
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{pos: first.exprPos(), first: first}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tkOp && slices.Contains(compareOps, t.val):
			op = t.val
			p.next()
		case p.isName("in"):
			op = "in"
			p.next()
		case p.isName("not") && p.toks[p.i+1].kind == tkName && p.toks[p.i+1].val == "in":
			op = "notin"
			p.i += 2
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (p *parser) parseBinary(ops []string, operand func() (expr, error)) (expr, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tkOp || !slices.Contains(ops, t.val) {
			return l, nil
		}
		p.next()
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = &binExpr{pos: t.pos, op: t.val, l: l, r: r}
	}
}

func (p *parser) parseMath1() (expr, error) {
	return p.parseBinary([]string{"+", "-"}, p.parseConcat)
}

func (p *parser) parseConcat() (expr, error) {
	return p.parseBinary([]string{"~"}, p.parseMath2)
}

func (p *parser) parseMath2() (expr, error) {
	return p.parseBinary([]string{"*", "/", "//", "%"}, p.parsePow)
}

func (p *parser) parsePow() (expr, error) {
	return p.parseBinary([]string{"**"}, func() (expr, error) { return p.parseUnary(true) })
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	t := p.peek()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	var x expr
	var err error
	if t.kind == tkOp && (t.val == "-" || t.val == "+") {
		p.next()
		var operand expr
		if operand, err = p.parseUnary(false); err != nil {
			return nil, err
		}
		x = &unaryExpr{pos: t.pos, op: t.val, x: operand}
	} else if x, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExprs(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tkName:
		switch t.val {
		case "true", "True":
			return &literal{pos: t.pos, v: true}, nil
		case "false", "False":
			return &literal{pos: t.pos, v: false}, nil
		case "none", "None":
			return &literal{pos: t.pos, v: nil}, nil
		}
		return &nameExpr{pos: t.pos, name: t.val}, nil
	case tkString:
		s := t.val
		for p.peek().kind == tkString { // adjacent literals concatenate
			s += p.next().val
		}
		return &literal{pos: t.pos, v: s}, nil
	case tkInt:
		return &literal{pos: t.pos, v: t.i}, nil
	case tkFloat:
		return &literal{pos: t.pos, v: t.f}, nil
	case tkOp:
		switch t.val {
		case "(":
			x, err := p.parseTuple(true)
			if err != nil {
				return nil, err
			}
			return x, p.expectOp(")")
		case "[":
			items, err := p.parseItems("]")
			return &listExpr{pos: t.pos, items: items}, err
		case "{":
			return p.parseDict(t.pos)
		}
	}
	return nil, p.errAt(t.pos, "unexpected %s", describe(t))
}

// parseItems parses comma-separated expressions up to close, allowing a
// trailing comma.
func (p *parser) parseItems(close string) ([]expr, error) {
	var items []expr
	for !p.skipOp(close) {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.skipOp(close) {
				break
			}
		}
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	return items, nil
}

func (p *parser) parseDict(pos int) (expr, error) {
	d := &dictExpr{pos: pos}
	for !p.skipOp("}") {
		if len(d.keys) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.skipOp("}") {
				break
			}
		}
		k, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
	}
	return d, nil
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		t := p.peek()
		if t.kind != tkOp {
			return x, nil
		}
		var err error
		switch t.val {
		case ".":
			p.next()
			a := p.next()
			switch a.kind {
			case tkName:
				x = &attrExpr{pos: a.pos, obj: x, name: a.val}
			case tkInt:
				x = &itemExpr{pos: a.pos, obj: x, key: &literal{pos: a.pos, v: a.i}}
			default:
				return nil, p.errAt(a.pos, "expected an attribute name, got %s", describe(a))
			}
		case "[":
			p.next()
			if x, err = p.parseSubscript(t.pos, x); err != nil {
				return nil, err
			}
		case "(":
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}

func (p *parser) parseSubscript(pos int, obj expr) (expr, error) {
	var parts [3]expr
	n := 0 // colons seen
	for {
		if p.isOp(":") {
			if n == 2 {
				return nil, p.errAt(p.peek().pos, "too many ':' in slice")
			}
			p.next()
			n++
			continue
		}
		if p.isOp("]") {
			break
		}
		if parts[n] != nil {
			t := p.peek()
			return nil, p.errAt(t.pos, "expected ']', got %s", describe(t))
		}
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[n] = x
	}
	p.next()
	if n == 0 {
		if parts[0] == nil {
			return nil, p.errAt(pos, "empty subscript")
		}
		return &itemExpr{pos: pos, obj: obj, key: parts[0]}, nil
	}
	return &sliceExpr{pos: pos, obj: obj, lo: parts[0], hi: parts[1], step: parts[2]}, nil
}

// parseArgs parses "(args, name=kwargs)".
func (p *parser) parseArgs() ([]expr, []kwExpr, error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwExpr
	for !p.skipOp(")") {
		if len(args)+len(kwargs) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.skipOp(")") {
				break
			}
		}
		t := p.peek()
		if p.isOp("*") || p.isOp("**") {
			return nil, nil, p.unsupported(t.pos, "*args and **kwargs in calls")
		}
		if t.kind == tkName && p.toks[p.i+1].kind == tkOp && p.toks[p.i+1].val == "=" {
			p.i += 2
			x, err := p.parseExpression(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwExpr{name: t.val, x: x})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, p.errAt(t.pos, "positional argument follows keyword argument")
		}
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, x)
	}
	return args, kwargs, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	pos := fn.exprPos()
	args, kwargs, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos: pos, fn: fn, args: args, kwargs: kwargs}, nil
}

// parseDottedName parses a filter or test name, which may be dotted.
func (p *parser) parseDottedName() (token, error) {
	t, err := p.expectKind(tkName)
	if err != nil {
		return t, err
	}
	for p.isOp(".") && p.toks[p.i+1].kind == tkName {
		p.next()
		t.val += "." + p.next().val
	}
	return t, nil
}

// parseFilterChain parses "| f(args) | g" applied to x. Filter blocks
// ({% filter f | g %}, x nil) start without a pipe; set blocks
// ({% set v | f %}, x nil) may have no filters at all.
func (p *parser) parseFilterChain(x expr, leadingPipe bool) ([]*filterExpr, error) {
	var out []*filterExpr
	for {
		if len(out) > 0 || leadingPipe {
			if !p.skipOp("|") {
				return out, nil
			}
		}
		name, err := p.parseDottedName()
		if err != nil {
			return nil, err
		}
		fn := lookupFilter(name.val)
		if fn == nil {
			return nil, p.unsupported(name.pos, fmt.Sprintf("filter '%s'", name.val))
		}
		f := &filterExpr{pos: name.pos, x: x, name: name.val, fn: fn}
		if p.isOp("(") {
			if f.args, f.kwargs, err = p.parseArgs(); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
		if x != nil {
			x = f
		}
	}
}

// parseFilterExprs parses the filters, tests and calls that follow x.
func (p *parser) parseFilterExprs(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			fs, err := p.parseFilterChain(x, true)
			if err != nil {
				return nil, err
			}
			x = fs[len(fs)-1]
		case p.isName("is"):
			var err error
			if x, err = p.parseTest(x); err != nil {
				return nil, err
			}
		case p.isOp("("):
			var err error
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}

func (p *parser) parseTest(x expr) (expr, error) {
	p.next() // is
	negate := p.skipName("not")
	name, err := p.parseDottedName()
	if err != nil {
		return nil, err
	}
	fn := lookupTest(name.val)
	if fn == nil {
		return nil, p.unsupported(name.pos, fmt.Sprintf("test '%s'", name.val))
	}
	te := &testExpr{pos: name.pos, x: x, name: name.val, fn: fn, negate: negate}
	t := p.peek()
	switch {
	case p.isOp("("):
		var kw []kwExpr
		if te.args, kw, err = p.parseArgs(); err != nil {
			return nil, err
		}
		if len(kw) > 0 {
			return nil, p.unsupported(t.pos, "keyword arguments to tests")
		}
	case t.kind == tkString || t.kind == tkInt || t.kind == tkFloat ||
		t.kind == tkOp && (t.val == "[" || t.val == "{") ||
		t.kind == tkName && t.val != "else" && t.val != "or" && t.val != "and" && t.val != "is" &&
			t.val != "if" && t.val != "in" && t.val != "not":
		// One argument without parentheses: "x is divisibleby 3".
		arg, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if arg, err = p.parsePostfix(arg); err != nil {
			return nil, err
		}
		te.args = []expr{arg}
	}
	return te, nil
}
