package jsonrpc

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// costCase is a body, its cost under toolsCallMeter and tableCost, and
// whether it is valid JSON.
type costCase struct {
	name  string
	body  string
	cost  int64
	valid bool
}

func runCostCases(t *testing.T, cases []costCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := parse(t, c.body)
			if got := r.Valid(); got != c.valid {
				t.Errorf("Valid() = %v, want %v", got, c.valid)
			}
			if got := r.Cost(toolsCallMeter, tableCost); got != c.cost {
				t.Errorf("Cost() = %d, want %d", got, c.cost)
			}
		})
	}
}

func TestCostDuplicateKeysAreAllReadings(t *testing.T) {
	runCostCases(t, []costCase{
		{"method/tools_call_last", `{"method":"tools/list","method":"tools/call"}`, 1, true},
		{"method/tools_call_first", `{"method":"tools/call","method":"tools/list"}`, 1, true},
		{"method/non_string_hides_nothing", `{"method":"tools/call","method":null}`, 1, true},
		{"params/costly_last", `{"method":"tools/call","params":{"name":"echo"},"params":{"name":"big"}}`, 5, true},
		{"params/costly_first", `{"method":"tools/call","params":{"name":"big"},"params":{"name":"echo"}}`, 5, true},
		{"params/null_after_object", `{"method":"tools/call","params":{"name":"big"},"params":null}`, 5, true},
		{"name/costly_last", `{"method":"tools/call","params":{"name":"echo","name":"big"}}`, 5, true},
		{"name/costly_first", `{"method":"tools/call","params":{"name":"big","name":"echo"}}`, 5, true},
		{"params_before_method", `{"params":{"name":"photo"},"method":"tools/list","method":"tools/call"}`, 3, true},
	})
}

func TestCostKeysMatchCaseInsensitivelyLikeEncodingJSON(t *testing.T) {
	runCostCases(t, []costCase{
		{"Method", `{"Method":"tools/call"}`, 1, true},
		{"METHOD", `{"METHOD":"tools/call"}`, 1, true},
		{"mEtHoD_hides_behind_method", `{"method":"tools/list","mEtHoD":"tools/call"}`, 1, true},
		{"Params_and_Name", `{"method":"tools/call","Params":{"Name":"big"}}`, 5, true},
		{"PARAMS_and_NAME", `{"method":"tools/call","PARAMS":{"NAME":"photo"}}`, 3, true},
		{"long_s_folds_to_s", `{"method":"tools/call","param\u017f":{"name":"big"}}`, 5, true},
		{"long_s_raw_utf8", "{\"method\":\"tools/call\",\"param\u017f\":{\"name\":\"big\"}}", 5, true},
		{"method_value_is_case_sensitive", `{"method":"Tools/Call"}`, 0, true},
		{"near_miss_key_is_ignored", `{"methods":"tools/call"}`, 0, true},
	})
}

func TestCostEscapesAreDecoded(t *testing.T) {
	runCostCases(t, []costCase{
		{"escaped_value", `{"method":"tools\u002fcall"}`, 1, true},
		{"escaped_solidus", `{"method":"tools\/call"}`, 1, true},
		{"escaped_key", `{"\u006dethod":"tools/call"}`, 1, true},
		{"escaped_upper_key", `{"\u004D\u0045THOD":"tools/call"}`, 1, true},
		{"escaped_tool_name", `{"method":"tools/call","params":{"n\u0061me":"\u0062ig"}}`, 5, true},
		{"surrogate_pair_tool_name", `{"method":"tools/call","params":{"name":"\ud83d\udcf7"}}`, 4, true},
		{"lone_surrogate_is_replaced", `{"method":"tools/call","params":{"name":"\ud83d"}}`, 1, true},
		{"invalid_escape_is_invalid", `{"method":"tools/call","params":{"name":"\x"}}`, 1, false},
		{"short_unicode_escape_is_invalid", `{"method":"tools\u2f"}`, 1, false},
	})
}

func TestCostToleratesBOMAndWhitespace(t *testing.T) {
	runCostCases(t, []costCase{
		{"bom", "\xEF\xBB\xBF" + `{"method":"tools/call","params":{"name":"big"}}`, 5, true},
		{"bom_batch", "\xEF\xBB\xBF" + `[{"method":"tools/call"}]`, 1, true},
		{"all_json_whitespace", " \t\r\n{ \t\r\n\"method\" \t\r\n: \t\r\n\"tools/call\" \t\r\n} \t\r\n", 1, true},
		{"bom_after_whitespace_is_invalid", " \xEF\xBB\xBF{}", 1, false},
		{"non_json_whitespace_is_invalid", "\f{}", 1, false},
	})
}

func TestCostInvalidBodyCostsAtLeastOneOrItsScannedPrefix(t *testing.T) {
	runCostCases(t, []costCase{
		{"empty", ``, 1, false},
		{"whitespace_only", " \n", 1, false},
		{"garbage", `hello`, 1, false},
		{"truncated_in_method", `{"method":"tools/ca`, 1, false},
		{"truncated_after_name", `{"method":"tools/call","params":{"name":"big"`, 5, false},
		{"truncated_batch_keeps_whole_entries", `[{"method":"tools/call"},{"method":"tools/call","params":{"name":"photo"}},{"meth`, 4, false},
		{"error_after_cheap_method", `{"method":"tools/list",}`, 1, false},
		{"trailing_comma", `{"method":"tools/call","params":{"name":"big"},}`, 5, false},
		{"unquoted_key", `{method:"tools/call"}`, 1, false},
		{"single_quotes", `{'method':'tools/call'}`, 1, false},
		{"control_char_in_string", "{\"method\":\"tools/call\t\"}", 1, false},
		{"leading_zero", `{"id":01,"method":"tools/call"}`, 1, false},
	})
}

