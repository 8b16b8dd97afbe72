package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON Schema validation for structured-output evals: the subset of draft
// 2020-12 that jsonschema_bench-style schemas use, checked with the
// standard library only.
//
// Keywords:
//
//	type                   "null" "boolean" "object" "array" "number" "string" "integer",
//	                       or an array of them; an integer is a number with no fractional
//	                       part (1.0 is an integer, as in 2020-12)
//	enum, const            deep JSON equality (numbers as numbers: 1 = 1.0)
//	minimum, maximum       x ≥ minimum, x ≤ maximum
//	exclusiveMinimum/-Max  x > exclusiveMinimum, x < exclusiveMaximum; the draft-04
//	                       boolean form (true makes minimum/maximum exclusive) is accepted
//	minLength, maxLength   string length in Unicode code points (runes), not bytes
//	pattern                a Go regexp (RE2), searched (unanchored) as ECMA-262 does
//	minItems, maxItems     array length
//	prefixItems, items     prefixItems[i] checks element i; items checks the elements after
//	                       them (the draft-07 array form of items is read as prefixItems,
//	                       with additionalItems for the rest)
//	properties, required   required lists names that must be present
//	patternProperties      every property whose name matches the pattern
//	additionalProperties   false or a schema, for the properties that neither properties
//	                       nor patternProperties name
//	allOf, anyOf, oneOf    all, at least one, exactly one of the subschemas
//	not                    the subschema must fail
//	$ref                   a local reference "#", "#/$defs/name", "#/definitions/name" or
//	                       any other "#/json/pointer" into the same document; as in 2020-12
//	                       it applies together with its sibling keywords
//	true, false            the boolean schemas
//
// Every other keyword is ignored, as JSON Schema treats unknown keywords:
// format (an annotation by default in 2020-12), multipleOf, uniqueItems,
// contains, minProperties, maxProperties, propertyNames, dependentRequired,
// dependentSchemas, if/then/else, unevaluatedProperties/Items, $id,
// $anchor, $dynamicRef. A schema relying on them validates more instances
// than a full validator would. Remote references ("other.json#/x") are
// refused as ErrSchema.
//
// Patterns are RE2, not ECMA-262: lookahead, lookbehind and backreferences
// do not compile and make the schema malformed (ErrSchema); \d, \w and \s
// are ASCII-only in both. Numbers are compared exactly when both are
// integer literals (any size) and as float64 otherwise.
//
// Violations are reported in a fixed order, and the first one is returned:
// false schema, $ref, type, enum, const, the number, string, array or
// object keywords, then allOf, anyOf, oneOf, not; array elements by index,
// properties by name (sorted), so the same instance always names the same
// violation.

// ValidationError is the first place where a JSON instance breaks its
// schema.
type ValidationError struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value in the
	// instance, "" for the root.
	Pointer string
	// Reason says what is wrong, e.g. "17 is less than minimum 18".
	Reason string
}

// Error is "pointer: reason", with "(root)" for the empty pointer:
// "/items/2/age: 17 is less than minimum 18".
func (e *ValidationError) Error() string {
	p := e.Pointer
	if p == "" {
		p = "(root)"
	}
	return p + ": " + e.Reason
}

// JSONSchema is a compiled schema; it is immutable and safe for
// concurrent use.
type JSONSchema struct {
	root *schemaNode
}

// ValidateJSONSchema validates instance against schema. It returns nil, a
// *ValidationError naming the JSON pointer of the first violation, an
// error wrapping ErrNotJSON when instance is not one JSON value, or an
// error wrapping ErrSchema when the schema is malformed.
func ValidateJSONSchema(schema, instance []byte) error {
	s, err := CompileJSONSchema(schema)
	if err != nil {
		return err
	}
	return s.Validate(instance)
}

