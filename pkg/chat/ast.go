package chat

// Statements. Every node records the byte offset of its tag or expression
// in the normalized source, for error positions.
type node interface{ nodePos() int }

type textNode struct {
	pos  int
	text string
}

type outputNode struct {
	pos int
	x   expr
}

type ifNode struct {
	pos    int
	conds  []expr
	bodies [][]node
	els    []node
}

type forNode struct {
	pos    int
	target target
	iter   expr
	cond   expr // the "if" filter of {% for x in xs if cond %}, or nil
	body   []node
	els    []node
}

type setNode struct {
	pos    int
	target target
	x      expr
}

// setBlockNode is {% set x | filters %}body{% endset %}.
type setBlockNode struct {
	pos     int
	target  target
	filters []*filterExpr
	body    []node
}

type macroNode struct {
	pos      int
	name     string
	params   []string
	defaults []expr // one per param; nil where the param has no default
	body     []node
}

type loopCtlNode struct {
	pos int
	brk bool // break, else continue
}

// blockNode renders its body through filters: {% filter f %} blocks and
// transformers' {% generation %} blocks (which have no filters).
type blockNode struct {
	pos     int
	filters []*filterExpr
	body    []node
}

func (n *textNode) nodePos() int     { return n.pos }
func (n *outputNode) nodePos() int   { return n.pos }
func (n *ifNode) nodePos() int       { return n.pos }
func (n *forNode) nodePos() int      { return n.pos }
func (n *setNode) nodePos() int      { return n.pos }
func (n *setBlockNode) nodePos() int { return n.pos }
func (n *macroNode) nodePos() int    { return n.pos }
func (n *loopCtlNode) nodePos() int  { return n.pos }
func (n *blockNode) nodePos() int    { return n.pos }

// target is the left side of an assignment or a for loop: one name, a
// tuple of names, or a namespace attribute (ns.attr).
type target struct {
	names []string
	tuple bool
	attr  string // set for ns.attr, with names[0] the namespace
}

// Expressions.
type expr interface{ exprPos() int }

type literal struct {
	pos int
	v   any
}

type nameExpr struct {
	pos  int
	name string
}

type attrExpr struct {
	pos  int
	obj  expr
	name string
}

type itemExpr struct {
	pos      int
	obj, key expr
}

type sliceExpr struct {
	pos               int
	obj, lo, hi, step expr // lo, hi and step may be nil
}

type kwExpr struct {
	name string
	x    expr
}

type callExpr struct {
	pos    int
	fn     expr
	args   []expr
	kwargs []kwExpr
}

type filterExpr struct {
	pos    int
	x      expr // nil in {% filter %} and {% set %} blocks
	name   string
	fn     filterFunc
	args   []expr
	kwargs []kwExpr
}

type testExpr struct {
	pos    int
	x      expr
	name   string
	fn     testFunc
	args   []expr
	negate bool
}

type unaryExpr struct {
	pos int
	op  string // "not", "-" or "+"
	x   expr
}

type binExpr struct {
	pos  int
	op   string // and or + - * / // % ** ~
	l, r expr
}

type compareExpr struct {
	pos   int
	first expr
	ops   []string // == != < <= > >= in notin
	rest  []expr
}

type condExpr struct {
	pos             int
	test, then, els expr // els may be nil
}

type listExpr struct {
	pos   int
	items []expr
}

type tupleExpr struct {
	pos   int
	items []expr
}

type dictExpr struct {
	pos        int
	keys, vals []expr
}

func (e *literal) exprPos() int     { return e.pos }
func (e *nameExpr) exprPos() int    { return e.pos }
func (e *attrExpr) exprPos() int    { return e.pos }
func (e *itemExpr) exprPos() int    { return e.pos }
func (e *sliceExpr) exprPos() int   { return e.pos }
func (e *callExpr) exprPos() int    { return e.pos }
func (e *filterExpr) exprPos() int  { return e.pos }
func (e *testExpr) exprPos() int    { return e.pos }
func (e *unaryExpr) exprPos() int   { return e.pos }
func (e *binExpr) exprPos() int     { return e.pos }
func (e *compareExpr) exprPos() int { return e.pos }
func (e *condExpr) exprPos() int    { return e.pos }
func (e *listExpr) exprPos() int    { return e.pos }
func (e *tupleExpr) exprPos() int   { return e.pos }
func (e *dictExpr) exprPos() int    { return e.pos }