func TestCostNotificationToolsCallStillCosts(t *testing.T) {
	runCostCases(t, []costCase{
		{"no_id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"big"}}`, 5, true},
		{"batch_of_notifications", `[{"method":"tools/call"},{"method":"tools/call","params":{"name":"photo"}}]`, 4, true},
	})
}

func TestCostDisagreeingToolNamesChargeTheHighest(t *testing.T) {
	runCostCases(t, []costCase{
		{"name_duplicates", `{"method":"tools/call","params":{"name":"photo","name":"big","name":"echo"}}`, 5, true},
		{"case_variant_name", `{"method":"tools/call","params":{"name":"echo","NAME":"photo"}}`, 3, true},
		{"no_usable_name_costs_default", `{"method":"tools/call","params":{"name":7}}`, 1, true},
		{"no_params_costs_default", `{"method":"tools/call"}`, 1, true},
		{"unknown_tool_costs_default", `{"method":"tools/call","params":{"name":"nope"}}`, 1, true},
		{"name_outside_params_is_not_a_tool", `{"method":"tools/call","name":"big","params":{"arguments":{"name":"big"}}}`, 1, true},
	})
}

func TestCostTopLevelShapes(t *testing.T) {
	runCostCases(t, []costCase{
		{"object", `{"method":"tools/call"}`, 1, true},
		{"unmetered_object", `{"method":"tools/list"}`, 0, true},
		{"response_object", `{"jsonrpc":"2.0","id":1,"result":{}}`, 0, true},
		{"empty_object", `{}`, 0, true},
		{"empty_array_costs_one", `[]`, 1, true},
		{"array_without_objects_costs_one", `[1,"x",null,[]]`, 1, true},
		{"non_objects_cost_nothing_beside_objects", `[1,{"method":"tools/list"}]`, 0, true},
		{"non_objects_beside_call", `[1,{"method":"tools/call"},["tools/call"]]`, 1, true},
		{"number", `5`, 1, true},
		{"string", `"tools/call"`, 1, true},
		{"null", `null`, 1, true},
	})
	for _, c := range []struct {
		body  string
		len   int
		batch bool
	}{
		{`{}`, 1, false},
		{`[]`, 0, true},
		{`[1,{},[]]`, 3, true},
		{`5`, 0, false},
		{`[`, 0, false},
		{`{} {}`, 0, false},
	} {
		r := parse(t, c.body)
		if r.Len() != c.len || r.Batch() != c.batch {
			t.Errorf("%s: Len() = %d, Batch() = %v; want %d, %v", c.body, r.Len(), r.Batch(), c.len, c.batch)
		}
	}
}

func TestCostBatchSumsEntries(t *testing.T) {
	runCostCases(t, []costCase{
		{"mixed", `[{"method":"tools/call","params":{"name":"big"}},{"method":"tools/list"},{"method":"tools/call","id":2},{"method":"tools/call","params":{"name":"photo"}}]`, 9, true},
		{"25_calls", "[" + strings.Repeat(`{"method":"tools/call"},`, 24) + `{"method":"tools/call"}]`, 25, true},
		{"nested_batch_is_not_entries", `[[{"method":"tools/call"}]]`, 1, true},
	})
}

func TestCostTrailingDataIsInvalidButCharged(t *testing.T) {
	runCostCases(t, []costCase{
		{"garbage_after_call", `{"method":"tools/call","params":{"name":"big"}} x`, 5, false},
		{"second_object", `{"method":"tools/list"}{"method":"tools/call","params":{"name":"photo"}}`, 3, false},
		{"batch_after_object", `{"method":"tools/list"}` + "\n" + `[{"method":"tools/call"},{"method":"tools/call"}]`, 2, false},
		{"garbage_after_scalar", `1 2`, 1, false},
		{"closing_brace", `{}}`, 1, false},
	})
}

func TestCostLenientLiteralsAreChargedButInvalid(t *testing.T) {
	// Python's json module and pydantic accept NaN and Infinity.
	runCostCases(t, []costCase{
		{"NaN_before_method", `{"params":{"name":"big","arguments":{"x":NaN}},"method":"tools/call"}`, 5, false},
		{"Infinity", `{"id":Infinity,"method":"tools/call"}`, 1, false},
		{"minus_Infinity_in_batch", `[{"id":-Infinity},{"method":"tools/call","params":{"name":"photo"}}]`, 3, false},
		{"unknown_literal_is_an_unquoted_string", `{"id":nan,"method":"tools/call","params":{"name":"big"}}`, 5, false},
	})
}

// The Ruby MCP SDK parses with Ruby's json gem, which reads /* */ and //
// comments as whitespace. What follows a comment is charged: an invalid
// body with comments is read both ways, and each reading counts.
func TestCostCommentsAreReadAsWhitespace(t *testing.T) {
	runCostCases(t, []costCase{
		// Read as comments, 5; as a lenient scan (the comment a value,
		// then a second value), 5 as well: the costlier reading counts.
		{"leading_block", `/* c */{"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"leading_line", "// c\n" + `{"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"trailing", `{"method":"tools/call","params":{"name":"big"}}/* c */`, 5, false},
		{"unterminated", `{"method":"tools/call","params":{"name":"big"}/* c`, 5, false},
		{"comment_opening_in_a_string", `/**/{"method":"tools/call","params":{"x":"\"/*","name":"big"}}`, 5, false},
		// The lenient scan stops at the comment: 1 for its tools/call
		// without a name; the comment reading costs 5, and counts.
		{"between_members", `{"method":"tools/call",/* c */"params":/**/{"name"/**/:/**/"big"}}`, 5, false},
		{"in_batch", "[{\"method\":\"tools/call\"},// c\n{\"method\":\"tools/call\",\"params\":{\"name\":\"photo\"}}]", 4, false},
		{"inside_skipped_value", `{"params":{"_meta":[1,/* ] } */2],"name":"big"},"method":"tools/call"}`, 5, false},
		{"comment_text_in_a_string_is_no_comment", `{"method":"tools/call","params":{"name":"/*big*/"}}`, 1, true},
		// An unquoted string that holds a comment's opening (a lenient
		// reading): the comment reading cuts it, the first reads on.
		{"unquoted_string_with_slashes", `{x:a//b,method:tools/call,params:{name:big}}`, 5, false},
		// Jackson with ALLOW_YAML_COMMENTS reads # to the end of the line.
		{"hash_comment_between_members", "{\"method\":\"tools/call\",#x\n\"params\":{\"name\":\"big\"}}", 5, false},
		// 3 for photo read up to the comment, 5 for the comment reading,
		// which counts.
		{"hash_comment_hiding_a_duplicate", "{\"method\":\"tools/call\",\"params\":{\"name\":\"photo\",#x\n\"name\":\"big\"}}", 5, false},
		{"hash_in_a_string_is_no_comment", `{"method":"tools/call","params":{"name":"#big"}}`, 1, true},
	})
}

// Jackson, which the Java MCP SDK reads params with, turns a number or a
// boolean into a string: "name":7 calls the tool "7". Ruby's json gem
// before 2.10 drops the backslash of an escape JSON has not: "\photo" is
// "photo", and the body reads on.
func TestCostScalarToolNamesAndUnknownEscapesAreReadings(t *testing.T) {
	for _, c := range []struct {
		body  string
		tools []string
		valid bool
	}{
		{`{"method":"tools/call","params":{"name":7}}`, []string{"7"}, true},
		{`{"method":"tools/call","params":{"name":7.0,"name":true,"name":null}}`, []string{"7.0", "true"}, true},
		{`{"x":"\q","method":"tools/call","params":{"name":"\photo"}}`, []string{"photo"}, false},
		{`{"method":"tools/call","params":{"name":"\é"}}`, []string{"é"}, false},
	} {
		r := parse(t, c.body)
		if got := tools(r.Entry(0)); !slices.Equal(got, c.tools) || r.Valid() != c.valid {
			t.Errorf("%s: tools %q valid %v, want %q valid %v", c.body, got, r.Valid(), c.tools, c.valid)
		}
	}
	runCostCases(t, []costCase{
		{"unknown_escape_before_the_call", `{"x":"\q","method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"unknown_escape_in_the_name", `{"method":"tools/call","params":{"name":"\photo"}}`, 3, false},
		{"unknown_escape_in_a_key", `{"\method":"tools/call","params":{"name":"photo"}}`, 3, false},
		// kotlinx.serialization takes a raw control byte in a string.
		{"raw_control_byte_in_an_id", "{\"id\":\"5\t\",\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"raw_newline_in_an_argument", "{\"method\":\"tools/call\",\"params\":{\"arguments\":{\"t\":\"a\nb\"},\"name\":\"big\"}}", 5, false},
		{"control_byte_escaped_is_no_reading", "{\"x\":\"\\\x01\",\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 1, false},
	})
}

// The Kotlin MCP SDK reads JSON with kotlinx.serialization's isLenient:
// unquoted keys and unquoted string values. Each such reading is charged.
func TestCostUnquotedStringsAreReadLikeALenientParser(t *testing.T) {
	runCostCases(t, []costCase{
		{"unquoted_keys", `{jsonrpc:"2.0",id:1,method:"tools/call",params:{name:"big"}}`, 5, false},
		{"unquoted_values", `{"method":tools/call,"params":{"name":big}}`, 5, false},
		{"unquoted_everything", `{method:tools/call,params:{name:photo,arguments:{q:x,limit:10}}}`, 3, false},
		{"unquoted_batch", `[{method:tools/call,params:{name:big}},{method:tools/call}]`, 6, false},
		{"unquoted_key_inside_skipped_value", `{"params":{"name":"big","_meta":{progressToken:abc}},"method":"tools/call"}`, 5, false},
		{"unicode_tool_name", "{method:tools/call,params:{name:\U0001F4F7}}", 4, false},
		{"number_then_letters", `{"id":1a,"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"stops_at_a_colon", `{method:tools/call:x,params:{name:big}}`, 1, false},
		// Valid JSON keeps its meaning: a literal is no method.
		{"literal_method", `{"method":true}`, 0, true},
	})
}

func TestCostInvalidUTF8IsReplacedLikeEncodingJSON(t *testing.T) {
	runCostCases(t, []costCase{
		{"invalid_byte_in_method", "{\"method\":\"tools/call\xff\"}", 0, true},
		{"invalid_byte_in_key", "{\"method\xff\":\"tools/call\"}", 0, true},
		{"valid_utf8_tool", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\U0001F4F7\"}}", 4, true},
	})
	r := parse(t, "{\"method\":\"tools/call\xff\",\"params\":{\"name\":\"b\xc0g\"}}")
	if got := methods(r.Entry(0)); len(got) != 1 || got[0] != "tools/call\uFFFD" {
		t.Errorf("Methods() = %q, want [\"tools/call\\uFFFD\"]", got)
	}
	if got := tools(r.Entry(0)); len(got) != 1 || got[0] != "b\uFFFDg" {
		t.Errorf("Tools() = %q, want [\"b\\uFFFDg\"]", got)
	}
}

// Jackson reading a body as bytes (Spring's @RequestBody, a Java server's
// InputStream) decodes an overlong UTF-8 sequence, which Go reads as
// invalid bytes: "\xC0\xAF" is '/'. Each string and key is read both ways.
func TestCostOverlongUTF8IsReadAsJacksonReadsIt(t *testing.T) {
	runCostCases(t, []costCase{
		{"two_byte_slash_in_method", "{\"method\":\"tools\xc0\xafcall\",\"params\":{\"name\":\"big\"}}", 5, true},
		{"three_byte_slash_in_method", "{\"method\":\"tools\xe0\x80\xafcall\",\"params\":{\"name\":\"big\"}}", 5, true},
		{"four_byte_slash_in_method", "{\"method\":\"tools\xf0\x80\x80\xafcall\",\"params\":{\"name\":\"big\"}}", 5, true},
		{"in_the_method_key", "{\"meth\xc1\xafd\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, true},
		{"in_the_params_key", "{\"method\":\"tools/call\",\"par\xc1\xa1ms\":{\"name\":\"big\"}}", 5, true},
		{"in_the_name_key", "{\"method\":\"tools/call\",\"params\":{\"n\xc1\xa1me\":\"big\"}}", 5, true},
		{"in_the_tool_name", "{\"method\":\"tools/call\",\"params\":{\"name\":\"bi\xc1\xa7\"}}", 5, true},
		{"with_an_escape", "{\"method\":\"tools\\u002f\xc1\xa3all\",\"params\":{\"name\":\"big\"}}", 5, true},
		{"in_an_unquoted_key", "{meth\xc1\xafd:\"tools/call\",params:{name:big}}", 5, false},
		// Not overlong: C2 AF is U+00AF, and E0 A0 80 is U+0800.
		{"shortest_two_bytes", "{\"method\":\"tools\xc2\xafcall\"}", 0, true},
		{"shortest_three_bytes", "{\"method\":\"tools\xe0\xa0\x80call\"}", 0, true},
		{"lead_without_continuation", "{\"method\":\"tools\xc0/call\"}", 0, true},
	})
	r := parse(t, "{\"method\":\"tools\xc0\xafcall\"}")
	if got := methods(r.Entry(0)); !slices.Equal(got, []string{"tools\uFFFD\uFFFDcall", "tools/call"}) {
		t.Errorf("Methods() = %q, want Go's reading and Jackson's", got)
	}
}

// JavaScript's TextDecoder (the TypeScript SDK's) and Python's
// errors="replace" read a cut-off UTF-8 sequence as one U+FFFD, where Go
// reads one per byte: "\xF0\x9F\x98y" is the tool "\uFFFDy" to them.
func TestCostCutOffUTF8IsReadAsJavaScriptReadsIt(t *testing.T) {
	runCostCases(t, []costCase{
		{"valid_replacement_character", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xef\xbf\xbdy\"}}", 6, true},
		{"four_byte_cut_after_three", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xf0\x9f\x98y\"}}", 6, true},
		{"four_byte_cut_after_two", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xf0\x9fy\"}}", 6, true},
		{"three_byte_cut_after_two", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xe2\x82y\"}}", 6, true},
		{"with_an_escape", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xf4\x8f\xbf\\u0079\"}}", 6, true},
		{"lone_byte", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xffy\"}}", 6, true},
		// Two subparts, two U+FFFD: E0 80 is no start of a sequence (E0
		// wants A0-BF next), F4 90 neither (F4 wants 80-8F).
		{"not_a_subpart", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xe0\x80y\"}}", 1, true},
		{"beyond_u10ffff", "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xf4\x90y\"}}", 1, true},
	})
	r := parse(t, "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xf0\x9f\x98y\"}}")
	if got := tools(r.Entry(0)); !slices.Equal(got, []string{"\uFFFD\uFFFD\uFFFDy", "\uFFFDy"}) {
		t.Errorf("Tools() = %q, want Go's reading and JavaScript's", got)
	}
}

// Jackson with UNWRAP_SINGLE_VALUE_ARRAYS reads a one-element array where
// it expects a string or an object as that element: ["tools/call"] is
// tools/call, [{"name":"big"}] params naming big; one level, as Jackson
// refuses deeper wrapping. JavaScript's String() reads [["big"]] as big
// at any depth (a lookup such as tools[params.name] converts its key so),
// so strings are unwrapped at any depth.
func TestCostSingleValueArraysAreUnwrapped(t *testing.T) {
	runCostCases(t, []costCase{
		{"method", `{"method":["tools/call"],"params":{"name":"big"}}`, 5, true},
		{"name", `{"method":"tools/call","params":{"name":["big"]}}`, 5, true},
		{"params", `{"method":"tools/call","params":[{"name":"big"}]}`, 5, true},
		{"everything", `{"method":["tools/call"],"params":[{"name":["big"]}]}`, 5, true},
		{"name_number", `{"method":"tools/call","params":{"name":[7]}}`, 1, true},
		{"empty", `{"method":[],"params":{"name":"big"}}`, 0, true},
		{"nested_method", `{"method":[["tools/call"]],"params":{"name":"big"}}`, 5, true},
		{"nested_name", `{"method":"tools/call","params":{"name":[[[ "big" ]]]}}`, 5, true},
		{"nested_params_object_is_no_reading", `{"method":"tools/call","params":[[{"name":"big"}]]}`, 1, true},
		{"method_object", `{"method":[{"x":"tools/call"}],"params":{"name":"big"}}`, 0, true},
		// A batch read as a list of messages: each [{...}] is the message.
		{"batch_entries", `[[{"method":"tools/call","params":{"name":"big"}}],[{"method":"tools/call"}]]`, 6, true},
		{"batch_entry_with_more_elements", `[[{"method":"tools/call","params":{"name":"big"}},5]]`, 5, true},
		{"batch_entry_nested_is_no_message", `[[[{"method":"tools/call","params":{"name":"big"}}]]]`, 1, true},
		{"batch_entry_empty", `[[],{"method":"tools/call"}]`, 1, true},
		{"batch_entry_truncated", `[[{"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"batch_entry_truncated_at_its_start", `[[`, 1, false},
	})
	r := parse(t, `{"method":"tools/call","params":{"name":[7]}}`)
	if got := tools(r.Entry(0)); !slices.Equal(got, []string{"7"}) {
		t.Errorf("Tools() = %q, want [\"7\"]", got)
	}
}

// JSON-RPC 2.0 allows params by position, an array: a dispatcher that
// passes them so to a tools/call handler reads ["big", {...}] as the tool
// big and its arguments.
func TestCostParamsByPosition(t *testing.T) {
	runCostCases(t, []costCase{
		{"name_and_arguments", `{"method":"tools/call","params":["big",{"q":1}]}`, 5, true},
		{"name_alone", `{"method":"tools/call","params":["big"]}`, 5, true},
		{"name_in_an_array", `{"method":"tools/call","params":[["big"],{}]}`, 5, true},
		{"escaped_name", `{"method":"tools/call","params":["b\u0069g",{}]}`, 5, true},
		{"number_name", `{"method":"tools/call","params":[7,{}]}`, 1, true},
		{"null_name", `{"method":"tools/call","params":[null,"big"]}`, 1, true},
		{"batch", `[{"method":"tools/call","params":["big",{}]},{"method":"tools/call","params":["photo"]}]`, 8, true},
		// A truncated call costs its tool, as one with a params object.
		{"truncated", `{"method":"tools/call","params":["big",{"q":1}`, 5, false},
		{"truncated_after_the_name", `{"method":"tools/call","params":["big",`, 5, false},
		{"truncated_in_the_name", `{"method":"tools/call","params":["bi`, 1, false},
		{"truncated_arguments_in_an_array", `{"method":"tools/call","params":["big",[`, 5, false},
		{"truncated_object_in_an_array", `{"method":"tools/call","params":[{"name":"big"`, 5, false},
	})
	r := parse(t, `{"method":"tools/call","params":[7,{}]}`)
	if got := tools(r.Entry(0)); !slices.Equal(got, []string{"7"}) {
		t.Errorf("Tools() = %q, want [\"7\"]", got)
	}
}

// Jackson with ALLOW_SINGLE_QUOTES (and JSON5 parsers) reads '...' as a
// string. An invalid body with a single quote is read that way too, and
// the costlier of the readings counts.
func TestCostSingleQuotedStringsAreReadings(t *testing.T) {
	runCostCases(t, []costCase{
		// The lenient reading sees a tool named 'big' (1), the quoted
		// reading big (5), which counts.
		{"quoted_name", `{"method":"tools/call","params":{"name":'big'}}`, 5, false},
		{"quoted_keys_and_method", `{'method':'tools/call','params':{'name':'big'}}`, 5, false},
		{"structural_bytes_inside", `{'x':'a,b:{c}]','method':'tools/call','params':{'name':'big'}}`, 5, false},
		{"escaped_quote_and_double_quote_inside", `{'x':'it\'s "q"','method':'tools/call','params':{'name':'b\u0069g'}}`, 5, false},
		// Bare, 'a is an unquoted string, and the call counts; quoted, the
		// call hides in a string: the bare reading charges it.
		{"hidden_in_a_quoted_string", `{x:'a,method:tools/call,params:{name:big},y:b'}`, 5, false},
		// Comments are blanked minding quoted strings: # inside one is text.
		{"hash_inside_a_quoted_string", "{'x':'#','method':'tools/call','params':{'name':'big'}}", 5, false},
		{"unterminated", `{'method':'tools/call','params':{'name':'big`, 1, false},
		// Jackson reads a first value and ignores what follows it; Hjson
		// gives up on the trailing x, so only the quoted reading sees the
		// calls.
		{"trailing_data", `{'jsonrpc':'2.0','id':1,'method':'tools/call','params':{'name':'big'}} x`, 5, false},
		{"trailing_data_batch", `[{'method':'tools/call','params':{'name':'big'}},{'method':'tools/call'}]] x`, 6, false},
	})
	r := parse(t, `[{'id':1,'method':'ping'},{'id':2,'method':'ping'},{'id':3,'method':'ping'}]] x`)
	if got := r.Largest(); got != 3 {
		t.Errorf("Largest() = %d, want the quoted reading's 3 messages (a bound on batch sizes counts them)", got)
	}
}

// encoding/json/v2 with MatchCaseInsensitiveNames (or a case:ignore tag)
// ignores dashes and underscores in names as well as case.
func TestCostKeysMatchWithoutSeparators(t *testing.T) {
	if id := parse(t, `{"method":"tools/call","id":1,"_id":2}`).Entry(0).ID(); string(id) != "1" {
		t.Errorf("ID() = %s, want 1: only the keys that set the cost are matched without separators", id)
	}
	runCostCases(t, []costCase{
		{"method", `{"me_thod":"tools/call","params":{"name":"big"}}`, 5, true},
		{"params", `{"method":"tools/call","para-ms":{"name":"big"}}`, 5, true},
		{"name", `{"method":"tools/call","params":{"_NAME_":"big"}}`, 5, true},
		{"arguments_and_escape", `{"method":"tools/call","params":{"name":"big","argu\u005fments":{}}}`, 5, true},
		{"escaped_and_separated", `{"ME_THO\u0044":"tools/call","params":{"name":"big"}}`, 5, true},
		{"separators_alone", `{"_-_":"tools/call"}`, 0, true},
		{"meta_is_no_key_of_ours", `{"method":"tools/call","params":{"_meta":{},"name":"big"}}`, 5, true},
	})
}

// Jackson with ALLOW_TRAILING_COMMA (and JSON5) reads a comma before a
// closing bracket, and with ALLOW_MISSING_VALUES a missing array element
// as null: the scan reads on past both.
func TestCostTrailingCommasAndMissingValuesAreReadPast(t *testing.T) {
	call := `{"method":"tools/call","params":{"name":"big"}}`
	runCostCases(t, []costCase{
		{"in_params_before_the_method", `{"params":{"name":"big",},"method":"tools/call"}`, 5, false},
		{"in_a_message", `{"method":"tools/call","params":{"name":"big"},}`, 5, false},
		{"in_a_skipped_object", `{"params":{"arguments":{"a":1,},"name":"big"},"method":"tools/call"}`, 5, false},
		{"in_a_skipped_array", `{"id":[1,],"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"in_an_unwrapped_array", `{"method":["tools/call",],"params":{"name":["big",]}}`, 5, false},
		{"in_a_batch", `[` + call + `,` + call + `,]`, 10, false},
		{"in_a_batch_then_a_value", `[` + call + `,]` + call, 10, false},
		{"missing_elements", `{"x":[,1,,2,],"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"missing_first_element", `{"x":[,],"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"missing_batch_entries", `[` + call + `,,` + call + `]`, 10, false},
		{"missing_first_batch_entry", `[,` + call + `]`, 5, false},
		// Objects have no missing members.
		{"double_comma_in_an_object_stops", `{"x":1,,"method":"tools/call","params":{"name":"big"}}`, 1, false},
	})
	r := parse(t, `[`+call+`,,`+call+`]`)
	if r.Scanned() != 3 {
		t.Errorf("Scanned() = %d, want 3 entries (the missing one null)", r.Scanned())
	}
}

// Jackson ends a line comment at \r as well as \n, JSON5 at U+2028 and
// U+2029 too, the json gem at \n only: where that differs, both readings.
func TestCostLineCommentsEndWhereEachParserEndsThem(t *testing.T) {
	runCostCases(t, []costCase{
		{"slashes_then_cr", "{\"id\":1, // c\r\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"hash_then_cr", "{\"id\":1, # c\r\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"line_separator", "{\"id\":1, // c\u2028\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		// Ruby reads the call after \n; to Jackson \r ended the comment
		// before text that breaks its reading.
		{"cr_then_garbage_then_lf", "{\"id\":1, // c\r garbage \n\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
	})
}

func TestCostMeterVariants(t *testing.T) {
	body := `[{"method":"tools/call","params":{"name":"big"}},{"method":"tools/list"},{"method":"resources/read"},{"id":1,"result":{}},7]`
	r := parse(t, body)
	for _, c := range []struct {
		name  string
		meter Meter
		cost  int64
	}{
		{"disabled_costs_nothing", Meter{}, 0},
		{"tools_call", toolsCallMeter, 5},
		{"other_method", Meter{Methods: []string{"resources/read"}}, 1},
		{"several_methods", Meter{Methods: []string{"resources/read", "tools/list", ToolsCall}}, 7},
		// Every message (a request, a notification, a response) costs at
		// least 1; the bare 7 is no message and costs nothing.
		{"all_charges_every_message_at_least_one", Meter{All: true}, 5 + 1 + 1 + 1},
	} {
		if got := r.Cost(c.meter, tableCost); got != c.cost {
			t.Errorf("%s: Cost() = %d, want %d", c.name, got, c.cost)
		}
	}
	if got := parse(t, `garbage`).Cost(Meter{}, tableCost); got != 0 {
		t.Errorf("disabled meter on invalid body: Cost() = %d, want 0", got)
	}
	if got := parse(t, `garbage`).Cost(Meter{All: true}, tableCost); got != 1 {
		t.Errorf("All on invalid body: Cost() = %d, want 1", got)
	}
}

func TestCostToolCostContract(t *testing.T) {
	r := parse(t, `{"method":"tools/call","params":{"name":"x"}}`)
	if got := r.Cost(toolsCallMeter, nil); got != 1 {
		t.Errorf("nil toolCost: Cost() = %d, want 1", got)
	}
	if got := r.Cost(toolsCallMeter, func([]byte) int64 { return -3 }); got != 1 {
		t.Errorf("toolCost below 1: Cost() = %d, want 1", got)
	}
	var seen []string
	parse(t, `{"method":"tools/call"}`).Cost(toolsCallMeter, func(s []byte) int64 { seen = append(seen, string(s)); return 2 })
	if len(seen) != 1 || seen[0] != "" {
		t.Errorf("nameless tools/call asked toolCost for %q, want [\"\"]", seen)
	}
	huge := func([]byte) int64 { return math.MaxInt64 }
	if got := parse(t, `[{"method":"tools/call"},{"method":"tools/call"}]`).Cost(toolsCallMeter, huge); got != math.MaxInt64 {
		t.Errorf("sum saturates: Cost() = %d, want MaxInt64", got)
	}
}

func TestCalls(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	all := Meter{All: true}
	tests := []struct {
		body  string
		meter Meter
		want  int
	}{
		{call, toolsCallMeter, 1},
		{list, toolsCallMeter, 1}, // costs nothing, yet is one request
		{"[" + call + "," + call + "," + list + "," + call + "]", toolsCallMeter, 3},
		{"[" + call + "," + note + "]", toolsCallMeter, 1},
		{"[" + call + "," + call + "]", toolsCallMeter, 2},               // the smallest batch that puts two calls in flight
		{"[" + call + "," + list + "," + note + "," + `5` + "]", all, 3}, // 5 is no message
		{"not json", toolsCallMeter, 1},
		{call, Meter{}, 0},
	}
	for _, tt := range tests {
		r := parse(t, tt.body)
		if got := r.Calls(tt.meter); got != tt.want {
			t.Errorf("Calls(%s, %+v) = %d, want %d", tt.body, tt.meter, got, tt.want)
		}
	}
}

// ToolCalls counts the entries that call a tool, each once, and for an
// invalid body the most any one reading calls it: the lenient readings of
// one message are one call, not one each.
func TestToolCalls(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
	other := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"y"}}`
	tests := []struct {
		body string
		want int64
	}{
		{call, 1},
		{other, 0},
		{"[" + call + "," + other + "," + call + "]", 2},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","name":"x","Name":"x"}}`, 1},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}`, 0},
		{`{"jsonrpc":"2.0","id":1,/*c*/"method":"tools/call","params":{"name":"x"}}`, 1},
		{`{jsonrpc:"2.0",id:1,method:"tools/call",params:{name:"x"}}`, 1},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",}}`, 1},
		{"\ufeff\ufeff" + call, 1},
		{"[" + call + "," + call + ",]", 2},
		{call + call, 2},
	}
	for _, tt := range tests {
		r := parse(t, tt.body)
		if got := r.ToolCalls([]byte("x")); got != tt.want {
			t.Errorf("ToolCalls(%s, x) = %d, want %d", tt.body, got, tt.want)
		}
	}
}

// JSON5 reads escapes JSON has not (\x, \v, \0, a backslash before a line
// break), \u escapes in unquoted keys, and more whitespace; Python's
// str.strip, which backends call before json.loads, strips more still.
// Each makes a reading of its own.
func TestCostJSON5SyntaxIsAReading(t *testing.T) {
	runCostCases(t, []costCase{
		{"hex_escape_in_the_method", `{"method":"tools\x2fcall","params":{"name":"big"}}`, 5, false},
		{"hex_escape_in_the_name", `{"method":"tools/call","params":{"name":"\x62ig"}}`, 5, false},
		{"hex_escape_in_a_key", `{"\x6dethod":"tools/call","params":{"name":"big"}}`, 5, false},
		{"hex_escape_in_a_single_quoted_name", `{"method":"tools/call","params":{"name":'\x62ig'}}`, 5, false},
		{"line_continuation_lf", "{\"method\":\"tools/\\\ncall\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"line_continuation_crlf", "{\"method\":\"tools/\\\r\ncall\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"line_continuation_cr", "{\"method\":\"tools/\\\rcall\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"line_continuation_u2028", "{\"method\":\"tools/\\\u2028call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"vertical_tab_escape", "{\"method\":\"tools/call\",\"params\":{\"name\":\"big\\v\",\"name\":\"\\vbig\"}}", 1, false},
		{"escape_in_an_unquoted_key", `{\u006dethod:"tools/call",params:{n\u0061me:"big"}}`, 5, false},
		{"escapes_in_an_unquoted_key", `{\u006d\u0065thod:"tools/call",params:{name:"big"}}`, 5, false},
		{"no_break_space_between_tokens", "{\"method\":\u00a0\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"ideographic_space_between_tokens", "{\"method\"\u3000:\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"byte_order_mark_between_tokens", "{\"method\":\ufeff\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"line_separator_between_tokens", "{\"method\":\u2028\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"leading_vertical_tab", "\v{\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"leading_form_feed", "\f{\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"trailing_unit_separator", "{\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}\x1f", 5, false},
		// In a string, such whitespace is text: no second reading.
		{"no_break_space_in_a_string", "{\"x\":\"\u00a0\",\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, true},
		// An escape JSON5 reads as JSON does is no reason for a second reading.
		{"unknown_escape_is_one_reading", `{"method":"tools/call","params":{"name":"b\ig"}}`, 5, false},
	})
}

// cJSON and gjson read on past a \u without four hex digits, and a C
// string ends at its first NUL; gjson, which picks members out of a body
// without parsing it, reads past a missing comma or colon. Each is a
// reading.
func TestCostReadsPastWhatCParsersAndGjsonAccept(t *testing.T) {
	big := `"method":"tools/call","params":{"name":"big"}`
	runCostCases(t, []costCase{
		{"bad_u_escape_before_the_call", `{"x":"\uZZZZ",` + big + `}`, 5, false},
		{"short_u_escape_before_the_call", `{"x":"\u12",` + big + `}`, 5, false},
		{"u_escape_at_the_end_of_a_string", `{"x":"a\u",` + big + `}`, 5, false},
		{"short_u_escape_in_the_name_reads_as_u", `{"method":"tools/call","params":{"name":"bi\u12"}}`, 1, false},
		{"u_escape_ending_the_name", `{"method":"tools/call","params":{"name":"big\u"}}`, 1, false},
		{"bad_u_escape_then_batch_entries", `[{"x":"\uZZZZ",` + big + `},{` + big + `}]`, 10, false},
		{"escaped_nul_in_the_method", `{"method":"tools/call\u0000","params":{"name":"big"}}`, 5, true},
		{"escaped_nul_in_the_method_key", `{"method\u0000x":"tools/call","params":{"name":"big"}}`, 5, true},
		{"escaped_nul_in_the_params_key", `{"method":"tools/call","params\u0000":{"name":"big"}}`, 5, true},
		{"escaped_nul_in_the_name", `{"method":"tools/call","params":{"name":"big\u0000x"}}`, 5, true},
		{"raw_nul_in_the_method", "{\"method\":\"tools/call\x00x\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"raw_nul_in_the_name_key", "{\"method\":\"tools/call\",\"params\":{\"name\x00\":\"big\"}}", 5, false},
		{"missing_comma_between_members", `{"id":1 ` + big + `}`, 5, false},
		{"missing_comma_in_params", `{"method":"tools/call","params":{"x":1 "name":"big"}}`, 5, false},
		{"missing_colon", `{"method" "tools/call","params":{"name" "big"}}`, 5, false},
		{"missing_comma_between_batch_entries", `[{` + big + `} {` + big + `}]`, 10, false},
		{"missing_comma_in_a_skipped_value", `{"x":{"a":1 "b":2},` + big + `}`, 5, false},
		// A missing colon after an unquoted key is no member to gjson.
		{"unquoted_key_without_colon_stops", `{x 1,` + big + `}`, 1, false},
	})
}

// Parsers that build objects by assignment (hjson, jsonc-parser) make a
// __proto__ object the prototype of the one around it, whose lookups then
// find its members: they are read as that object's own.
func TestCostProtoMembersAreTheEnclosingObjects(t *testing.T) {
	runCostCases(t, []costCase{
		{"message_proto", `{"jsonrpc":"2.0","id":1,"__proto__":{"method":"tools/call","params":{"name":"big"}}}`, 5, true},
		{"params_proto", `{"method":"tools/call","params":{"__proto__":{"name":"big"}}}`, 5, true},
		{"escaped_key", `{"id":1,"__proto\u005f_":{"method":"tools/call","params":{"name":"big"}}}`, 5, true},
		{"proto_of_a_proto", `{"__proto__":{"x":1,"__proto__":{"method":"tools/call"},"params":{"name":"big"}},"id":2}`, 5, true},
		{"members_after_the_proto", `{"__proto__":{"x":1},"method":"tools/call","params":{"__proto__":{},"name":"big"}}`, 5, true},
		{"batch_of_protos", `[{"__proto__":{"method":"tools/call","params":{"name":"big"}}},{"__proto__":{"method":"tools/call"}}]`, 6, true},
		{"trailing_comma_in_the_proto", `{"__proto__":{"method":"tools/call",},"params":{"name":"big"}}`, 5, false},
		// Keys are case-sensitive in JavaScript.
		{"other_case_is_a_plain_key", `{"__PROTO__":{"method":"tools/call"}}`, 0, true},
	})
	r := parse(t, `{"id":1,"__proto__":{"id":2,"result":{}},"method":"tools/call"}`)
	if id := string(r.Entry(0).ID()); id != "1" || r.Entry(0).Response() {
		t.Errorf("ID %s, response %v: an own id and no own answer stand, the prototype's are shadowed", id, r.Entry(0).Response())
	}
}
