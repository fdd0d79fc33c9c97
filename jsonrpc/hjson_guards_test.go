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
