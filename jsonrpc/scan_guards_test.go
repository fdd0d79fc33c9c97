package jsonrpc

import "testing"

// blankComments skips escaped quotes in strings: what follows \" is still
// in the string, so // there opens no comment.
func TestBlankCommentsMindsEscapedQuotes(t *testing.T) {
	if got, found := blankComments(nil, []byte(`{"a\"//":1}`), false, false); found {
		t.Errorf("blankComments = %q, true; want no comment", got)
	}
	// In a body, a comment after such a string is still read as whitespace.
	runCostCases(t, []costCase{
		{"comment_after_an_escaped_quote", `{"x":"\"\q", "method":"tools/call", "params":{"name": /**/ "big"}}`, 5, false},
	})
}

// A short line comment ended by U+2028 or U+2029 is blanked with the
// separator, which JSON5 reads as whitespace.
func TestBlankCommentsBlanksTheLineSeparator(t *testing.T) {
	for _, sep := range []string{"\u2028", "\u2029"} {
		got, found := blankComments(nil, []byte("a//x"+sep+"b"), false, true)
		if want := "a      b"; !found || string(got) != want {
			t.Errorf("blankComments(%q) = %q, %v; want %q", "a//x"+sep+"b", got, found, want)
		}
	}
	runCostCases(t, []costCase{
		{"paragraph_separator", "{\"id\":1, // c\u2029\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"line_separator_then_a_lenient_value", "{\"method\":\"tools/call\", \"a\":it's, // c\u2028 \"params\":{\"name\":\"big\"}}", 5, false},
	})
}

// JSON5 syntax inside a comment is no reason for the single-quoted
// reading: the body is read once more, with its comments blanked.
func TestJSON5SyntaxInACommentIsNoReading(t *testing.T) {
	r := parse(t, "{\"method\":\"tools/call\"} // \\x \u00a0")
	if len(r.readings) != 1 || r.readings[0].single {
		t.Errorf("readings = %+v, want the comment reading only", r.readings)
	}
}

// After an escaped quote a string goes on: whitespace JSON5 has and JSON
// not, after the string, still calls for the JSON5 reading.
func TestJSON5SyntaxAfterAnEscapedQuote(t *testing.T) {
	runCostCases(t, []costCase{
		{"no_break_space_after_an_escaped_quote", "{\"x\":\"\\\"\",\"method\":\"tools/call\",\u00a0\"params\":{\"name\":\"big\"}}", 5, false},
		{"unit_separator_then_an_error", "\x1f{\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}\x1f]", 5, false},
	})
}

// A \u escape needs four hex digits to be JSON.
func TestValidNeedsFourHexDigits(t *testing.T) {
	for _, body := range []string{`{"x":"\u123Z"}`, `"\u00Z0"`} {
		if parse(t, body).Valid() {
			t.Errorf("%s: Valid() = true", body)
		}
	}
}

// A body starting with part of a byte order mark is invalid.
func TestValidPartialBOM(t *testing.T) {
	if r := parse(t, "\xEF\xBB {}"); r.Valid() {
		t.Errorf("Valid() = true for EF BB and an object")
	}
}

// gjson reads past a missing comma before an array as before an object
// (Hjson, which reads a space as a separator, is kept out by the trailing ]).
func TestCostMissingCommaBeforeAWrappedBatchEntry(t *testing.T) {
	big := `"method":"tools/call","params":{"name":"big"}`
	runCostCases(t, []costCase{
		{"missing_comma_before_a_wrapped_entry", `[{` + big + `} [{` + big + `}]]]`, 10, false},
	})
}

// \u escapes make an unquoted key only in the JSON5 reading, which reads
// 'a, ... as an unterminated string: no reading reads this call.
func TestCostEscapedUnquotedKeyOnlyInJSON5(t *testing.T) {
	runCostCases(t, []costCase{
		{"escape_in_an_unquoted_key_after_an_apostrophe", `{x:'a, me\u0074hod:tools/call, params:{name:big}}`, 1, false},
	})
}

// A trailing comma in a skipped object is read past (Hjson, which reads
// it too, is kept out by the trailing ]).
func TestCostTrailingCommaInASkippedObject(t *testing.T) {
	runCostCases(t, []costCase{
		{"trailing_comma_in_a_nested_object", `{"x":{"a":1,},"method":"tools/call","params":{"name":"big"}}]`, 5, false},
	})
}

// The byte after a comment is read like any other: a quote there opens a
// string, and a comment after that string is blanked too (Hjson, which
// reads comments as well, is kept out by the trailing ]).
func TestBlankCommentsReadsTheByteAfterAComment(t *testing.T) {
	if got, _ := blankComments(nil, []byte(`/**/"x"/**/`), false, false); string(got) != `    "x"    ` {
		t.Errorf("blankComments = %q", got)
	}
	runCostCases(t, []costCase{
		{"comment_before_a_key", `{"method":"tools/call",/**/"params":{"name":/**/"big"}}]`, 5, false},
	})
}
