package jsonrpc

import (
	"math"
	"strings"
	"testing"
)

func TestArgVerdictCoversEveryReading(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	inf := math.Inf(1)
	for _, c := range []struct {
		name    string
		body    string
		max     float64
		numeric bool
		present bool
	}{
		{"number", call(`{"limit":25}`), 25, true, true},
		{"negative_fraction", call(`{"limit":-2.5e0}`), -2.5, true, true},
		{"string_number_is_not_numeric", call(`{"limit":"100"}`), 0, false, true},
		{"bool_is_not_numeric", call(`{"limit":true}`), 0, false, true},
		{"object_is_not_numeric", call(`{"limit":{"n":1}}`), 0, false, true},
		{"array_is_not_numeric", call(`{"limit":[100]}`), 0, false, true},
		{"duplicate_key_hides_100_behind_10", call(`{"limit":100,"limit":10}`), 100, true, true},
		{"duplicate_key_hides_100_after_10", call(`{"limit":10,"limit":100}`), 100, true, true},
		{"number_and_string_readings", call(`{"limit":10,"limit":"1000"}`), 10, false, true},
		{"key_case_insensitive", call(`{"LIMIT":100}`), 100, true, true},
		{"key_escaped", call(`{"l\u0069mit":100}`), 100, true, true},
		{"null_is_not_present", call(`{"limit":null}`), 0, true, false},
		{"null_beside_number", call(`{"limit":null,"limit":3}`), 3, true, true},
		{"null_before_a_space", call(`{"limit":null }`), 0, true, false},
		{"absent", call(`{"other":100}`), 0, true, false},
		{"nested_key_is_not_the_argument", call(`{"q":{"limit":100}}`), 0, true, false},
		{"overflow_is_plus_inf", call(`{"limit":1e400}`), inf, true, true},
		{"negative_overflow", call(`{"limit":-1e400}`), math.Inf(-1), true, true},
		// strconv.ParseFloat alone reads this 1000000 as 0.1.
		{"integer_part_past_800_digits", call(`{"limit":1000000` + strings.Repeat("0", 800) + `e-800}`), 1e6, true, true},
		// And a Go backend reads this -1000000 as -0.1: the larger reading.
		{"negative_past_800_digits", call(`{"limit":-1000000` + strings.Repeat("0", 800) + `e-800}`), -0.1, true, true},
		{"duplicate_arguments", `{"params":{"arguments":{"limit":1},"arguments":{"limit":50}}}`, 50, true, true},
		{"duplicate_params", `{"params":{"arguments":{"limit":70}},"Params":{"Arguments":{"limit":5}}}`, 70, true, true},
		// Jackson with UNWRAP_SINGLE_VALUE_ARRAYS reads [{...}] as {...}.
		{"arguments_in_an_array", `{"params":{"arguments":[{"limit":70}]}}`, 70, true, true},
		{"params_in_an_array", `{"params":[{"arguments":{"limit":70}}]}`, 70, true, true},
		{"arguments_in_a_nested_array", `{"params":{"arguments":[[{"limit":70}]]}}`, 0, true, false},
		// Params by position: ["tool", {arguments}].
		{"params_by_position", `{"params":["x",{"limit":70}]}`, 70, true, true},
		{"params_by_position_scalar_arguments", `{"params":["x",70]}`, 0, true, false},
		{"params_by_position_third_element", `{"params":["x",{},{"limit":70}]}`, 0, true, false},
		{"params_by_position_arguments_in_an_array", `{"params":["x",[{"limit":70}]]}`, 70, true, true},
		{"params_by_position_arguments_nested_deeper", `{"params":["x",[[{"limit":70}]]]}`, 0, true, false},
		// A scalar is no arguments object: not walked as one.
		{"number_arguments", `{"params":{"arguments":5}}`, 0, true, false},
		{"string_arguments", `{"params":{"arguments":"limit"}}`, 0, true, false},
		{"literal_arguments", `{"params":{"arguments":true}}`, 0, true, false},
		{"null_arguments", `{"params":{"arguments":null}}`, 0, true, false},
		{"number_arguments_beside_an_object", `{"params":{"arguments":7,"arguments":{"limit":4}}}`, 4, true, true},
		{"whitespace_everywhere", call(" { \"x\" : [ 1 , { \"limit\" : 9 } ] , \"limit\" : 8 } "), 8, true, true},
		{"string_values_with_braces", call(`{"a":"}{\"limit\":99","limit":2}`), 2, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := parse(t, c.body)
			if !r.Valid() {
				t.Fatalf("test body is invalid")
			}
			max, numeric, present := r.Entry(0).Arg("limit")
			if max != c.max || numeric != c.numeric || present != c.present {
				t.Errorf("Arg = (%v, %v, %v), want (%v, %v, %v)", max, numeric, present, c.max, c.numeric, c.present)
			}
		})
	}
}