// CompileJSONSchema parses and checks a schema once, for validating many
// instances. Every subschema is checked, including unused $defs, and every
// $ref must resolve; otherwise the error wraps ErrSchema and names the
// schema location.
func CompileJSONSchema(schema []byte) (*JSONSchema, error) {
	doc, err := decodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	c := &schemaCompiler{doc: doc, nodes: map[string]*schemaNode{}}
	root, err := c.compile(doc, "")
	if err != nil {
		return nil, err
	}
	return &JSONSchema{root: root}, nil
}

// Validate validates one JSON instance; see ValidateJSONSchema.
func (s *JSONSchema) Validate(instance []byte) error {
	v, err := decodeJSON(instance)
	if err != nil {
		return err
	}
	return s.ValidateValue(v)
}

// ValidateValue validates a decoded instance: the values encoding/json
// produces with UseNumber (nil, bool, string, json.Number, []any,
// map[string]any); a float64 is accepted as a number too.
func (s *JSONSchema) ValidateValue(v any) error {
	return s.root.validate(v, "", nil)
}

// schemaNode is one compiled subschema.
type schemaNode struct {
	at     string // its JSON pointer in the schema document, for messages
	always *bool  // a boolean schema

	ref     *schemaNode
	refText string

	types      []string
	enum       []any
	hasEnum    bool
	constValue any
	hasConst   bool

	minimum, maximum *json.Number
	exclMin, exclMax *json.Number

	minLength, maxLength int // -1: absent
	pattern              *regexp.Regexp

	minItems, maxItems int // -1: absent
	prefixItems        []*schemaNode
	items              *schemaNode

	properties map[string]*schemaNode
	propNames  []string // sorted
	patterns   []patternProperty
	additional *schemaNode
	required   []string

	allOf, anyOf, oneOf []*schemaNode
	not                 *schemaNode
}

type patternProperty struct {
	re     *regexp.Regexp
	schema *schemaNode
}

// schemaCompiler compiles a schema document; nodes memoizes subschemas by
// their pointer so that $ref cycles terminate.
type schemaCompiler struct {
	doc   any
	nodes map[string]*schemaNode
}

func (c *schemaCompiler) fail(at, format string, args ...any) error {
	loc := at
	if loc == "" {
		loc = "(root)"
	}
	return fmt.Errorf("%w: %s: %s", ErrSchema, loc, fmt.Sprintf(format, args...))
}

func (c *schemaCompiler) compile(v any, at string) (*schemaNode, error) {
	if n, ok := c.nodes[at]; ok {
		return n, nil
	}
	n := &schemaNode{at: at, minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	c.nodes[at] = n
	switch s := v.(type) {
	case bool:
		n.always = &s
		return n, nil
	case map[string]any:
		return n, c.fill(n, s)
	}
	return nil, c.fail(at, "a schema must be an object or a boolean, not %s", jsonKind(v))
}

// fill reads every keyword kvq knows; the order is irrelevant here (the
// validator fixes its own order).
func (c *schemaCompiler) fill(n *schemaNode, s map[string]any) error {
	at := n.at
	for _, kw := range []string{"$defs", "definitions"} {
		if err := c.compileDefs(s, kw, at); err != nil {
			return err
		}
	}
	if r, ok := s["$ref"]; ok {
		if err := c.compileRef(n, r); err != nil {
			return err
		}
	}
	if err := c.fillGeneric(n, s); err != nil {
		return err
	}
	if err := c.fillNumber(n, s); err != nil {
		return err
	}
	if err := c.fillString(n, s); err != nil {
		return err
	}
	if err := c.fillArray(n, s); err != nil {
		return err
	}
	if err := c.fillObject(n, s); err != nil {
		return err
	}
	return c.fillCombinators(n, s)
}

func (c *schemaCompiler) compileDefs(s map[string]any, kw, at string) error {
	v, ok := s[kw]
	if !ok {
		return nil
	}
	defs, ok := v.(map[string]any)
	if !ok {
		return c.fail(at+"/"+escapePointer(kw), "must be an object")
	}
	for _, name := range sortedKeys(defs) {
		if _, err := c.compile(defs[name], at+"/"+escapePointer(kw)+"/"+escapePointer(name)); err != nil {
			return err
		}
	}
	return nil
}

func (c *schemaCompiler) compileRef(n *schemaNode, r any) error {
	at := n.at + "/$ref"
	ref, ok := r.(string)
	if !ok {
		return c.fail(at, "must be a string")
	}
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return c.fail(at, "%q: only local references (\"#...\") are supported", ref)
	}
	ptr, err := url.PathUnescape(frag)
	if err != nil || (ptr != "" && !strings.HasPrefix(ptr, "/")) {
		return c.fail(at, "%q: not a JSON pointer (anchors are not supported)", ref)
	}
	target, ok := resolvePointer(c.doc, ptr)
	if !ok {
		return c.fail(at, "%q: no such location in the schema", ref)
	}
	// Re-escape the resolved path so that it matches the pointers the
	// structural walk builds.
	node, err := c.compile(target, canonicalPointer(ptr))
	if err != nil {
		return err
	}
	n.ref, n.refText = node, ref
	return nil
}

