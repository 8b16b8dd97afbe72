package eval

import (
	stdcmp "cmp"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// JSON Schema validation for the json-schema metric, done by
// github.com/santhosh-tekuri/jsonschema/v6: a complete validator that
// passes the official JSON-Schema-Test-Suite for drafts 4, 6, 7, 2019-09
// and 2020-12. This file only configures it and turns its errors into
// kvq's messages.
//
// Drafts: a schema without "$schema" is read as draft 2020-12; a schema
// that names another draft's metaschema ("http://json-schema.org/draft-07/schema#",
// …) is read as that draft, so the draft-04 boolean exclusiveMinimum or
// the draft-07 array form of items need their "$schema". The metaschemas
// are built into the library. Every keyword of the draft is checked
// (multipleOf, uniqueItems, contains, if/then/else, dependentRequired,
// unevaluatedProperties, $anchor, $dynamicRef, …), except "format", which
// 2020-12 makes an annotation (it is asserted only where the draft does:
// draft 7 and earlier).
//
// No files, no network: a schema is self-contained. References resolve
// inside the schema document ("#/$defs/x", "#anchor", an embedded "$id");
// a reference to any other document ("other.json#/a",
// "https://example.com/s.json") is refused when the schema compiles,
// with ErrSchema, and nothing is read or fetched (refuseLoader). A
// schema is checked against its draft's metaschema when it compiles, so
// a malformed schema is reported where it is written: a tasks file line
// names its file and line, ParseTasks adds them.
//
// Patterns are Go regexps (RE2), searched unanchored as ECMA-262 does:
// lookahead, lookbehind and backreferences do not compile, and the schema
// is malformed (ErrSchema). Numbers are compared exactly (as rationals).
//
// The library reports every violation; kvq reports one, the first by
// instance location (array elements by index, properties by name, a
// value before what it contains), then by schema location, so the same
// instance always names the same violation.

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
	s *jsonschema.Schema
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

// schemaURL is the address the schema document is compiled under. It is
// never read: the document is given to the compiler, and refuseLoader
// refuses every other address.
const schemaURL = "kvq:///schema.json"

// refuseLoader is the compiler's loader for documents other than the
// schema and the built-in metaschemas: it loads none, so that compiling a
// schema never reads a file or the network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, errors.New("not loaded")
}

// CompileJSONSchema parses and checks a schema once, for validating many
// instances. The schema is validated against its draft's metaschema
// (every subschema, including unused $defs), every $ref must resolve
// inside the schema, and a $ref loop that would never consume the
// instance is refused; otherwise the error wraps ErrSchema and names the
// schema location.
func CompileJSONSchema(schema []byte) (*JSONSchema, error) {
	doc, err := decodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, compileError(err, doc)
	}
	if loc := refLoop(s); loc != "" {
		return nil, fmt.Errorf("%w: %s: $ref loop: the schema refers back to itself without going into the instance", ErrSchema, schemaLoc(loc))
	}
	return &JSONSchema{s: s}, nil
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
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%w: %w", ErrSchema, err)
	}
	for _, l := range leaves(ve) {
		if k, ok := l.ErrorKind.(*kind.RefCycle); ok {
			return fmt.Errorf("%w: %s: $ref loop through %s", ErrSchema, schemaLoc(k.URL), k.KeywordLocation1)
		}
	}
	return violation(firstLeaf(ve), v)
}

// compileError turns the compiler's error into one wrapping ErrSchema,
// naming the schema location.
func compileError(err error, doc any) error {
	var (
		meta    *jsonschema.SchemaValidationError
		load    *jsonschema.LoadURLError
		regex   *jsonschema.InvalidRegexError
		ptr     *jsonschema.JSONPointerNotFoundError
		anchor  *jsonschema.AnchorNotFoundError
		invalid *jsonschema.ValidationError
	)
	switch {
	case errors.As(err, &meta) && errors.As(meta.Err, &invalid):
		// The schema breaks its metaschema: the "instance" is the schema.
		return fmt.Errorf("%w: %v", ErrSchema, violation(firstLeaf(invalid), doc))
	case errors.As(err, &load):
		return fmt.Errorf("%w: reference to %s: only local references (inside the schema) are resolved; no file or URL is read", ErrSchema, strings.TrimPrefix(load.URL, "kvq:///"))
	case errors.As(err, &regex):
		return fmt.Errorf("%w: %s: pattern %q does not compile as a Go (RE2) regexp: %v", ErrSchema, schemaLoc(regex.URL), regex.Regex, regex.Err)
	case errors.As(err, &ptr):
		return fmt.Errorf("%w: $ref %s: no such location in the schema", ErrSchema, schemaLoc(ptr.URL))
	case errors.As(err, &anchor):
		return fmt.Errorf("%w: $ref %s: no such anchor in the schema (anchors are declared with $anchor)", ErrSchema, strings.TrimPrefix(anchor.Reference, schemaURL))
	}
	return fmt.Errorf("%w: %w", ErrSchema, err)
}