func TestArgKeyFoldsLikeEncodingJSON(t *testing.T) {
	// The Kelvin sign K folds to k, the long s ſ to s.
	r := parse(t, `{"params":{"arguments":{"to\u212aen\u017f":12}}}`)
	if max, numeric, present := r.Entry(0).Arg("tokens"); max != 12 || !numeric || !present {
		t.Errorf("Arg(tokens) = (%v, %v, %v)", max, numeric, present)
	}
	r = parse(t, `{"params":{"arguments":{"tokens":12}}}`)
	if max, _, present := r.Entry(0).Arg("TO\u212aENS"); max != 12 || !present {
		t.Errorf("Arg(TOKENS with Kelvin) = (%v, %v)", max, present)
	}
}

// Jackson decodes an overlong UTF-8 sequence in a key: "limi\xC1\xB4" is
// limit (see TestCostOverlongUTF8IsReadAsJacksonReadsIt).
func TestArgOverlongKeyIsReadAsJacksonReadsIt(t *testing.T) {
	for _, key := range []string{"limi\xc1\xb4", "limi\xe0\x81\xb4", "l\\u0069mi\xc1\xb4"} {
		r := parse(t, `{"method":"tools/call","params":{"name":"search","arguments":{"`+key+`":5000}}}`)
		if max, numeric, present := r.Entry(0).Arg("limit"); max != 5000 || !numeric || !present {
			t.Errorf("%q: Arg(limit) = (%v, %v, %v), want (5000, true, true)", key, max, numeric, present)
		}
	}
}

// JavaScript and Python read a cut-off UTF-8 sequence in a key as one
// U+FFFD (see TestCostCutOffUTF8IsReadAsJavaScriptReadsIt).
func TestArgCutOffUTF8KeyIsReadAsJavaScriptReadsIt(t *testing.T) {
	for _, key := range []string{"\xf0\x9f\x98size", "\xe2\x82size", "\xef\xbf\xbdsize"} {
		r := parse(t, `{"method":"tools/call","params":{"name":"search","arguments":{"`+key+`":5000}}}`)
		if max, numeric, present := r.Entry(0).Arg("\uFFFDsize"); max != 5000 || !numeric || !present {
			t.Errorf("%q: Arg(\uFFFDsize) = (%v, %v, %v), want (5000, true, true)", key, max, numeric, present)
		}
	}
}

// encoding/json/v2 with MatchCaseInsensitiveNames ignores dashes and
// underscores, in the key and in the name looked for.
func TestArgKeyMatchesWithoutSeparators(t *testing.T) {
	for _, c := range []struct{ key, name string }{
		{"li_mit", "limit"},
		{"LI-MIT", "limit"},
		{"topk", "top_k"},
		{"TOP-K", "top_k"},
		{"top__k", "top-k"},
	} {
		r := parse(t, `{"method":"tools/call","params":{"arguments":{"`+c.key+`":5000}}}`)
		if max, numeric, present := r.Entry(0).Arg(c.name); max != 5000 || !numeric || !present {
			t.Errorf("%s for %s: Arg = (%v, %v, %v), want (5000, true, true)", c.key, c.name, max, numeric, present)
		}
	}
	r := parse(t, `{"params":{"arguments":{"lim_its":5000}}}`)
	if _, _, present := r.Entry(0).Arg("limit"); present {
		t.Error("lim_its read as limit")
	}
}

// lenientArgCase is a body only a lenient parser reads, and the verdict
// Arg("limit") must give on it (always present).
type lenientArgCase struct {
	name    string
	body    string
	max     float64
	numeric bool
}

