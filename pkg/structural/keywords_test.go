package structural

import (
	"reflect"
	"testing"
)

// keywordCases validate {x: <value>} against {type: object, properties:
// {x: <schema>}}; want is the exact error list (v1.33's Error() strings,
// in order).
// Every case is also checked against upstream (as a set, since upstream's
// order between siblings is random).
var keywordCases = []struct {
	name   string
	schema string
	value  string
	want   []string
}{
	// type
	{"type integer ok", `type: integer`, `42`, nil},
	{"type integer from float", `type: integer`, `2.0`, nil},
	{"type integer string", `type: integer`, `"1"`, []string{
		`x: Invalid value: "string": x in body must be of type integer: "string"`}},
	// v1.33's number validator has no type or format: no "Checked value
	// must be of type integer" error after the type error.
	{"type integer fraction", `type: integer`, `1.5`, []string{
		`x: Invalid value: "number": x in body must be of type integer: "number"`}},
	{"type integer beyond int64", `type: integer`, `9223372036854775808`, []string{
		`x: Invalid value: "number": x in body must be of type integer: "number"`}},
	{"type number int", `type: number`, `1`, nil},
	{"type number string", `type: number`, `"1"`, []string{
		`x: Invalid value: "string": x in body must be of type number: "string"`}},
	{"type string int", `type: string`, `1`, []string{
		`x: Invalid value: "integer": x in body must be of type string: "integer"`}},
	{"type string float", `type: string`, `1.5`, []string{
		`x: Invalid value: "number": x in body must be of type string: "number"`}},
	{"type boolean", `type: boolean`, `"true"`, []string{
		`x: Invalid value: "string": x in body must be of type boolean: "string"`}},
	{"type object", `type: object`, `[]`, []string{
		`x: Invalid value: "array": x in body must be of type object: "array"`}},
	{"type array", `type: array`, `{}`, []string{
		`x: Invalid value: "object": x in body must be of type array: "object"`}},
	{"null", `type: string`, `null`, []string{
		`x: Invalid value: "null": x in body must be of type string: "null"`}},
	{"nullable", `{type: string, nullable: true}`, `null`, nil},
	{"int-or-string int", `{x-kubernetes-int-or-string: true}`, `1`, nil},
	{"int-or-string string", `{x-kubernetes-int-or-string: true}`, `"1%"`, nil},
	{"int-or-string bool", `{x-kubernetes-int-or-string: true}`, `true`, []string{
		`x: Invalid value: "boolean": x in body must be of type integer,string: "boolean"`}},
	{"int-or-string fraction", `{x-kubernetes-int-or-string: true}`, `1.5`, []string{
		`x: Invalid value: "number": x in body must be of type integer,string: "number"`}},
	{"int-or-string anyOf", `{x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}`, `[]`, []string{
		`x: Invalid value: "array": x in body must be of type integer,string: "array"`,
		`<nil>: Invalid value: "": "x" must validate at least one schema (anyOf)`,
		`x: Invalid value: "array": x in body must be of type integer: "array"`}},
	{"int-or-string pattern", `{x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}], pattern: '^\d+%$'}`, `"5"`, []string{
		`x: Invalid value: "5": x in body should match '^\d+%$'`}},

	// enum
	{"enum ok", `{type: string, enum: [a, b]}`, `b`, nil},
	{"enum string", `{type: string, enum: [a, b]}`, `c`, []string{
		`x: Unsupported value: "c": supported values: "a", "b"`}},
	{"enum int", `{type: integer, enum: [1, 2]}`, `3`, []string{
		`x: Unsupported value: 3: supported values: "1", "2"`}},
	{"enum int float", `{type: number, enum: [1, 2.5]}`, `2.5`, nil},
	{"enum object", `{type: object, enum: [{a: 1}]}`, `{a: 2}`, []string{
		`x: Unsupported value: map[string]interface {}{"a":2}: supported values: "{\"a\":1}"`}},
	{"enum null", `{type: string, nullable: true, enum: [a]}`, `null`, []string{
		`x: Unsupported value: "null": supported values: "a"`}},

	// strings
	{"pattern", `{type: string, pattern: '^a+$'}`, `ab`, []string{
		`x: Invalid value: "ab": x in body should match '^a+$'`}},
	{"maxLength", `{type: string, maxLength: 3}`, `abcd`, []string{
		`x: Too long: may not be more than 3 bytes`}},
	{"maxLength runes", `{type: string, maxLength: 3}`, `äöü`, nil},
	{"maxLength 1", `{type: string, maxLength: 1}`, `ab`, []string{
		`x: Too long: may not be more than 1 bytes`}},
	{"minLength", `{type: string, minLength: 2}`, `a`, []string{
		`x: Invalid value: "a": x in body should be at least 2 chars long`}},
	{"maxLength before pattern", `{type: string, maxLength: 1, pattern: '^a$'}`, `bb`, []string{
		`x: Too long: may not be more than 1 bytes`}},

	// numbers
	{"maximum", `{type: integer, maximum: 10}`, `15`, []string{
		`x: Invalid value: 15: x in body should be less than or equal to 10`}},
	{"maximum ok", `{type: integer, maximum: 10}`, `10`, nil},
	{"exclusiveMaximum", `{type: integer, maximum: 10, exclusiveMaximum: true}`, `10`, []string{
		`x: Invalid value: 10: x in body should be less than 10`}},
	{"minimum", `{type: integer, minimum: 1}`, `0`, []string{
		`x: Invalid value: 0: x in body should be greater than or equal to 1`}},
	{"exclusiveMinimum", `{type: integer, minimum: 1, exclusiveMinimum: true}`, `1`, []string{
		`x: Invalid value: 1: x in body should be greater than 1`}},
	{"min and max", `{type: integer, minimum: 5, maximum: 1}`, `3`, []string{
		`x: Invalid value: 3: x in body should be greater than or equal to 5`,
		`x: Invalid value: 3: x in body should be less than or equal to 1`}},
	{"maximum float", `{type: number, maximum: 1.5}`, `1.75`, []string{
		`x: Invalid value: 1.75: x in body should be less than or equal to 1.5`}},
	{"maximum large float", `{type: number, maximum: 1000000}`, `1000000.5`, []string{
		`x: Invalid value: 1.0000005e+06: x in body should be less than or equal to 1e+06`}},
	// An int64 value compares with the bound truncated to int64, as v1.33
	// (MaximumNativeType); the v0.37 library checks the bound's range
	// first and compares as floats.
	{"maximum fractional bound on integer", `{type: integer, maximum: 1.5}`, `2`, []string{
		`x: Invalid value: 2: x in body should be less than or equal to 1`}},
	{"minimum fractional bound on integer", `{type: integer, minimum: 1.5}`, `1`, nil},
	{"multipleOf int", `{type: integer, multipleOf: 2}`, `3`, []string{
		`x: Invalid value: 3: x in body should be a multiple of 2`}},
	{"multipleOf float", `{type: number, multipleOf: 0.1}`, `0.3`, nil},
	{"multipleOf float fail", `{type: number, multipleOf: 0.25}`, `0.3`, []string{
		`x: Invalid value: 0.3: x in body should be a multiple of 0.25`}},
	// v1.33 strips every format not in its list (int32, int64, float and
	// double included) before validating.
	{"int32 overflow", `{type: integer, format: int32}`, `3000000000`, nil},
	{"int32 beyond", `{type: integer, format: int32}`, `2147483648`, nil},
	{"int32 fraction", `{type: integer, format: int32}`, `1.5`, []string{
		`x: Invalid value: "number": x in body must be of type integer: "number"`}},
	{"int64 ok", `{type: integer, format: int64}`, `9007199254740993`, nil},
	{"float overflow", `{type: number, format: float}`, `1e39`, nil},
	{"float 1e300", `{type: number, format: float}`, `1e300`, nil},
	{"double ok", `{type: number, format: double}`, `1e39`, nil},
	{"unsupported integer format ignored", `{type: integer, format: uint8}`, `300`, nil},
	{"no-such-format ignored", `{type: string, format: no-such-format}`, `x`, nil},
	{"string format on an integer node kept", `{type: integer, format: date}`, `5`, nil},
	{"string format on an integer node, string value", `{type: integer, format: date}`, `"x"`, []string{
		`x: Invalid value: "string": x in body must be of type integer: "string"`,
		`x: Invalid value: "x": x in body must be of type date: "x"`}},

	// string formats
	{"date", `{type: string, format: date}`, `2020-13-01`, []string{
		`x: Invalid value: "2020-13-01": x in body must be of type date: "2020-13-01"`}},
	{"date ok", `{type: string, format: date}`, `2020-12-01`, nil},
	{"date-time", `{type: string, format: date-time}`, `yesterday`, []string{
		`x: Invalid value: "yesterday": x in body must be of type date-time: "yesterday"`}},
	{"date-time ok", `{type: string, format: date-time}`, `2017-05-31T12:56:35Z`, nil},
	{"byte", `{type: string, format: byte}`, `not base64!`, []string{
		`x: Invalid value: "not base64!": x in body must be of type byte: "not base64!"`}},
	{"byte ok", `{type: string, format: byte}`, `aGVsbG8=`, nil},
	{"uuid", `{type: string, format: uuid}`, `nope`, []string{
		`x: Invalid value: "nope": x in body must be of type uuid: "nope"`}},
	{"ipv4", `{type: string, format: ipv4}`, `1.2.3`, []string{
		`x: Invalid value: "1.2.3": x in body must be of type ipv4: "1.2.3"`}},
	// k8s-short-name and k8s-long-name came in 1.34.
	{"k8s-short-name ignored", `{type: string, format: k8s-short-name}`, `Not_A_Name`, nil},
	{"k8s-long-name ignored", `{type: string, format: k8s-long-name}`, `Not_A_Name`, nil},
	{"unknown format ignored", `{type: string, format: frobnicate}`, `anything`, nil},
	{"string format on integer", `{type: string, format: date}`, `5`, []string{
		`x: Invalid value: "int64": x in body must be of type date: "int64"`}},

	// arrays
	{"items", `{type: array, items: {type: integer}}`, `[1, "a", 3]`, []string{
		`x[1]: Invalid value: "string": x[1] in body must be of type integer: "string"`}},
	{"minItems", `{type: array, minItems: 2, items: {type: integer}}`, `[1]`, []string{
		`x: Invalid value: 1: x in body should have at least 2 items`}},
	{"maxItems", `{type: array, maxItems: 2, items: {type: integer}}`, `[1, 2, 3]`, []string{
		`x: Too many: 3: must have at most 2 items`}},
	{"uniqueItems", `{type: array, uniqueItems: true, items: {type: integer}}`, `[1, 2, 1]`, []string{
		`x: Invalid value: "": x in body shouldn't contain duplicates`}},
	{"list-type set", `{type: array, x-kubernetes-list-type: set, items: {type: string}}`, `[a, b, a, a, b]`, []string{
		`x[2]: Duplicate value: "a"`, `x[4]: Duplicate value: "b"`}},
	{"list-type set objects", `{type: array, x-kubernetes-list-type: set, items: {type: object, x-kubernetes-map-type: atomic, x-kubernetes-preserve-unknown-fields: true}}`, `[{a: 1}, {a: 1}]`, []string{
		`x[1]: Duplicate value: map[string]interface {}{"a":1}`}},
	{"list-type map", `{type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [name], items: {type: object, required: [name], properties: {name: {type: string}, v: {type: integer}}}}`,
		`[{name: a, v: 1}, {name: b}, {name: a, v: 2}]`, []string{
			`x[2]: Duplicate value: map[string]interface {}{"name":"a"}`}},
	{"list-type map two keys", `{type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [name, port], items: {type: object, properties: {name: {type: string}, port: {type: integer}}}}`,
		`[{name: a, port: 1}, {name: a, port: 2}, {name: a, port: 1}]`, []string{
			`x[2]: Duplicate value: map[string]interface {}{"name":"a", "port":1}`}},

	// objects
	{"required", `{type: object, required: [b, a], properties: {a: {type: string}, b: {type: string}}}`, `{}`, []string{
		`x.b: Required value`, `x.a: Required value`}},
	{"properties", `{type: object, properties: {b: {type: string}, a: {type: integer}}}`, `{a: x, b: 1}`, []string{
		`x.a: Invalid value: "string": x.a in body must be of type integer: "string"`,
		`x.b: Invalid value: "integer": x.b in body must be of type string: "integer"`}},
	{"additionalProperties", `{type: object, additionalProperties: {type: integer, maximum: 3}}`, `{k: 4, j: 1}`, []string{
		`x.k: Invalid value: 4: x.k in body should be less than or equal to 3`}},
	{"minProperties", `{type: object, minProperties: 2, additionalProperties: {type: string}}`, `{a: b}`, []string{
		`x: Invalid value: 1: x in body should have at least 2 properties`}},
	{"maxProperties", `{type: object, maxProperties: 1, additionalProperties: {type: string}}`, `{a: b, c: d}`, []string{
		`x: Too many: 2: must have at most 1 items`}},

	// junctors
	{"allOf", `{type: integer, allOf: [{minimum: 5}, {maximum: 7}]}`, `3`, []string{
		`x: Invalid value: 3: x in body should be greater than or equal to 5`,
		`<nil>: Invalid value: "": "x" must validate all the schemas (allOf)`}},
	{"allOf none", `{type: integer, allOf: [{minimum: 5}, {maximum: 1}]}`, `3`, []string{
		`x: Invalid value: 3: x in body should be greater than or equal to 5`,
		`x: Invalid value: 3: x in body should be less than or equal to 1`,
		`<nil>: Invalid value: "": "x" must validate all the schemas (allOf). None validated`}},
	{"anyOf", `{type: integer, anyOf: [{minimum: 5}, {maximum: 1}]}`, `3`, []string{
		`<nil>: Invalid value: "": "x" must validate at least one schema (anyOf)`,
		`x: Invalid value: 3: x in body should be greater than or equal to 5`}},
	{"anyOf ok", `{type: integer, anyOf: [{minimum: 5}, {maximum: 3}]}`, `3`, nil},
	{"oneOf none", `{type: integer, oneOf: [{minimum: 5}, {maximum: 1}]}`, `3`, []string{
		`<nil>: Invalid value: "": "x" must validate one and only one schema (oneOf). Found none valid`,
		`x: Invalid value: 3: x in body should be greater than or equal to 5`}},
	{"oneOf two", `{type: integer, oneOf: [{minimum: 1}, {maximum: 5}]}`, `3`, []string{
		`<nil>: Invalid value: "": "x" must validate one and only one schema (oneOf). Found 2 valid alternatives`}},
	{"not", `{type: string, not: {enum: [bad]}}`, `bad`, []string{
		`<nil>: Invalid value: "": "x" must not validate the schema (not)`}},
	{"anyOf required", `{type: object, properties: {a: {type: string}, b: {type: string}}, anyOf: [{required: [a]}, {required: [b]}]}`, `{}`, []string{
		`<nil>: Invalid value: "": "x" must validate at least one schema (anyOf)`,
		`x.a: Required value`}},
	{"oneOf properties best match", `{type: object, properties: {a: {type: string}, b: {type: integer}}, oneOf: [{properties: {a: {enum: [x]}}}, {properties: {a: {minLength: 5}, b: {maximum: 1}}}]}`, `{a: "y", b: 3}`, []string{
		`<nil>: Invalid value: "": "x" must validate one and only one schema (oneOf). Found none valid`,
		`x.a: Invalid value: "y": x.a in body should be at least 5 chars long`,
		`x.b: Invalid value: 3: x.b in body should be less than or equal to 1`}},
}

