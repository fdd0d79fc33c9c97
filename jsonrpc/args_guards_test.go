package jsonrpc

import "testing"

// In a single-quoted (JSON5) reading, a quoted string inside a nested
// value is skipped whole: a bracket in it neither opens nor closes.
func TestArgSingleQuotedStringInANestedValue(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"search","arguments":` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		// Only JSON5 reads \x6d (m) in a key: the single-quoted reading is
		// the only one that sees limit.
		{"close_brace_in_a_nested_string", call(`{'x':{'a':'}'},'li\x6dit':500}`), 500, true},
		{"open_bracket_in_a_nested_string", call(`{x:['{'],li\u006dit:500}`), 500, true},
	})
}

// A cut-off UTF-8 sequence read as U+FFFD still matches with separators
// ignored, as other keys do.
func TestArgCutOffUTF8KeyMatchesWithoutSeparators(t *testing.T) {
	r := parse(t, `{"method":"tools/call","params":{"name":"search","arguments":{"`+"\xe2\x82si_ze"+`":5000}}}`)
	if max, numeric, present := r.Entry(0).Arg("\uFFFDsize"); max != 5000 || !numeric || !present {
		t.Errorf("Arg = (%v, %v, %v), want (5000, true, true)", max, numeric, present)
	}
}

// A key cut at a NUL in its first byte reads as the empty key, which an
// argument name of separators only matches (as li_mit matches limit).
func TestArgKeyCutAtALeadingNUL(t *testing.T) {
	r := parse(t, `{"method":"tools/call","params":{"name":"search","arguments":{"\u0000x":5000}}}`)
	if max, numeric, present := r.Entry(0).Arg("_"); max != 5000 || !numeric || !present {
		t.Errorf("Arg(_) = (%v, %v, %v), want (5000, true, true)", max, numeric, present)
	}
}

// Zero, and numbers that start with it, are numbers.
func TestArgZeroIsANumber(t *testing.T) {
	for body, want := range map[string]float64{`{"limit":0}`: 0, `{"limit":0.5}`: 0.5, `{"limit":0e3,"limit":-1}`: 0} {
		r := parse(t, `{"method":"tools/call","params":{"name":"search","arguments":`+body+`}}`)
		if max, numeric, present := r.Entry(0).Arg("limit"); max != want || !numeric || !present {
			t.Errorf("%s: Arg = (%v, %v, %v), want (%v, true, true)", body, max, numeric, present, want)
		}
	}
}

// Where single quotes are no quotes (the lenient, Kotlin reading), a key
// starting with one is an unquoted key that ends at the colon: the members
// after it are that reading's own.
func TestArgSingleQuoteIsNoQuoteInTheLenientReading(t *testing.T) {
	call := func(args string) string {
		return `{method:tools/call,params:{name:search,arguments:` + args + `}}`
	}
	runLenientArgCases(t, []lenientArgCase{
		{"first_key", call(`{'x:1,limit:500,y':2}`), 500, true},
		{"later_key", call(`{a:1,'x:1,limit:500,y':2}`), 500, true},
	})
}
