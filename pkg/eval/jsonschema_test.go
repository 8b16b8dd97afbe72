package eval

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateJSONSchema(t *testing.T) {
	people := `{
		"type": "object",
		"properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/person"}}},
		"$defs": {"person": {
			"type": "object",
			"properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 18}},
			"required": ["name", "age"],
			"additionalProperties": false
		}}
	}`
	ifThenElse := `{
		"properties": {"kind": {"enum": ["card", "bank"]}},
		"if": {"properties": {"kind": {"const": "card"}}},
		"then": {"required": ["number"]},
		"else": {"required": ["iban"]}
	}`
	tree := `{"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}}, "required": ["v"]}`
	tests := []struct {
		name, schema, instance string
		want                   string // the error text; "" for valid
	}{
		{"people valid", people, `{"items": [{"name": "a", "age": 18}, {"name": "b", "age": 40}]}`, ""},
		{"people minimum", people, `{"items": [{"name": "a", "age": 18}, {"name": "b", "age": 40}, {"name": "c", "age": 17}]}`, "/items/2/age: 17 is less than minimum 18"},
		{"people required", people, `{"items": [{"name": "a"}]}`, `/items/0: missing required property "age"`},
		{"people additional", people, `{"items": [{"name": "a", "age": 20, "x": 1}]}`, `/items/0/x: property "x" is not allowed (additionalProperties is false)`},
		{"people type", people, `{"items": [{"name": "a", "age": "20"}]}`, `/items/0/age: got string "20", want integer`},
		{"type at root", `{"type": "object"}`, `[1]`, `(root): got array [1], want object`},
		{"type list", `{"type": ["string", "null"]}`, `null`, ""},
		{"type list fails", `{"type": ["string", "null"]}`, `1`, `(root): got integer 1, want null or string`},
		{"integer accepts 1.0", `{"type": "integer"}`, `1.0`, ""},
		{"integer rejects 1.5", `{"type": "integer"}`, `1.5`, `(root): got number 1.5, want integer`},
		{"number accepts integers", `{"type": "number"}`, `3`, ""},
		{"boolean", `{"type": "boolean"}`, `0`, `(root): got integer 0, want boolean`},
		{"enum", `{"enum": ["red", 1, null]}`, `1.0`, ""},
		{"enum fails", `{"enum": ["red", "green"]}`, `"blue"`, `(root): "blue" is not one of the enum values ["red","green"]`},
		{"const object", `{"const": {"a": [1, 2]}}`, `{"a": [1, 2.0]}`, ""},
		{"const fails", `{"const": "x"}`, `"y"`, `(root): "y" is not the const "x"`},
		{"maximum", `{"maximum": 10}`, `10.5`, `(root): 10.5 is greater than maximum 10`},
		{"exclusiveMinimum", `{"exclusiveMinimum": 0}`, `0`, `(root): 0 is not greater than exclusiveMinimum 0`},
		{"exclusiveMaximum", `{"exclusiveMaximum": 1}`, `0.999`, ""},
		{"exclusiveMaximum fails", `{"exclusiveMaximum": 1}`, `1`, `(root): 1 is not less than exclusiveMaximum 1`},
		{"draft-04 exclusiveMinimum", `{"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 5, "exclusiveMinimum": true}`, `5`, `(root): 5 is not greater than exclusiveMinimum 5`},
		// 2^53+1 rounds to 2^53 in float64: only exact comparison sees it.
		{"big integers exact", `{"maximum": 9007199254740992}`, `9007199254740993`, `(root): 9007199254740993 is greater than maximum 9007199254740992`},
		{"numbers keywords ignore strings", `{"minimum": 5}`, `"a"`, ""},
		{"minLength in runes", `{"minLength": 3}`, `"héé"`, ""},
		{"minLength fails", `{"minLength": 3}`, `"hé"`, `(root): "hé" has 2 characters, fewer than minLength 3`},
		{"maxLength fails", `{"maxLength": 2}`, `"abc"`, `(root): "abc" has 3 characters, more than maxLength 2`},
		{"pattern searches", `{"pattern": "[0-9]{3}"}`, `"ab123c"`, ""},
		{"pattern fails", `{"pattern": "^[a-z]+$"}`, `"ab1"`, `(root): "ab1" does not match pattern "^[a-z]+$"`},
		{"minItems", `{"minItems": 2}`, `[1]`, `(root): array has 1 items, fewer than minItems 2`},
		{"maxItems", `{"maxItems": 1}`, `[1, 2]`, `(root): array has 2 items, more than maxItems 1`},
		{"prefixItems then items", `{"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}`, `["a", 1, 2]`, ""},
		{"prefixItems fails", `{"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}`, `["a", 1, "b"]`, `/2: got string "b", want integer`},
		{"items false after prefix", `{"prefixItems": [{}], "items": false}`, `[1, 2]`, `/1: no value is allowed here (schema false)`},
		{"draft-07 tuple items", `{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}], "additionalItems": false}`, `["a", 1]`, `/1: no value is allowed here (schema false)`},
		{"additionalProperties schema", `{"properties": {"a": {}}, "additionalProperties": {"type": "string"}}`, `{"a": 1, "b": 2}`, `/b: got integer 2, want string`},
		{"patternProperties", `{"patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": false}`, `{"x-a": "ok"}`, ""},
		{"patternProperties fails", `{"patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": false}`, `{"x-a": 1}`, `/x-a: got integer 1, want string`},
		{"pointer escaping", `{"properties": {"a/b": {"type": "string"}, "c~d": {"type": "string"}}}`, `{"a/b": 1}`, `/a~1b: got integer 1, want string`},
		{"allOf", `{"allOf": [{"type": "integer"}, {"minimum": 3}]}`, `2`, `(root): 2 is less than minimum 3`},
		{"anyOf", `{"anyOf": [{"type": "string"}, {"minimum": 3}]}`, `4`, ""},
		{"anyOf fails", `{"anyOf": [{"type": "string"}, {"minimum": 3}]}`, `2`, `(root): matches none of the 2 anyOf schemas (first: (root): got integer 2, want string)`},
		{"oneOf", `{"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]}`, `"x"`, ""},
		{"oneOf: number keywords pass strings", `{"oneOf": [{"type": "string"}, {"minimum": 3}]}`, `"x"`, `(root): matches oneOf schemas 0 and 1, want exactly one`},
		{"oneOf both", `{"oneOf": [{"type": "integer"}, {"minimum": 3}]}`, `4`, `(root): matches oneOf schemas 0 and 1, want exactly one`},
		{"not", `{"not": {"type": "null"}}`, `null`, `(root): null matches the schema under "not"`},
		{"ref to definitions", `{"definitions": {"id": {"type": "integer"}}, "properties": {"id": {"$ref": "#/definitions/id"}}}`, `{"id": "7"}`, `/id: got string "7", want integer`},
		{"ref with siblings", `{"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "minimum": 0}`, `-1`, `(root): -1 is less than minimum 0`},
		{"ref escaped name", `{"$defs": {"a/b": {"type": "integer"}}, "$ref": "#/$defs/a~1b"}`, `"x"`, `(root): got string "x", want integer`},
		{"ref into an array", `{"allOf": [{"type": "object"}], "properties": {"a": {"$ref": "#/allOf/0"}}}`, `{"a": 1}`, `/a: got integer 1, want object`},
		{"long values are cut", `{"const": "x"}`, `"` + strings.Repeat("é", 40) + `"`, `(root): "` + strings.Repeat("é", 28) + `... is not the const "x"`},
		{"recursive tree", tree, `{"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]}`, ""},
		{"recursive tree fails deep", tree, `{"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": "4"}]}]}`, `/kids/1/kids/0/v: got string "4", want integer`},
		{"true schema", `true`, `{"anything": [1]}`, ""},
		{"false schema", `false`, `1`, `(root): no value is allowed here (schema false)`},
		{"format is an annotation in 2020-12, unknown keywords ignored", `{"format": "email", "x-custom": 1}`, `"not an email"`, ""},
		{"format asserted in draft-07", `{"$schema": "http://json-schema.org/draft-07/schema#", "format": "email"}`, `"x"`, `(root): "x" is not a valid email: missing @`},
		// Keywords the former built-in subset ignored, so that "json valid"
		// over-reported.
		{"multipleOf", `{"multipleOf": 3}`, `9`, ""},
		{"multipleOf fails", `{"multipleOf": 3}`, `7`, `(root): 7 is not a multiple of 3`},
		{"multipleOf decimal is exact", `{"multipleOf": 0.1}`, `0.3`, ""},
		{"multipleOf decimal fails", `{"properties": {"price": {"multipleOf": 0.01}}}`, `{"price": 1.005}`, `/price: 1.005 is not a multiple of 0.01`},
		{"uniqueItems", `{"uniqueItems": true}`, `[1, "1", [1], {"a": 1}, {"a": 2}]`, ""},
		{"uniqueItems fails on numbers", `{"uniqueItems": true}`, `[1, 2, 1.0]`, `(root): items 0 and 2 are equal (uniqueItems)`},
		{"uniqueItems fails on objects", `{"items": {"uniqueItems": true}}`, `[[{"a": 1, "b": 2}, {"b": 2, "a": 1}]]`, `/0: items 0 and 1 are equal (uniqueItems)`},
		{"uniqueItems false", `{"uniqueItems": false}`, `[1, 1]`, ""},
		{"if/then", ifThenElse, `{"kind": "card", "number": "4111"}`, ""},
		{"if/then fails", ifThenElse, `{"kind": "card", "iban": "DE00"}`, `(root): missing required property "number"`},
		{"if/else", ifThenElse, `{"kind": "bank", "iban": "DE00"}`, ""},
		{"if/else fails", ifThenElse, `{"kind": "bank", "number": "4111"}`, `(root): missing required property "iban"`},
		{"then without if is ignored", `{"then": false}`, `1`, ""},
		{"contains fails", `{"contains": {"type": "string"}}`, `[1, 2]`, `(root): no item matches the schema under "contains"`},
		{"minContains", `{"contains": {"type": "string"}, "minContains": 2}`, `["a", 1, "b"]`, ""},
		{"dependentRequired fails", `{"dependentRequired": {"card": ["cvv"]}}`, `{"card": "4111"}`, `(root): missing property "cvv", required when "card" is present`},
		{"minProperties fails", `{"minProperties": 2}`, `{"a": 1}`, `(root): object has 1 properties, fewer than minProperties 2`},
		{"propertyNames fails", `{"propertyNames": {"pattern": "^[a-z]+$"}}`, `{"ok": 1, "Bad": 2}`, `(root): property name "Bad": "Bad" does not match pattern "^[a-z]+$"`},
		{"unevaluatedProperties fails", `{"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": false}`, `{"a": 1, "b": 2}`, `/b: no value is allowed here (schema false)`},
		{"ref to an anchor", `{"$defs": {"n": {"$anchor": "num", "type": "integer"}}, "$ref": "#num"}`, `"x"`, `(root): got string "x", want integer`},
		{"ref to an embedded $id", `{"$id": "https://example.com/root.json", "$defs": {"n": {"$id": "n.json", "type": "integer"}}, "$ref": "n.json"}`, `"x"`, `(root): got string "x", want integer`},
		{"first violation by location then keyword", `{"properties": {"b": {"type": "string"}, "a": {"type": "string"}, "c": {"minimum": 5}}, "required": ["d"]}`, `{"c": 1, "b": 2, "a": 3, "d": 0}`, `/a: got integer 3, want string`},
		{"a value before its contents", `{"properties": {"a": {"type": "string"}}, "maxProperties": 1}`, `{"a": 1, "b": 2}`, `(root): object has 2 properties, more than maxProperties 1`},
		{"empty schema", `{}`, `[null]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateJSONSchema([]byte(tt.schema), []byte(tt.instance))
			got := ""
			if err != nil {
				got = err.Error()
				var v *ValidationError
				if !errors.As(err, &v) {
					t.Errorf("ValidateJSONSchema(%s, %s) = %v, want a *ValidationError", tt.schema, tt.instance, err)
				}
			}
			if got != tt.want {
				t.Errorf("ValidateJSONSchema(%s, %s) = %q, want %q", tt.schema, tt.instance, got, tt.want)
			}
		})
	}
}

func TestValidateJSONSchemaErrors(t *testing.T) {
	tests := []struct {
		name, schema, instance string
		want                   error
		where                  string // a substring of the message
	}{
		{"schema not JSON", `{"type": `, `1`, ErrSchema, "not JSON"},
		{"schema a number", `5`, `1`, ErrSchema, "(root): got integer 5, want boolean or object"},
		{"type not a string", `{"type": 5}`, `1`, ErrSchema, "/type"},
		{"unknown type", `{"type": "int"}`, `1`, ErrSchema, `/type: matches none of the 2 anyOf schemas (first: /type: "int" is not one of the enum values`},
		{"negative minLength", `{"properties": {"a": {"minLength": -1}}}`, `1`, ErrSchema, "/properties/a/minLength"},
		{"fractional maxItems", `{"maxItems": 1.5}`, `1`, ErrSchema, "/maxItems"},
		{"minimum a string", `{"minimum": "3"}`, `1`, ErrSchema, "/minimum"},
		{"draft-04 exclusiveMinimum needs its $schema", `{"minimum": 5, "exclusiveMinimum": true}`, `5`, ErrSchema, "/exclusiveMinimum: got boolean true, want number"},
		{"draft-07 tuple items need their $schema", `{"items": [{}]}`, `[1]`, ErrSchema, "/items: got array"},
		{"unknown draft", `{"$schema": "http://json-schema.org/draft-99/schema#"}`, `1`, ErrSchema, "draft-99"},
		{"ref to a URL is not fetched", `{"$ref": "https://json-schema.example/person.json"}`, `1`, ErrSchema, "reference to https://json-schema.example/person.json: only local references"},
		{"remote metaschema is not fetched", `{"$schema": "https://json-schema.example/meta"}`, `1`, ErrSchema, "only local references"},
		{"multipleOf zero", `{"multipleOf": 0}`, `1`, ErrSchema, "/multipleOf: 0 is not greater than exclusiveMinimum 0"},
		{"lookahead pattern", `{"pattern": "^(?=a)"}`, `"a"`, ErrSchema, "/pattern: \"^(?=a)\" is not a valid regex: error parsing regexp: invalid or unsupported Perl syntax: `(?=`"},
		{"bad patternProperties", `{"patternProperties": {"(": {}}}`, `{}`, ErrSchema, `/patternProperties: property name "(": "(" is not a valid regex`},
		{"remote ref", `{"$ref": "other.json#/a"}`, `1`, ErrSchema, "reference to other.json: only local references"},
		{"anchor ref", `{"$ref": "#node"}`, `1`, ErrSchema, "$ref #node: no such anchor"},
		{"missing ref", `{"$ref": "#/$defs/nope"}`, `1`, ErrSchema, "$ref /$defs/nope: no such location"},
		{"bad unused def", `{"$defs": {"x": {"type": "float"}}}`, `1`, ErrSchema, "/$defs/x/type"},
		{"ref loop", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}`, `1`, ErrSchema, "/$defs/a: $ref loop"},
		{"empty anyOf", `{"anyOf": []}`, `1`, ErrSchema, "/anyOf: array has 0 items, fewer than minItems 1"},
		{"required not strings", `{"required": [1]}`, `{}`, ErrSchema, "/required"},
		{"instance not JSON", `{}`, `{"a": }`, ErrNotJSON, "not JSON"},
		{"instance empty", `{}`, ``, ErrNotJSON, "empty"},
		{"instance trailing data", `{}`, `1 2`, ErrNotJSON, "after the first value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateJSONSchema([]byte(tt.schema), []byte(tt.instance))
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.where) {
				t.Errorf("ValidateJSONSchema(%s, %s) = %v, want %v mentioning %q", tt.schema, tt.instance, err, tt.want, tt.where)
			}
			var v *ValidationError
			if errors.As(err, &v) {
				t.Errorf("ValidateJSONSchema(%s, %s) = %v, want no *ValidationError", tt.schema, tt.instance, err)
			}
			if tt.want == ErrSchema && errors.Is(err, ErrNotJSON) && tt.name != "schema not JSON" {
				t.Errorf("ValidateJSONSchema(%s, %s) = %v, want no ErrNotJSON", tt.schema, tt.instance, err)
			}
		})
	}
}

func TestValidationErrorPointer(t *testing.T) {
	s, err := CompileJSONSchema([]byte(`{"items": {"properties": {"age": {"minimum": 18}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, instance, pointer string
	}{
		{"nested", `[{"age": 20}, {"age": 3}]`, "/1/age"},
		{"valid", `[{"age": 20}]`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate([]byte(tt.instance))
			var v *ValidationError
			got := ""
			if errors.As(err, &v) {
				got = v.Pointer
			}
			if got != tt.pointer {
				t.Errorf("Validate(%s) pointer = %q, want %q", tt.instance, got, tt.pointer)
			}
		})
	}
}

func TestValidateValue(t *testing.T) {
	s, err := CompileJSONSchema([]byte(`{"type": "integer", "maximum": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		v    any
		want string
	}{
		{"float64 integral", 2.0, ""},
		{"float64 above maximum", 3.0, "(root): 3 is greater than maximum 2"},
		{"float64 fraction", 1.5, "(root): got number 1.5, want integer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := fmt.Sprint(s.ValidateValue(tt.v))
			if tt.want == "" && got == "<nil>" {
				return
			}
			if got != tt.want {
				t.Errorf("ValidateValue(%v) = %s, want %s", tt.v, got, tt.want)
			}
		})
	}
}

func ExampleValidateJSONSchema() {
	schema := []byte(`{
		"type": "object",
		"properties": {"items": {"type": "array", "items": {
			"type": "object",
			"properties": {"age": {"type": "integer", "minimum": 18}},
			"required": ["age"]
		}}}
	}`)
	fmt.Println(ValidateJSONSchema(schema, []byte(`{"items": [{"age": 30}, {"age": 41}, {"age": 17}]}`)))
	fmt.Println(ValidateJSONSchema(schema, []byte(`{"items": [{"age": 30}]}`)))
	// Output:
	// /items/2/age: 17 is less than minimum 18
	// <nil>
}

// TestCompileJSONSchemaReadsNoFile: a $ref to a file that exists is refused
// too; compiling reads nothing but the schema given.
func TestCompileJSONSchemaReadsNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "person.json")
	if err := os.WriteFile(path, []byte(`{"type": "object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + filepath.ToSlash(path), filepath.ToSlash(path)} {
		schema := fmt.Sprintf(`{"$ref": %q}`, ref)
		_, err := CompileJSONSchema([]byte(schema))
		if !errors.Is(err, ErrSchema) || !strings.Contains(fmt.Sprint(err), "only local references") {
			t.Errorf("CompileJSONSchema(%s) = %v, want ErrSchema refusing the reference", schema, err)
		}
	}
}

// TestValidateJSONSchemaDeterministic: the library finds violations in map
// order; the one reported must not depend on it.
func TestValidateJSONSchemaDeterministic(t *testing.T) {
	s, err := CompileJSONSchema([]byte(`{
		"properties": {"p": {"type": "string"}, "q": {"type": "string"}, "r": {"type": "string"}, "s": {"type": "string"}},
		"patternProperties": {"^[a-z]$": {"minimum": 10}, "^[p-s]$": {"maximum": 0}},
		"dependentRequired": {"p": ["x"], "q": ["y"]}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	const want = `(root): missing property "x", required when "p" is present`
	for i := range 200 {
		err := s.Validate([]byte(`{"s": 1, "r": 2, "q": 3, "p": 4}`))
		if got := fmt.Sprint(err); got != want {
			t.Fatalf("Validate, run %d = %s, want %s", i, got, want)
		}
	}
	const wantProp = `/p: got integer 4, want string`
	s, err = CompileJSONSchema([]byte(`{"properties": {"p": {"type": "string"}, "q": {"type": "string"}, "r": {"type": "string"}, "s": {"type": "string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		err := s.Validate([]byte(`{"s": 1, "r": 2, "q": 3, "p": 4}`))
		if got := fmt.Sprint(err); got != wantProp {
			t.Fatalf("Validate, run %d = %s, want %s", i, got, wantProp)
		}
	}
}

// TestParseTasksSchema: a schema that does not compile is an error naming
// the tasks file and line, before anything runs.
func TestParseTasksSchema(t *testing.T) {
	good := `{"prompt": "p", "metric": "json-schema", "schema": {"type": "object", "properties": {"n": {"multipleOf": 2}}}}`
	tests := []struct {
		name, line, where string
	}{
		{"bad keyword value", `{"prompt": "p", "metric": "json-schema", "schema": {"uniqueItems": "yes"}}`, "tasks.jsonl:3: eval: malformed JSON schema: /uniqueItems: got string"},
		{"remote ref", `{"prompt": "p", "metric": "json-schema", "schema": {"$ref": "https://json-schema.example/s.json"}}`, "tasks.jsonl:3: eval: malformed JSON schema: reference to https://json-schema.example/s.json"},
		{"schema as reference", `{"prompt": "p", "metric": "json-schema", "reference": {"type": "int"}}`, "tasks.jsonl:3: eval: malformed JSON schema: /type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := good + "\n# comment\n" + tt.line + "\n"
			_, err := ParseTasks([]byte(data), "tasks.jsonl")
			if !errors.Is(err, ErrTasks) || !errors.Is(err, ErrSchema) || !strings.Contains(fmt.Sprint(err), tt.where) {
				t.Errorf("ParseTasks(%s) = %v, want ErrTasks and ErrSchema mentioning %q", tt.line, err, tt.where)
			}
		})
	}
	suites, err := ParseTasks([]byte(good+"\n"), "tasks.jsonl")
	if err != nil {
		t.Fatalf("ParseTasks(%s) = %v", good, err)
	}
	task := suites[0].Tasks[0]
	for _, c := range []struct {
		output string
		pass   bool
	}{{`{"n": 4}`, true}, {`{"n": 5}`, false}} {
		s, err := ScoreOutput(MetricJSONSchema, c.output, task.Reference, ScoreOptions{Schema: task.Schema})
		if err != nil || s.Pass != c.pass {
			t.Errorf("ScoreOutput(json-schema, %s) = %+v, %v, want Pass %v", c.output, s, err, c.pass)
		}
	}
}