// schemaLoc is a location in the schema for messages: the JSON pointer of
// a kvq:///schema.json#/pointer URL, "(root)" for the root, or the URL as
// is when it names an embedded resource ($id).
func schemaLoc(url string) string {
	if rest, ok := strings.CutPrefix(url, schemaURL); ok {
		rest = strings.TrimPrefix(rest, "#")
		if rest == "" {
			return "(root)"
		}
		return rest
	}
	return url
}

// refLoop finds a cycle of in-place applicators ($ref, allOf, anyOf,
// oneOf, not, if/then/else, dependentSchemas): a schema that reaches
// itself through them validates the same value again, forever, whenever
// validation gets there. It returns the location of a schema on the
// cycle, or "". Subschemas for a part of the instance (properties,
// items, …) are searched too, but a chain through them is no loop: it
// ends with the instance.
func refLoop(root *jsonschema.Schema) string {
	// Every subschema, in a fixed order.
	var all []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	queue := []*jsonschema.Schema{root}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		all = append(all, s)
		queue = append(queue, inPlace(s)...)
		queue = append(queue, inner(s)...)
	}
	const (
		visiting = 1
		done     = 2
	)
	state := map[*jsonschema.Schema]int{}
	var visit func(s *jsonschema.Schema) string
	visit = func(s *jsonschema.Schema) string {
		switch {
		case s == nil || state[s] == done:
			return ""
		case state[s] == visiting:
			return s.Location
		}
		state[s] = visiting
		for _, n := range inPlace(s) {
			if loc := visit(n); loc != "" {
				return loc
			}
		}
		state[s] = done
		return ""
	}
	for _, s := range all {
		if loc := visit(s); loc != "" {
			return loc
		}
	}
	return ""
}

// inPlace lists the subschemas of s that validate the same value as s.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, name := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		out = append(out, s.DependentSchemas[name])
	}
	return out
}

// inner lists the subschemas of s that validate a part of the instance
// (a property, an item, a property name), in a fixed order.
func inner(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		out = append(out, s.Properties[name])
	}
	pats := make([]jsonschema.Regexp, 0, len(s.PatternProperties))
	for re := range s.PatternProperties {
		pats = append(pats, re)
	}
	slices.SortFunc(pats, func(a, b jsonschema.Regexp) int { return stdcmp.Compare(a.String(), b.String()) })
	for _, re := range pats {
		out = append(out, s.PatternProperties[re])
	}
	out = append(out, s.PrefixItems...)
	for _, x := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch x := x.(type) {
		case *jsonschema.Schema:
			out = append(out, x)
		case []*jsonschema.Schema:
			out = append(out, x...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if d, ok := s.Dependencies[name].(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return out
}

// firstLeaf returns the first violation among leaves(e), by instance
// location, then by schema location.
func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	return slices.MinFunc(leaves(e), func(a, b *jsonschema.ValidationError) int {
		if c := comparePointers(a.InstanceLocation, b.InstanceLocation); c != 0 {
			return c
		}
		return stdcmp.Compare(keywordLoc(a), keywordLoc(b))
	})
}

// leaves lists the violations in the library's error tree, walked through
// the nodes that only group their causes (the whole schema, a group of
// keywords, $ref, allOf). It is never empty.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		if len(e.Causes) > 0 {
			var out []*jsonschema.ValidationError
			for _, c := range e.Causes {
				out = append(out, leaves(c)...)
			}
			return out
		}
	}
	return []*jsonschema.ValidationError{e}
}

