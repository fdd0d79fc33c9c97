package jsonrpc

import "testing"

// Guards of the Hjson conversion that no other test pins down.
func TestHjsonGuards(t *testing.T) {
	for _, c := range []struct {
		in    string
		goNUL bool
		want  string // "" when Hjson refuses the body
	}{
		// JavaScript's trim (hjson-js) drops U+00A0, U+FEFF, U+2028...
		// from the end of a quoteless string, not only bytes up to the space.
		{"{a: x\u00a0\n b: y\u2028\n}", false, `{"a":"x","b":"y"}`},
		// A lone \r ends a quoteless value as \n does.
		{"{a: x\rb: y\r}", false, `{"a":"x","b":"y"}`},
		// A quoteless value may not start with ,:[]{}.
		{"{a: ]x\n}", false, ""},
		{"{a: :x\n}", false, ""},
		// Only ''' opens a multiline string, not "''.
		{"{a: \"''x'''\n}", false, ""},
		// To hjson-go a NUL in a key name is the end of the input.
		{"a\x00: 1", true, ""},
		{"{a\x00: 1}", true, ""},
	} {
		got, ok := hjsonJSON(nil, []byte(c.in), c.goNUL)
		if c.want == "" && ok || c.want != "" && (!ok || string(got) != c.want) {
			t.Errorf("hjsonJSON(%q, goNUL %v) = %s, %v; want %q", c.in, c.goNUL, got, ok, c.want)
		}
	}
}

// A call whose Hjson reading needs those guards is charged.
func TestCostHjsonGuards(t *testing.T) {
	runCostCases(t, []costCase{
		{"nbsp_after_the_tool", "method: tools/call\nparams: {name: big\u00a0\n}", 5, false},
		{"nbsp_after_the_method", "method: tools/call\u00a0\nparams: {name: big\n}", 5, false},
		{"bare_cr_between_members", "method: tools/call\rparams: {name: big\r}", 5, false},
	})
}

// hjson-js and hjson-go read a quoteless number out of a double's range as
// a quoteless string running to the end of its line, so "x: 1e400}" does
// not close params: the call below is one of big to them, and the limit
// argument stands beside x.
func TestHjsonOverflowingNumberIsAString(t *testing.T) {
	runCostCases(t, []costCase{
		{"tool_after_an_overflowing_number", "params: {x: 1e400}\nname: big\n}\nmethod: tools/call\n", 5, false},
		{"tool_after_a_negative_overflow", "params: {x: -1e400}\nname: big\n}\nmethod: tools/call\n", 5, false},
	})
	runLenientArgCases(t, []lenientArgCase{
		{"arg_after_an_overflowing_number", "method: tools/call\nparams: {arguments: {x: 1e400}\nlimit: 1000\n}\nname: search\n}\n", 1000, true},
	})
	for _, c := range []struct{ in, want string }{
		{"{a: 1e400\n}", `{"a":"1e400"}`},
		{"{a: 1e400, b: 2\n}", `{"a":"1e400, b: 2"}`},
		{"{a: 1e308, b: 1e-400, c: 0e400\n}", `{"a":1e308,"b":1e-400,"c":0e400}`},
	} {
		if got, ok := hjsonJSON(nil, []byte(c.in), false); !ok || string(got) != c.want {
			t.Errorf("hjsonJSON(%q) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
}