func runLenientArgCases(t *testing.T, cases []lenientArgCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := parse(t, c.body)
			if r.Valid() {
				t.Fatalf("test body is valid JSON")
			}
			// Over every scanned entry, as the handler checks them: a body
			// read two ways has an entry per reading.
			max, numeric, present := math.Inf(-1), true, false
			for i := range r.Scanned() {
				if m, n, p := r.Entry(i).Arg("limit"); p {
					max, numeric, present = math.Max(max, m), numeric && n, true
				}
			}
			if max != c.max || numeric != c.numeric || !present {
				t.Errorf("Arg = (%v, %v, %v), want (%v, %v, true)", max, numeric, present, c.max, c.numeric)
			}
		})
	}
}

func TestArgUnquotedKeysAndValuesAreReadings(t *testing.T) {
	call := func(args string) string {
		return `{method:tools/call,params:{name:search,arguments:` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		{"unquoted_key", call(`{limit:5000}`), 5000, true},
		{"unquoted_key_quoted_value_elsewhere", call(`{"q":"x",LIMIT : 70,other:1}`), 70, true},
		{"unquoted_string_value", call(`{limit:many}`), 0, false},
		{"unquoted_value_starting_like_a_number", call(`{limit:5e}`), 0, false},
		{"digits_with_underscore", call(`{limit:1_000}`), 0, false},
		// Only null itself is null: an unquoted string that starts as it
		// does (a string to Hjson) is not, nor is nan a number.
		{"unquoted_n", call(`{limit:n}`), 0, false},
		{"unquoted_nope", call(`{limit:nope}`), 0, false},
		{"unquoted_nul", call(`{limit:nul}`), 0, false},
		{"unquoted_nullx", call(`{limit:nullx}`), 0, false},
		{"unquoted_nan", call(`{limit:nan }`), 0, false},
		{"unquoted_nope_beside_a_number", call(`{limit:nope,limit:3}`), 3, false},
		{"unknown_escape_in_the_key", call(`{"\limit":1000}`), 1000, true},
		{"raw_control_byte_beside", call("{\"limit\":1000,\"text\":\"a\nb\"}"), 1000, true},
	})
}

func TestArgCommentsAreWhitespace(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		{"around_the_member", call(`{/* c */"limit"/* c */:/* c */500/* c */}`), 500, true},
		{"line_comment", call("{// c\n\"limit\":500}"), 500, true},
		{"brackets_and_quotes_in_a_comment", call(`{"q":[1,/* ] } " */2],"limit":500}`), 500, true},
		// Read leniently, 5/*0*/ is an unquoted string: not a number.
		{"number_then_comment", call(`{"limit":5/*0*/}`), 5, false},
		{"hash_comment", call("{\"limit\":1,#x\n\"limit\":500}"), 500, true},
		{"line_comment_ended_by_cr", call("{ // c\r\"limit\":500}"), 500, true},
	})
}

func TestArgTrailingCommaIsReadPast(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		{"after_the_argument", call(`{"limit":500,}`), 500, true},
		{"before_the_argument", call(`{"x":[1,],"limit":500}`), 500, true},
		{"missing_values_before", call(`{"x":[,,],"limit":500}`), 500, true},
	})
}

func TestArgSingleQuotedKeysAreReadings(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		{"quoted_key", call(`{'limit':500}`), 500, true},
		{"structural_bytes_in_a_quoted_value", call(`{'q':'a,"limit":1}','limit':500}`), 500, true},
		{"quoted_value", call(`{'limit':'5'}`), 0, false},
		{"quoted_key_with_a_comment", call("{'x':'#',#c\n'limit':500}"), 500, true},
	})
}

func TestArgJSON5SyntaxIsAReading(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		{"hex_escape_in_a_key", call(`{"li\x6dit":1000}`), 1000, true},
		{"hex_escape_in_a_single_quoted_key", call(`{'li\x6dit':1000}`), 1000, true},
		{"line_continuation_in_a_key", call("{\"lim\\\nit\":1000}"), 1000, true},
		{"escape_in_an_unquoted_key", call(`{li\u006dit:1000}`), 1000, true},
		// The first reading takes "\u00a01000" for an unquoted string.
		{"no_break_space_before_the_value", call("{\"limit\":\u00a01000}"), 1000, false},
		{"form_feed_before_the_key", call("{\f\"limit\":1000}"), 1000, true},
	})
}

