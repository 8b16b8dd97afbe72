package eval

import (
	"errors"
	"fmt"
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
		{"type list fails", `{"type": ["string", "null"]}`, `1`, `(root): got integer 1, want string or null`},
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
		{"draft-04 exclusiveMinimum", `{"minimum": 5, "exclusiveMinimum": true}`, `5`, `(root): 5 is not greater than exclusiveMinimum 5`},
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
		{"draft-07 tuple items", `{"items": [{"type": "string"}], "additionalItems": false}`, `["a", 1]`, `/1: no value is allowed here (schema false)`},
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
		{"unknown keywords ignored", `{"format": "email", "uniqueItems": true, "x-custom": 1}`, `"not an email"`, ""},
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
		{"schema a number", `5`, `1`, ErrSchema, "must be an object or a boolean"},
		{"type not a string", `{"type": 5}`, `1`, ErrSchema, "/type"},
		{"unknown type", `{"type": "int"}`, `1`, ErrSchema, `unknown type "int"`},
		{"negative minLength", `{"properties": {"a": {"minLength": -1}}}`, `1`, ErrSchema, "/properties/a/minLength"},
		{"fractional maxItems", `{"maxItems": 1.5}`, `1`, ErrSchema, "/maxItems"},
		{"minimum a string", `{"minimum": "3"}`, `1`, ErrSchema, "/minimum"},
		{"lookahead pattern", `{"pattern": "^(?=a)"}`, `"a"`, ErrSchema, "RE2"},
		{"bad patternProperties", `{"patternProperties": {"(": {}}}`, `{}`, ErrSchema, "/patternProperties/("},
		{"remote ref", `{"$ref": "other.json#/a"}`, `1`, ErrSchema, "only local references"},
		{"anchor ref", `{"$ref": "#node"}`, `1`, ErrSchema, "anchors"},
		{"missing ref", `{"$ref": "#/$defs/nope"}`, `1`, ErrSchema, "no such location"},
		{"bad unused def", `{"$defs": {"x": {"type": "float"}}}`, `1`, ErrSchema, "/$defs/x/type"},
		{"ref loop", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}`, `1`, ErrSchema, "loop"},
		{"empty anyOf", `{"anyOf": []}`, `1`, ErrSchema, "must not be empty"},
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
