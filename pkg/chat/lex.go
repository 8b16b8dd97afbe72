package chat

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tkText tokKind = iota
	tkVarBegin
	tkVarEnd
	tkBlockBegin
	tkBlockEnd
	tkName
	tkInt
	tkFloat
	tkString
	tkOp
	tkEOF
)

var kindNames = [...]string{"text", "'{{'", "'}}'", "'{%'", "'%}'", "name", "integer", "float", "string", "operator", "end of template"}

func (k tokKind) String() string { return kindNames[k] }

type token struct {
	kind tokKind
	val  string // text, name, operator or decoded string literal
	pos  int    // byte offset in the normalized source
	i    int64
	f    float64
}

// operators, longest first so that "//" wins over "/".
var operators = []string{"**", "//", "==", "!=", ">=", "<=",
	"+", "-", "*", "/", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

// lexer splits a template into text and tag tokens, applying Jinja's
// whitespace control with the settings transformers uses: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off.
type lexer struct {
	src  string
	pos  int
	toks []token
	// lineStart tells whether the last consumed source text ended a line,
	// which lets lstrip_blocks strip text that holds no newline.
	lineStart bool
	// stripNext asks to drop the leading whitespace of the next text, after
	// a "-" closing delimiter.
	stripNext bool
}

func lex(src string) ([]token, error) {
	lx := &lexer{src: src, lineStart: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{kind: tkEOF, pos: len(src)})
	return lx.toks, nil
}

func (lx *lexer) syntaxErr(off int, msg string) error {
	line, col := position(lx.src, off)
	return &SyntaxError{Line: line, Col: col, Msg: msg}
}

// nextTag finds the next "{{", "{%" or "{#" at or after from.
func (lx *lexer) nextTag(from int) int {
	for i := from; ; {
		j := strings.IndexByte(lx.src[i:], '{')
		if j < 0 || i+j+1 >= len(lx.src) {
			return -1
		}
		i += j
		switch lx.src[i+1] {
		case '{', '%', '#':
			return i
		}
		i++
	}
}

func (lx *lexer) run() error {
	for lx.pos < len(lx.src) {
		start := lx.nextTag(lx.pos)
		if start < 0 {
			lx.emitText(lx.src[lx.pos:], lx.pos)
			return nil
		}
		text := lx.src[lx.pos:start]
		kind := lx.src[start+1]
		sign := byte(0)
		if start+2 < len(lx.src) && (lx.src[start+2] == '-' || lx.src[start+2] == '+') {
			sign = lx.src[start+2]
		}
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, isPySpace)
		case sign != '+' && kind != '{':
			text = lx.lstrip(text)
		}
		lx.emitText(text, lx.pos)
		lx.pos = start + 2
		if sign != 0 {
			lx.pos++
		}
		var err error
		switch kind {
		case '#':
			err = lx.comment(start)
		case '{':
			lx.toks = append(lx.toks, token{kind: tkVarBegin, pos: start})
			err = lx.inside(start, '}')
		case '%':
			if lx.isRaw() {
				err = lx.raw(start)
			} else {
				lx.toks = append(lx.toks, token{kind: tkBlockBegin, pos: start})
				err = lx.inside(start, '%')
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lstrip applies lstrip_blocks: whitespace between the start of a line and
// a block or comment tag is dropped.
func (lx *lexer) lstrip(text string) string {
	l := strings.LastIndexByte(text, '\n') + 1
	if l == 0 && !lx.lineStart {
		return text
	}
	tail := text[l:]
	if tail != "" && strings.TrimLeftFunc(tail, isPySpace) == "" {
		return text[:l]
	}
	return text
}

func (lx *lexer) emitText(text string, pos int) {
	if lx.stripNext {
		n := len(text)
		text = strings.TrimLeftFunc(text, isPySpace)
		pos += n - len(text)
		lx.stripNext = false
	}
	if text != "" {
		lx.toks = append(lx.toks, token{kind: tkText, val: text, pos: pos})
	}
}

// closeTag consumes what follows a closing delimiter whose sign is s ('-',
// '+' or 0); trim removes one newline (trim_blocks).
func (lx *lexer) closeTag(s byte, trim bool) {
	switch {
	case s == '-':
		lx.stripNext = true
		lx.lineStart = false
		// The consumed whitespace decides lineStart, as in Jinja.
		rest := lx.src[lx.pos:]
		ws := len(rest) - len(strings.TrimLeftFunc(rest, isPySpace))
		if ws > 0 && rest[ws-1] == '\n' {
			lx.lineStart = true
		}
	case s == 0 && trim && strings.HasPrefix(lx.src[lx.pos:], "\n"):
		lx.pos++
		lx.lineStart = true
	default:
		lx.lineStart = false
	}
}

func (lx *lexer) comment(start int) error {
	end := strings.Index(lx.src[lx.pos:], "#}")
	if end < 0 {
		return lx.syntaxErr(start, "missing end of comment tag")
	}
	end += lx.pos
	s := byte(0)
	if end > lx.pos && (lx.src[end-1] == '-' || lx.src[end-1] == '+') {
		s = lx.src[end-1]
	}
	lx.pos = end + 2
	lx.closeTag(s, true)
	return nil
}

// isRaw reports whether the block tag at lx.pos is {% raw %}.
func (lx *lexer) isRaw() bool {
	rest := strings.TrimLeftFunc(lx.src[lx.pos:], isPySpace)
	if !strings.HasPrefix(rest, "raw") {
		return false
	}
	rest = strings.TrimLeftFunc(rest[3:], isPySpace)
	return strings.HasPrefix(rest, "%}") || strings.HasPrefix(rest, "-%}")
}

// raw emits the body of {% raw %}...{% endraw %} as text.
func (lx *lexer) raw(start int) error {
	i := lx.pos + strings.Index(lx.src[lx.pos:], "%}")
	s := byte(0)
	if lx.src[i-1] == '-' {
		s = '-'
	}
	lx.pos = i + 2
	lx.closeTag(s, false) // Jinja does not apply trim_blocks to {% raw %}
	for from := lx.pos; ; {
		j := strings.Index(lx.src[from:], "{%")
		if j < 0 {
			return lx.syntaxErr(start, "missing {% endraw %}")
		}
		j += from
		k := j + 2
		sign := byte(0)
		if k < len(lx.src) && (lx.src[k] == '-' || lx.src[k] == '+') {
			sign = lx.src[k]
			k++
		}
		rest := strings.TrimLeftFunc(lx.src[k:], isPySpace)
		if !strings.HasPrefix(rest, "endraw") {
			from = j + 2
			continue
		}
		k = len(lx.src) - len(rest) + len("endraw")
		rest = strings.TrimLeftFunc(lx.src[k:], isPySpace)
		endSign := byte(0)
		if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			endSign = rest[0]
			rest = rest[1:]
		}
		if !strings.HasPrefix(rest, "%}") {
			from = j + 2
			continue
		}
		text := lx.src[lx.pos:j]
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, isPySpace)
		case sign != '+':
			text = lx.lstrip(text)
		}
		lx.emitText(text, lx.pos)
		lx.pos = len(lx.src) - len(rest) + 2
		lx.closeTag(endSign, true)
		return nil
	}
}