// comparePointers orders instance locations: token by token, array
// indices as numbers, a location before the locations inside it.
func comparePointers(a, b []string) int {
	for i := range min(len(a), len(b)) {
		x, errx := strconv.Atoi(a[i])
		y, erry := strconv.Atoi(b[i])
		if errx == nil && erry == nil {
			if c := stdcmp.Compare(x, y); c != 0 {
				return c
			}
			continue
		}
		if c := stdcmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return stdcmp.Compare(len(a), len(b))
}

func keywordLoc(e *jsonschema.ValidationError) string {
	loc := e.SchemaURL
	for _, k := range e.ErrorKind.KeywordPath() {
		loc += "/" + escapePointer(k)
	}
	return loc
}

// printer renders the library's own messages, for the keywords kvq does
// not word itself.
var printer = message.NewPrinter(language.English)

// violation words one of the library's violations as a *ValidationError;
// instance is the validated value, to quote the offending part of it.
func violation(e *jsonschema.ValidationError, instance any) *ValidationError {
	at := pointer(e.InstanceLocation)
	v, _ := valueAt(instance, e.InstanceLocation)
	got := shortJSON(v)
	out := &ValidationError{Pointer: at}
	switch k := e.ErrorKind.(type) {
	case *kind.FalseSchema:
		out.Reason = "no value is allowed here (schema false)"
	case *kind.Type:
		out.Reason = fmt.Sprintf("got %s %s, want %s", jsonKind(v), got, strings.Join(k.Want, " or "))
	case *kind.Enum:
		out.Reason = fmt.Sprintf("%s is not one of the enum values %s", got, shortJSON(k.Want))
	case *kind.Const:
		out.Reason = fmt.Sprintf("%s is not the const %s", got, shortJSON(k.Want))
	case *kind.Minimum:
		out.Reason = fmt.Sprintf("%s is less than minimum %s", got, ratString(k.Want))
	case *kind.Maximum:
		out.Reason = fmt.Sprintf("%s is greater than maximum %s", got, ratString(k.Want))
	case *kind.ExclusiveMinimum:
		out.Reason = fmt.Sprintf("%s is not greater than exclusiveMinimum %s", got, ratString(k.Want))
	case *kind.ExclusiveMaximum:
		out.Reason = fmt.Sprintf("%s is not less than exclusiveMaximum %s", got, ratString(k.Want))
	case *kind.MultipleOf:
		out.Reason = fmt.Sprintf("%s is not a multiple of %s", got, ratString(k.Want))
	case *kind.MinLength:
		out.Reason = fmt.Sprintf("%s has %d characters, fewer than minLength %d", got, k.Got, k.Want)
	case *kind.MaxLength:
		out.Reason = fmt.Sprintf("%s has %d characters, more than maxLength %d", got, k.Got, k.Want)
	case *kind.Pattern:
		out.Reason = fmt.Sprintf("%s does not match pattern %q", got, k.Want)
	case *kind.MinItems:
		out.Reason = fmt.Sprintf("array has %d items, fewer than minItems %d", k.Got, k.Want)
	case *kind.MaxItems:
		out.Reason = fmt.Sprintf("array has %d items, more than maxItems %d", k.Got, k.Want)
	case *kind.UniqueItems:
		out.Reason = fmt.Sprintf("items %d and %d are equal (uniqueItems)", k.Duplicates[0], k.Duplicates[1])
	case *kind.AdditionalItems:
		// Draft 7 "additionalItems": false: the first item past the tuple.
		if a, ok := v.([]any); ok {
			out.Pointer = at + "/" + strconv.Itoa(len(a)-k.Count)
		}
		out.Reason = "no value is allowed here (schema false)"
	case *kind.Required:
		out.Reason = "missing required " + quotedList("property", "properties", k.Missing)
	case *kind.AdditionalProperties:
		name := slices.Min(k.Properties)
		out.Pointer = at + "/" + escapePointer(name)
		out.Reason = fmt.Sprintf("property %q is not allowed (additionalProperties is false)", name)
	case *kind.MinProperties:
		out.Reason = fmt.Sprintf("object has %d properties, fewer than minProperties %d", k.Got, k.Want)
	case *kind.MaxProperties:
		out.Reason = fmt.Sprintf("object has %d properties, more than maxProperties %d", k.Got, k.Want)
	case *kind.DependentRequired:
		out.Reason = fmt.Sprintf("missing %s, required when %q is present", quotedList("property", "properties", k.Missing), k.Prop)
	case *kind.Dependency:
		out.Reason = fmt.Sprintf("missing %s, required when %q is present", quotedList("property", "properties", k.Missing), k.Prop)
	case *kind.PropertyNames:
		out.Reason = fmt.Sprintf("property name %q breaks \"propertyNames\"", k.Property)
		if len(e.Causes) > 0 {
			out.Reason = fmt.Sprintf("property name %q: %s", k.Property, violation(firstLeaf(e.Causes[0]), k.Property).Reason)
		}
	case *kind.Format:
		out.Reason = fmt.Sprintf("%s is not a valid %s: %v", got, k.Want, k.Err)
		if k.Want == "regex" {
			out.Reason += " (patterns are Go RE2 regexps)"
		}
	case *kind.Contains:
		out.Reason = `no item matches the schema under "contains"`
	case *kind.Not:
		out.Reason = fmt.Sprintf("%s matches the schema under \"not\"", got)
	case *kind.AnyOf:
		out.Reason = fmt.Sprintf("matches none of the %d anyOf schemas%s", len(e.Causes), firstCause(e, instance))
	case *kind.OneOf:
		if len(k.Subschemas) == 2 {
			out.Reason = fmt.Sprintf("matches oneOf schemas %d and %d, want exactly one", k.Subschemas[0], k.Subschemas[1])
		} else {
			out.Reason = fmt.Sprintf("matches none of the %d oneOf schemas%s", len(e.Causes), firstCause(e, instance))
		}
	default:
		out.Reason = e.ErrorKind.LocalizedString(printer)
	}
	return out
}

// firstCause is " (first: violation)" for the first alternative of an
// anyOf or oneOf that matched none.
func firstCause(e *jsonschema.ValidationError, instance any) string {
	if len(e.Causes) == 0 {
		return ""
	}
	return " (first: " + violation(firstLeaf(e.Causes[0]), instance).Error() + ")"
}

func quotedList(one, many string, names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return one + " " + q[0]
	}
	return many + " " + strings.Join(q, ", ")
}

// ratString writes a schema's number: an integer exactly, anything else
// as the shortest float64 that reads back the same.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + escapePointer(t))
	}
	return b.String()
}

// valueAt finds the value at an instance location.
func valueAt(v any, tokens []string) (any, bool) {
	for _, t := range tokens {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[t]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}