// notUpstream are the keyword cases that do not compare with the v0.37
// library, where it differs from v1.33, and why.
var notUpstream = map[string]string{
	"maximum fractional bound on integer": "v0.37 checks the bound's range first, then compares 2 > 1.5 as floats",
	"minimum fractional bound on integer": "v0.37 checks the bound's range first, then compares 1 < 1.5 as floats",
}

func keywordSchema(t *testing.T, src string) string {
	t.Helper()
	if src[0] != '{' {
		src = "{" + src + "}"
	}
	return "type: object\nproperties:\n  x: " + src + "\n"
}

func TestKeywords(t *testing.T) {
	for _, tc := range keywordCases {
		t.Run(tc.name, func(t *testing.T) {
			props := parseProps(t, keywordSchema(t, tc.schema))
			s := mustCompile(t, props)
			obj := map[string]any{"x": parseYAML(t, tc.value)}
			got := errorStrings(Validate(deepCopy(obj), s))
			if !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
			if notUpstream[tc.name] != "" {
				return
			}
			up := errorStrings(newUpstream(t, props).validate(deepCopy(obj)))
			if !reflect.DeepEqual(sortedStrings(got), sortedStrings(up)) {
				t.Errorf("differs from upstream:\n      got %q\n upstream %q", got, up)
			}
		})
	}
}
