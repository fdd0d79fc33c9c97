package jsonrpc

import "testing"

// hjson-go reads true, false and null followed by U+0085 as the literal,
// hjson-js as a string to the end of the line; and the other way round for
// U+FEFF. A body holding either is read hjson-go's way too, even without a
// NUL, so the reading only hjson-go makes is charged.
func TestCostHjsonGoReadingOnNELAndBOM(t *testing.T) {
	runCostCases(t, []costCase{
		// hjson-js: a is the whole line, method is no member.
		{"nel_after_a_literal", "{\na: true\u0085, method: tools/call\nparams: {\nname: big\n}\n}", 5, false},
		// hjson-js: a literal, then ", }" closes the object and the last }
		// is trailing: no reading.
		{"bom_after_a_literal", "{\nparams: {\nname: big\n}\nmethod: tools/call\nx: true\ufeff, }\n}", 5, false},
	})
}

// A raw NUL in a name is read up to the NUL as well, as C parsers read it,
// when no other reading (hjson-go's, here refused for the trailing ])
// decodes the string.
func TestCostRawNULInTheNameIsReadBeforeIt(t *testing.T) {
	runCostCases(t, []costCase{
		{"raw_nul_in_the_name", "{\"method\":\"tools/call\",\"params\":{\"name\":\"big\x00x\"}}]", 5, false},
	})
}

// A __proto__ object's result or error does not make its message a
// response: only the message's own members do.
func TestResponseIgnoresAPrototypesAnswer(t *testing.T) {
	r := parse(t, `{"id":1,"__proto__":{"result":{}}}`)
	if r.Entry(0).Response() || r.Largest() != 0 {
		t.Errorf("Response() = %v, Largest() = %d: a prototype's result is no answer of the message", r.Entry(0).Response(), r.Largest())
	}
}

// Positional params take arguments only after a comma: an object after
// the name without one is no arguments reading (Hjson, which reads a space
// as a separator, is kept out by the trailing ]).
func TestArgPositionalArgumentsNeedAComma(t *testing.T) {
	r := parse(t, `{"method":"tools/call","params":["search" [{"limit":500}]]}]`)
	for i := range r.Scanned() {
		if _, _, present := r.Entry(i).Arg("limit"); present {
			t.Errorf("entry %d: limit present; no reading puts arguments after a name without a comma", i)
		}
	}
}

// JSON5's escapes are decoded only in the single-quoted (JSON5) reading:
// where JSON5 does not read the body (a # comment hides the rest from it),
// \x62 is no b.
func TestCostJSON5EscapesOnlyInTheJSON5Reading(t *testing.T) {
	runCostCases(t, []costCase{
		{"hex_escape_after_a_hash_key", `{"method":"tools/call","params":{#:1,"name":"\x62ig"}}`, 1, false},
	})
}

// A name that opens an array and ends with the body is no reading, and no
// panic.
func TestCostTruncatedArrayName(t *testing.T) {
	for _, body := range []string{`{"method":"tools/call","params":{"name":[`, `{"method":"tools/call","params":{"name":[ `, `{"method":"tools/call","params":{"name":[[`} {
		if got := parse(t, body).Cost(toolsCallMeter, tableCost); got != 1 {
			t.Errorf("%q: Cost() = %d, want 1", body, got)
		}
	}
}

// An object is no tool name in any reading.
func TestObjectNameIsNoReading(t *testing.T) {
	r := parse(t, `{"method":"tools/call","params":{"name":{"x":1}}}`)
	if got := tools(r.Entry(0)); len(got) != 0 {
		t.Errorf("tools = %q, want none", got)
	}
}

// When a __proto__ object closes together with one inside it, the message
// around them goes on.
func TestCostNestedProtosClosingTogether(t *testing.T) {
	runCostCases(t, []costCase{
		{"message_protos", `{"__proto__":{"__proto__":{"method":"tools/call"}},"params":{"name":"big"}}`, 5, true},
		{"params_protos", `{"method":"tools/call","params":{"__proto__":{"__proto__":{"x":1}},"name":"big"}}`, 5, true},
	})
}

// Every further top-level value is read, not only the second.
func TestCostThirdTopLevelValueIsCharged(t *testing.T) {
	runCostCases(t, []costCase{
		{"call_in_the_third_value", `{"id":1}{"id":2}{"method":"tools/call","params":{"name":"big"}}`, 5, false},
	})
}

// In the single-quoted (Jackson) reading a line comment ends at \r too.
func TestCostSingleQuotedReadingEndsLineCommentsAtCR(t *testing.T) {
	runCostCases(t, []costCase{
		{"single_quotes_and_a_cr", "{'method':'tools/call', // c\r'params':{'name':'big'}}", 5, false},
	})
}

// A body cut off after a member's colon, or after a __proto__ object's
// opening brace, is read as far as it goes: no panic.
func TestCostCutOffAfterAColonOrAProto(t *testing.T) {
	for _, body := range []string{`{"method":`, `{"method": `, `{"method":"tools/call","params":`, `{"method":"tools/call","params":{"name": `, `{"__proto__":{`, `{"method":"tools/call","params":{"__proto__":{ `} {
		if got := parse(t, body).Cost(toolsCallMeter, tableCost); got != 1 {
			t.Errorf("%q: Cost() = %d, want 1", body, got)
		}
	}
}