var schemaTypes = []string{"null", "boolean", "object", "array", "number", "string", "integer"}

func (c *schemaCompiler) fillGeneric(n *schemaNode, s map[string]any) error {
	at := n.at
	if t, ok := s["type"]; ok {
		switch t := t.(type) {
		case string:
			n.types = []string{t}
		case []any:
			for _, e := range t {
				str, ok := e.(string)
				if !ok {
					return c.fail(at+"/type", "must list strings")
				}
				n.types = append(n.types, str)
			}
		default:
			return c.fail(at+"/type", "must be a string or an array of strings")
		}
		for _, name := range n.types {
			if !slices.Contains(schemaTypes, name) {
				return c.fail(at+"/type", "unknown type %q", name)
			}
		}
	}
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok {
			return c.fail(at+"/enum", "must be an array")
		}
		n.enum, n.hasEnum = list, true
	}
	if v, ok := s["const"]; ok {
		n.constValue, n.hasConst = v, true
	}
	return nil
}

func (c *schemaCompiler) fillNumber(n *schemaNode, s map[string]any) error {
	var err error
	num := func(kw string) *json.Number {
		v, ok := s[kw]
		if !ok || err != nil {
			return nil
		}
		x, isNum := v.(json.Number)
		if !isNum {
			err = c.fail(n.at+"/"+kw, "must be a number")
			return nil
		}
		return &x
	}
	n.minimum, n.maximum = num("minimum"), num("maximum")
	for _, kw := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		v, ok := s[kw]
		if !ok || err != nil {
			continue
		}
		if b, isBool := v.(bool); isBool { // draft-04: makes minimum/maximum exclusive
			if b && kw == "exclusiveMinimum" {
				n.exclMin, n.minimum = n.minimum, nil
			}
			if b && kw == "exclusiveMaximum" {
				n.exclMax, n.maximum = n.maximum, nil
			}
			continue
		}
		if kw == "exclusiveMinimum" {
			n.exclMin = num(kw)
		} else {
			n.exclMax = num(kw)
		}
	}
	return err
}

func (c *schemaCompiler) fillString(n *schemaNode, s map[string]any) error {
	var err error
	if n.minLength, err = c.count(s, "minLength", n.at); err != nil {
		return err
	}
	if n.maxLength, err = c.count(s, "maxLength", n.at); err != nil {
		return err
	}
	if p, ok := s["pattern"]; ok {
		if n.pattern, err = c.compilePattern(p, n.at+"/pattern"); err != nil {
			return err
		}
	}
	return nil
}