// inside lexes the expression tokens of a tag up to its closing delimiter
// ("}}" when closer is '}', "%}" when it is '%').
func (lx *lexer) inside(start int, closer byte) error {
	depth := 0
	for {
		for lx.pos < len(lx.src) {
			r, n := utf8.DecodeRuneInString(lx.src[lx.pos:])
			if !isPySpace(r) {
				break
			}
			lx.pos += n
		}
		if lx.pos >= len(lx.src) {
			return lx.syntaxErr(start, "unexpected end of template: tag was never closed")
		}
		rest := lx.src[lx.pos:]
		if depth == 0 {
			end := string(closer) + "}"
			s := byte(0)
			switch {
			case strings.HasPrefix(rest, "-"+end):
				s = '-'
			case closer == '%' && strings.HasPrefix(rest, "+"+end):
				s = '+'
			case strings.HasPrefix(rest, end):
			default:
				goto token
			}
			kind := tkVarEnd
			if closer == '%' {
				kind = tkBlockEnd
			}
			lx.toks = append(lx.toks, token{kind: kind, pos: lx.pos})
			lx.pos += len(end)
			if s != 0 {
				lx.pos++
			}
			lx.closeTag(s, closer == '%')
			return nil
		}
	token:
		c := rest[0]
		switch {
		case c == '_' || c < utf8.RuneSelf && unicode.IsLetter(rune(c)):
			n := 1
			for n < len(rest) && (rest[n] == '_' || isASCIIAlnum(rest[n])) {
				n++
			}
			lx.toks = append(lx.toks, token{kind: tkName, val: rest[:n], pos: lx.pos})
			lx.pos += n
		case c >= '0' && c <= '9':
			if err := lx.number(); err != nil {
				return err
			}
		case c == '\'' || c == '"':
			if err := lx.string(); err != nil {
				return err
			}
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(rest, o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(rest)
				return lx.syntaxErr(lx.pos, "unexpected character "+strconv.QuoteRune(r))
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				if depth > 0 {
					depth--
				}
			}
			lx.toks = append(lx.toks, token{kind: tkOp, val: op, pos: lx.pos})
			lx.pos += len(op)
		}
	}
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isPySpace is Python's str.isspace for one character, which is what the
// \s of Jinja's lexer matches.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}

// number lexes an integer or float literal: 42, 1_000, 0x1f, 0o17, 0b101,
// 1.5, 1e3, 2.5e-3.
func (lx *lexer) number() error {
	rest := lx.src[lx.pos:]
	digitsFrom := func(s string, ok func(byte) bool) int {
		n := 0
		for n < len(s) && (ok(s[n]) || s[n] == '_' && n+1 < len(s) && ok(s[n+1]) && n > 0) {
			n++
		}
		return n
	}
	isDec := func(c byte) bool { return c >= '0' && c <= '9' }
	if len(rest) > 2 && rest[0] == '0' {
		base := 0
		var ok func(byte) bool
		switch rest[1] | 0x20 {
		case 'x':
			base, ok = 16, func(c byte) bool { return isDec(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
		case 'o':
			base, ok = 8, func(c byte) bool { return c >= '0' && c <= '7' }
		case 'b':
			base, ok = 2, func(c byte) bool { return c == '0' || c == '1' }
		}
		if base != 0 {
			n := digitsFrom(rest[2:], ok)
			if n == 0 {
				return lx.syntaxErr(lx.pos, "malformed number literal")
			}
			v, err := strconv.ParseInt(strings.ReplaceAll(rest[2:2+n], "_", ""), base, 64)
			if err != nil {
				return lx.syntaxErr(lx.pos, "integer literal out of range")
			}
			lx.toks = append(lx.toks, token{kind: tkInt, val: rest[:2+n], pos: lx.pos, i: v})
			lx.pos += 2 + n
			return nil
		}
	}
	n := digitsFrom(rest, isDec)
	isFloat := false
	if n+1 < len(rest) && rest[n] == '.' && isDec(rest[n+1]) {
		isFloat = true
		n += 1 + digitsFrom(rest[n+1:], isDec)
	}
	if n < len(rest) && rest[n]|0x20 == 'e' {
		m := n + 1
		if m < len(rest) && (rest[m] == '+' || rest[m] == '-') {
			m++
		}
		if d := digitsFrom(rest[m:], isDec); d > 0 {
			isFloat = true
			n = m + d
		}
	}
	lit := strings.ReplaceAll(rest[:n], "_", "")
	if isFloat {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && !isRangeErr(err) {
			return lx.syntaxErr(lx.pos, "malformed float literal")
		}
		lx.toks = append(lx.toks, token{kind: tkFloat, val: rest[:n], pos: lx.pos, f: f})
	} else {
		v, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			return lx.syntaxErr(lx.pos, "integer literal out of range")
		}
		lx.toks = append(lx.toks, token{kind: tkInt, val: rest[:n], pos: lx.pos, i: v})
	}
	lx.pos += n
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// string lexes a quoted literal and decodes its escapes the way Jinja does
// (Python's "unicode-escape" codec): unknown escapes stay as written.
func (lx *lexer) string() error {
	q := lx.src[lx.pos]
	var b strings.Builder
	i := lx.pos + 1
	for {
		if i >= len(lx.src) {
			return lx.syntaxErr(lx.pos, "unterminated string literal")
		}
		c := lx.src[i]
		if c == q {
			break
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(lx.src) {
			return lx.syntaxErr(lx.pos, "unterminated string literal")
		}
		e := lx.src[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(lx.src) {
				return lx.syntaxErr(i-2, "truncated \\"+string(e)+" escape")
			}
			v, err := strconv.ParseUint(lx.src[i:i+n], 16, 32)
			if err != nil || v > unicode.MaxRune {
				return lx.syntaxErr(i-2, "malformed \\"+string(e)+" escape")
			}
			b.WriteRune(rune(v))
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && i < len(lx.src) && lx.src[i] >= '0' && lx.src[i] <= '7'; k++ {
				v = v*8 + int(lx.src[i]-'0')
				i++
			}
			b.WriteRune(rune(v))
		case 'N':
			return lx.syntaxErr(i-2, "\\N{...} escapes are not supported")
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	lx.toks = append(lx.toks, token{kind: tkString, val: b.String(), pos: lx.pos})
	lx.pos = i + 1
	return nil
}