func TestArgReadsAsCParsersAndCaseMappingParsersDo(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		{"escaped_nul_in_the_key", call(`{"limit\u0000":1000,"x":NaN}`), 1000, true},
		{"raw_nul_in_the_key", call("{\"limit\x00x\":1000}"), 1000, true},
		{"missing_comma_before_the_key", call(`{"q":"a" "limit":1000}`), 1000, true},
		{"missing_colon_after_the_key", call(`{"limit" 1000}`), 1000, true},
		{"bad_u_escape_before_the_key", call(`{"q":"\uZZ","limit":1000}`), 1000, true},
	})
	for _, key := range []string{"l\u0130mit", "l\u0131mit", "L\u0130MIT", "lim\u0131t"} {
		r := parse(t, call(`{"`+key+`":1000}`))
		if max, numeric, present := r.Entry(0).Arg("limit"); max != 1000 || !numeric || !present {
			t.Errorf("%q: Arg(limit) = (%v, %v, %v), want 1000 as sonic and .NET read it", key, max, numeric, present)
		}
	}
}

// A member whose value is missing is read past, not crashed on, and is no
// reading of its own.
func TestArgMissingValueIsNoReading(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	for _, args := range []string{`{"limit":}`, `{"limit":}1000}`} {
		r := parse(t, call(args))
		for i := range r.Scanned() {
			if _, _, present := r.Entry(i).Arg("limit"); present {
				t.Errorf("%s: a missing value is read as present", args)
			}
		}
	}
}

func TestArgProtoMembersAreArguments(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	for _, args := range []string{
		`{"__proto__":{"limit":1000}}`,
		`{"q":"x","__proto__":{"a":1,"__proto__":{"limit":1000}},"b":2}`,
		`{"__proto__":{},"limit":1000}`,
	} {
		r := parse(t, call(args))
		if max, numeric, present := r.Entry(0).Arg("limit"); max != 1000 || !numeric || !present {
			t.Errorf("%s: Arg(limit) = (%v, %v, %v), want 1000", args, max, numeric, present)
		}
	}
}

// The arguments walk reads a lenient object's tokens as the scanner does
// (here a missing colon and comma around a quote), and never past the
// object's end: these crashed the handler.
func TestArgWalkStaysInTheObject(t *testing.T) {
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"limi"id":7,t":1}}},{"jsonrpc":"2.0","id":3,"result":{}}]`,
		`{"method":"tools/call","params":{"name":"search","arguments":{"limit" x"y":1000}}}`,
		`{"method":"tools/call","params":{"name":"search","arguments":{"a" b\"c":1}}}`,
		// A live fuzzer's: the first looped forever, the others panicked.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"a":1,"b,"x":{"y":[]}}e":5}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"search","arguments":{"limit":100,"pag,"result":{"roots":[]}}e":5,"x":"\u00e9\ud83d\ude00"}}}`,
		`{"method":"tools/call","params":{"name":"search","arguments":{"a"b":7,c":1}}}`,
		`{"method":"tools/call","params":{"name":"search","arguments":{"a"b":7,c":}}}`,
		`{"method":"tools/call","params":{"name":"search","arguments":{"a"b":7,c":1}`,
		`{""""""1"method""tools/call""params"{"name""search""arguments"{""d",":}`,
	} {
		r := parse(t, body)
		for i := range r.Scanned() {
			r.Entry(i).Arg("limit")
			r.Entry(i).Arg("t")
		}
	}
}

// The walk stops where no token starts rather than loop there, whatever
// bytes it is given.
func TestArgWalkStopsWhereNoTokenStarts(t *testing.T) {
	var r Request
	for _, obj := range []string{`{"a" \}`, `{\`, `{"a":\`, `{"a"`, `{"limit":1,`} {
		v := argVerdict{numeric: true}
		r.argIn([]byte(obj), 0, "limit", false, &v)
	}
}