func (c *schemaCompiler) fillArray(n *schemaNode, s map[string]any) error {
	var err error
	at := n.at
	if n.minItems, err = c.count(s, "minItems", at); err != nil {
		return err
	}
	if n.maxItems, err = c.count(s, "maxItems", at); err != nil {
		return err
	}
	if p, ok := s["prefixItems"]; ok {
		if n.prefixItems, err = c.schemaList(p, at+"/prefixItems"); err != nil {
			return err
		}
	}
	it, ok := s["items"]
	if !ok {
		return nil
	}
	if list, isList := it.([]any); isList { // draft-07 tuple form
		if n.prefixItems, err = c.schemaList(list, at+"/items"); err != nil {
			return err
		}
		if rest, ok := s["additionalItems"]; ok {
			n.items, err = c.compile(rest, at+"/additionalItems")
		}
		return err
	}
	n.items, err = c.compile(it, at+"/items")
	return err
}

func (c *schemaCompiler) fillObject(n *schemaNode, s map[string]any) error {
	at := n.at
	if p, ok := s["properties"]; ok {
		props, ok := p.(map[string]any)
		if !ok {
			return c.fail(at+"/properties", "must be an object")
		}
		n.properties = map[string]*schemaNode{}
		n.propNames = sortedKeys(props)
		for _, name := range n.propNames {
			sub, err := c.compile(props[name], at+"/properties/"+escapePointer(name))
			if err != nil {
				return err
			}
			n.properties[name] = sub
		}
	}
	if p, ok := s["patternProperties"]; ok {
		props, ok := p.(map[string]any)
		if !ok {
			return c.fail(at+"/patternProperties", "must be an object")
		}
		for _, pat := range sortedKeys(props) {
			loc := at + "/patternProperties/" + escapePointer(pat)
			re, err := c.compilePattern(pat, loc)
			if err != nil {
				return err
			}
			sub, err := c.compile(props[pat], loc)
			if err != nil {
				return err
			}
			n.patterns = append(n.patterns, patternProperty{re, sub})
		}
	}
	if a, ok := s["additionalProperties"]; ok {
		var err error
		if n.additional, err = c.compile(a, at+"/additionalProperties"); err != nil {
			return err
		}
	}
	if r, ok := s["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return c.fail(at+"/required", "must be an array of strings")
		}
		for _, e := range list {
			name, ok := e.(string)
			if !ok {
				return c.fail(at+"/required", "must be an array of strings")
			}
			n.required = append(n.required, name)
		}
	}
	return nil
}

func (c *schemaCompiler) fillCombinators(n *schemaNode, s map[string]any) error {
	var err error
	for _, kw := range []struct {
		name string
		dst  *[]*schemaNode
	}{{"allOf", &n.allOf}, {"anyOf", &n.anyOf}, {"oneOf", &n.oneOf}} {
		if v, ok := s[kw.name]; ok {
			if *kw.dst, err = c.schemaList(v, n.at+"/"+kw.name); err != nil {
				return err
			}
			if len(*kw.dst) == 0 {
				return c.fail(n.at+"/"+kw.name, "must not be empty")
			}
		}
	}
	if v, ok := s["not"]; ok {
		n.not, err = c.compile(v, n.at+"/not")
	}
	return err
}

// count reads a non-negative integer keyword, -1 when absent.
func (c *schemaCompiler) count(s map[string]any, kw, at string) (int, error) {
	v, ok := s[kw]
	if !ok {
		return -1, nil
	}
	num, ok := v.(json.Number)
	if ok {
		if f, err := num.Float64(); err == nil && f >= 0 && f == math.Trunc(f) && f <= math.MaxInt32 {
			return int(f), nil
		}
	}
	return 0, c.fail(at+"/"+kw, "must be a non-negative integer")
}

func (c *schemaCompiler) compilePattern(v any, at string) (*regexp.Regexp, error) {
	src, ok := v.(string)
	if !ok {
		return nil, c.fail(at, "must be a string")
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, c.fail(at, "pattern %q is not a Go (RE2) regexp: %v", src, err)
	}
	return re, nil
}

func (c *schemaCompiler) schemaList(v any, at string) ([]*schemaNode, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, c.fail(at, "must be an array of schemas")
	}
	out := make([]*schemaNode, len(list))
	for i, e := range list {
		var err error
		if out[i], err = c.compile(e, at+"/"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// validate checks v (at instance pointer at) against n. seen holds the
// nodes entered at this same instance location through $ref and the
// combinators, to refuse a reference loop that would never end.
func (n *schemaNode) validate(v any, at string, seen []*schemaNode) error {
	if slices.Contains(seen, n) {
		return fmt.Errorf("%w: %s: $ref loop that never reaches a value", ErrSchema, n.at)
	}
	seen = append(seen, n)
	if n.always != nil {
		if *n.always {
			return nil
		}
		return violation(at, "no value is allowed here (schema false)")
	}
	if n.ref != nil {
		if err := n.ref.validate(v, at, seen); err != nil {
			return err
		}
	}
	if err := n.validateGeneric(v, at); err != nil {
		return err
	}
	var err error
	switch v := v.(type) {
	case json.Number:
		err = n.validateNumber(v, at)
	case float64:
		err = n.validateNumber(json.Number(strconv.FormatFloat(v, 'g', -1, 64)), at)
	case string:
		err = n.validateString(v, at)
	case []any:
		err = n.validateArray(v, at)
	case map[string]any:
		err = n.validateObject(v, at)
	}
	if err != nil {
		return err
	}
	return n.validateCombinators(v, at, seen)
}

func violation(at, format string, args ...any) *ValidationError {
	return &ValidationError{Pointer: at, Reason: fmt.Sprintf(format, args...)}
}

func (n *schemaNode) validateGeneric(v any, at string) error {
	if len(n.types) > 0 && !slices.ContainsFunc(n.types, func(t string) bool { return hasType(v, t) }) {
		return violation(at, "got %s %s, want %s", jsonKind(v), shortJSON(v), strings.Join(n.types, " or "))
	}
	if n.hasEnum && !slices.ContainsFunc(n.enum, func(e any) bool { return jsonEqual(v, e) }) {
		return violation(at, "%s is not one of the enum values %s", shortJSON(v), shortJSON(n.enum))
	}
	if n.hasConst && !jsonEqual(v, n.constValue) {
		return violation(at, "%s is not the const %s", shortJSON(v), shortJSON(n.constValue))
	}
	return nil
}

func (n *schemaNode) validateNumber(x json.Number, at string) error {
	switch {
	case n.minimum != nil && compareNumbers(x, *n.minimum) < 0:
		return violation(at, "%s is less than minimum %s", x, *n.minimum)
	case n.maximum != nil && compareNumbers(x, *n.maximum) > 0:
		return violation(at, "%s is greater than maximum %s", x, *n.maximum)
	case n.exclMin != nil && compareNumbers(x, *n.exclMin) <= 0:
		return violation(at, "%s is not greater than exclusiveMinimum %s", x, *n.exclMin)
	case n.exclMax != nil && compareNumbers(x, *n.exclMax) >= 0:
		return violation(at, "%s is not less than exclusiveMaximum %s", x, *n.exclMax)
	}
	return nil
}

func (n *schemaNode) validateString(s string, at string) error {
	runes := utf8.RuneCountInString(s)
	switch {
	case n.minLength >= 0 && runes < n.minLength:
		return violation(at, "%s has %d characters, fewer than minLength %d", shortJSON(s), runes, n.minLength)
	case n.maxLength >= 0 && runes > n.maxLength:
		return violation(at, "%s has %d characters, more than maxLength %d", shortJSON(s), runes, n.maxLength)
	case n.pattern != nil && !n.pattern.MatchString(s):
		return violation(at, "%s does not match pattern %q", shortJSON(s), n.pattern.String())
	}
	return nil
}

func (n *schemaNode) validateArray(a []any, at string) error {
	switch {
	case n.minItems >= 0 && len(a) < n.minItems:
		return violation(at, "array has %d items, fewer than minItems %d", len(a), n.minItems)
	case n.maxItems >= 0 && len(a) > n.maxItems:
		return violation(at, "array has %d items, more than maxItems %d", len(a), n.maxItems)
	}
	for i, e := range a {
		sub := n.items
		if i < len(n.prefixItems) {
			sub = n.prefixItems[i]
		}
		if sub == nil {
			continue
		}
		if err := sub.validate(e, at+"/"+strconv.Itoa(i), nil); err != nil {
			return err
		}
	}
	return nil
}

func (n *schemaNode) validateObject(o map[string]any, at string) error {
	for _, name := range n.required {
		if _, ok := o[name]; !ok {
			return violation(at, "missing required property %q", name)
		}
	}
	for _, name := range sortedKeys(o) {
		child := at + "/" + escapePointer(name)
		matched := false
		if sub, ok := n.properties[name]; ok {
			matched = true
			if err := sub.validate(o[name], child, nil); err != nil {
				return err
			}
		}
		for _, pp := range n.patterns {
			if !pp.re.MatchString(name) {
				continue
			}
			matched = true
			if err := pp.schema.validate(o[name], child, nil); err != nil {
				return err
			}
		}
		if matched || n.additional == nil {
			continue
		}
		if a := n.additional.always; a != nil && !*a {
			return violation(child, "property %q is not allowed (additionalProperties is false)", name)
		}
		if err := n.additional.validate(o[name], child, nil); err != nil {
			return err
		}
	}
	return nil
}

func (n *schemaNode) validateCombinators(v any, at string, seen []*schemaNode) error {
	for _, sub := range n.allOf {
		if err := sub.validate(v, at, seen); err != nil {
			return err
		}
	}
	if len(n.anyOf) > 0 {
		matched, first, err := matchAll(n.anyOf, v, at, seen, 1)
		if err != nil {
			return err
		}
		if len(matched) == 0 {
			return violation(at, "matches none of the %d anyOf schemas (first: %v)", len(n.anyOf), first)
		}
	}
	if len(n.oneOf) > 0 {
		matched, first, err := matchAll(n.oneOf, v, at, seen, 2)
		if err != nil {
			return err
		}
		switch len(matched) {
		case 0:
			return violation(at, "matches none of the %d oneOf schemas (first: %v)", len(n.oneOf), first)
		case 2:
			return violation(at, "matches oneOf schemas %d and %d, want exactly one", matched[0], matched[1])
		}
	}
	if n.not != nil {
		err := n.not.validate(v, at, seen)
		if err == nil {
			return violation(at, "%s matches the schema under \"not\"", shortJSON(v))
		}
		if !isViolation(err) {
			return err
		}
	}
	return nil
}

// matchAll validates v against each schema until limit of them match; it
// returns the indices that matched, the first violation, and any schema
// error.
func matchAll(schemas []*schemaNode, v any, at string, seen []*schemaNode, limit int) (matched []int, first error, err error) {
	for i, sub := range schemas {
		e := sub.validate(v, at, seen)
		switch {
		case e == nil:
			if matched = append(matched, i); len(matched) == limit {
				return matched, first, nil
			}
		case !isViolation(e):
			return nil, nil, e
		case first == nil:
			first = e
		}
	}
	return matched, first, nil
}

func isViolation(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

// hasType reports whether v is of JSON Schema type t.
func hasType(v any, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := asNumber(v)
		return ok
	case "integer":
		x, ok := asNumber(v)
		return ok && isIntegral(x)
	}
	return false
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

// Helpers shared by the JSON metrics and the validator.

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

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// resolvePointer finds the value at an RFC 6901 pointer ("" is the whole
// document).
func resolvePointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	v := doc
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = unescapePointer(seg)
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != seg {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// canonicalPointer re-escapes each segment of a pointer, so that
// "/$defs/a~1b" and the walk's "/$defs/"+escapePointer("a/b") agree.
func canonicalPointer(ptr string) string {
	if ptr == "" {
		return ""
	}
	segs := strings.Split(ptr[1:], "/")
	for i, s := range segs {
		segs[i] = escapePointer(unescapePointer(s))
	}
	return "/" + strings.Join(segs, "/")
}
