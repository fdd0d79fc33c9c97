package jsonrpc

import "testing"

// The conversion agrees with hjson-js 3.2.2 (checked against it on these
// and on 80,000 mutated bodies): a line break separates members, keys
// and strings need no quotes, a quoteless value runs to the end of its
// line unless it is a number or literal cut by a comma, a bracket or a
// comment, and multiline strings lose their indentation.
func TestHjsonJSONReadsAsHjsonDoes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"{\"a\":1\nb:2}", `{"a":1,"b":2}`},
		{"{\n a: 1\n b: tools/call # not a comment\n}", `{"a":1,"b":"tools/call # not a comment"}`},
		{"a: 1\nb: x", `{"a":1,"b":"x"}`}, // braces left out
		{"{a: 5 # c\n b: true// c\n c: null/* c */}", `{"a":5,"b":true,"c":null}`},
		{"{a: 5 apples, b: 1\n}", `{"a":"5 apples, b: 1"}`},
		// A number out of a double's range is a quoteless string to the
		// end of its line, to hjson-js and hjson-go alike.
		{"{a: 1., b: -0, c: 1.e3, d: 1e400\n}", `{"a":1.0,"b":-0,"c":1.0e3,"d":"1e400"}`},
		{"{a: 1e400, b: 2\n}", `{"a":"1e400, b: 2"}`},
		{"{a: 1e400,,]}#//x, b: 2\n}", `{"a":"1e400,,]}#//x, b: 2"}`}, // every end after the first is part of it
		{"{a: 1e308, b: 1e-400, c: 0e400\n}", `{"a":1e308,"b":1e-400,"c":0e400}`},
		{"{a: 01\n b: -.5\n c: +5\n d: 1e\n}", `{"a":"01","b":"-.5","c":"+5","d":"1e"}`},
		{"{a: 'it\\'s \"q\"', b: \"\\u0041\\/\"}", `{"a":"it's \"q\"","b":"\u0041\/"}`},
		{"{a: '''tools/call''', b:\n  '''\n  line1\n    line2\n  '''\n}", `{"a":"tools/call","b":"line1\nline2"}`},
		{"{id\": 1, é: ü\x01\n}", `{"id\"":1,"é":"ü"}`},    // hjson-js keeps the \x01; no name has one
		{"{a:\u00a0true , b: 1\n}", `{"a":"true , b: 1"}`}, // a literal starts with its letter
		{"[\n {a: 1}\n [2 3]\n 4\n]", `[{"a":1},["2 3]"]`},
		{"{a:[1\n2\n3]}", `{"a":[1,2,3]}`},
		{"{a: x\r\nb: y\r\n}", `{"a":"x","b":"y"}`},
		{"{}", `{}`},
		{"[]", `[]`},
		{"{a:1,}", `{"a":1}`},
	} {
		got, ok := hjsonJSON(nil, []byte(c.in), false)
		if c.in == "[\n {a: 1}\n [2 3]\n 4\n]" {
			// [2 3] is "2 3]" to the end of the line, and the array stays open.
			if ok {
				t.Errorf("hjsonJSON(%q) = %s, want it refused", c.in, got)
			}
			continue
		}
		if !ok || string(got) != c.want {
			t.Errorf("hjsonJSON(%q) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{
		"", " ", "5", `"x"`, "{a:1,,b:2}", "{a b:1}", "{:1}", "{a}", "{a:1}}", `{a: "\x"}`,
		"{a: \"line\nbreak\"}", "{a: '''x", "{a: ''''}", "{a:1", "a:1\n}", "{a: {b: 1}", "{,}",
	} {
		if got, ok := hjsonJSON(nil, []byte(in), false); ok {
			t.Errorf("hjsonJSON(%q) = %s; Hjson refuses it", in, got)
		}
	}
}

// A backend parsing with Hjson runs what its reading holds: a call
// whose members are separated by line breaks, whose keys or strings lack
// quotes, or whose key lost its opening quote. That reading is charged.
func TestCostHjsonIsAReading(t *testing.T) {
	runCostCases(t, []costCase{
		{"line_break_before_an_unquoted_key", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"\nparams:{\"name\":\"big\"}}", 5, false},
		{"quoted_keys_on_lines", "{\n \"jsonrpc\": \"2.0\"\n \"id\": 1\n \"method\": \"tools/call\"\n params: {\n  \"name\": \"big\"\n }\n}", 5, false},
		{"nothing_quoted", "{\n jsonrpc: 2.0\n id: 1\n method: tools/call\n params: {\n  name: big\n }\n}", 5, false},
		{"key_missing_its_opening_quote", `{"jsonrpc":"2.0",id":1,"method":"tools/call","params":{"name":"big"}}`, 5, false},
		{"multiline_strings_without_braces", "method: '''tools/call'''\nparams: {name: '''\n    big\n    '''\n}", 5, false},
		{"batch", "[\n {\n  method: tools/call\n  params: {\n   name: big\n  }\n }\n {\n  method: tools/call\n  params: {\n   name: photo\n  }\n }\n]", 8, false},
		// Read alike by the lenient scan and by Hjson: the costlier
		// reading counts, once.
		{"trailing_comma", `{"method":"tools/call","params":{"name":"big"},}`, 5, false},
		// To Hjson the name runs to the end of the line: big} is no tool.
		{"name_to_the_end_of_the_line", "{method: tools/call, params: {name: big}}\n", 5, false},
		// An out-of-range number runs to the end of its line: "1e400}"
		// does not close params.
		{"tool_after_an_overflowing_number", "params: {x: 1e400}\nname: big\n}\nmethod: tools/call\n", 5, false},
		{"tool_after_a_negative_overflow", "params: {x: -1e400}\nname: big\n}\nmethod: tools/call\n", 5, false},
	})
}

// Each reading of an invalid body is what one backend runs: a bound on
// batch sizes and the calls in flight take the largest, not their sum.
func TestLargestAndCallsTakeOneReading(t *testing.T) {
	r := parse(t, "[\n {\n  method: tools/call\n  id: 7\n }\n {\n  method: tools/call\n }\n]")
	// The lenient scan stops at id, after one entry; Hjson reads two.
	if r.Valid() || r.Scanned() != 3 {
		t.Fatalf("Valid %v, Scanned %d: want an invalid body read twice, 1 and 2 entries", r.Valid(), r.Scanned())
	}
	if got := r.Largest(); got != 2 {
		t.Errorf("Largest() = %d, want 2", got)
	}
	if got := r.Calls(toolsCallMeter); got != 2 {
		t.Errorf("Calls() = %d, want 2", got)
	}
	if got := r.Cost(toolsCallMeter, tableCost); got != 2 {
		t.Errorf("Cost() = %d, want 2", got)
	}
	e := r.Entry(1) // the Hjson reading's first entry
	if !e.HasMethod("tools/call") || string(e.ID()) != "7" {
		t.Errorf("Hjson entry: method tools/call %v, id %s", e.HasMethod("tools/call"), e.ID())
	}
}

// An argument Hjson reads is bounded as any other reading of it.
func TestArgHjsonIsAReading(t *testing.T) {
	runLenientArgCases(t, []lenientArgCase{
		{"quoted_keys_on_lines", "{\n \"method\": \"tools/call\"\n \"params\": {\n  \"name\": \"search\"\n  \"arguments\": {\"limit\": 50}\n }\n}", 50, true},
		{"nothing_quoted", "{\n method: tools/call\n params: {\n  name: search\n  arguments: {\n   limit: 50\n  }\n }\n}", 50, true},
		{"a_point_without_digits", "method: tools/call\nparams: {\n arguments: {\n  limit: 50.\n }\n}", 50, true},
		{"quoteless_text", "method: tools/call\nparams: {\n arguments: {\n  limit: 50 pages\n }\n}", 0, false},
		{"after_an_overflowing_number", "method: tools/call\nparams: {arguments: {x: 1e400}\nlimit: 1000\n}\nname: search\n}\n", 1000, true},
	})
}

// hjson-go reads a NUL outside quoted strings as the end of the input, and
// trims what Go's strings.TrimSpace trims after a literal: a body with a
// NUL (or U+0085 or U+FEFF) is read its way too.
func TestHjsonGoReadsNULAsTheEnd(t *testing.T) {
	for _, c := range []struct{ in, js, goWant string }{
		{"{a: 1\n}\x00x", "", `{"a":1}`},
		{"{\"x\":\x00{\n\"a\":1}", "", `{"x":"{","a":1}`}, // a string to the line's end, trimmed
		{"{a: x\x00y\n}", `{"a":"x\u0000y"}`, ""},
		{"a: x\x00y", `{"a":"x\u0000y"}`, `{"a":"x"}`},
		{"{a: true\u0085, b: 1\n}", "{\"a\":\"true\u0085, b: 1\"}", `{"a":true,"b":1}`},
		{"{a: true\ufeff, b: 1\n}", `{"a":true,"b":1}`, "{\"a\":\"true\ufeff, b: 1\"}"},
		{"{\"a\": \"x\x00\"}", `{"a":"x\u0000"}`, `{"a":"x\u0000"}`},
		{"{a: '''x\x00'''}", `{"a":"x\u0000"}`, ""},
	} {
		for _, mode := range []struct {
			goNUL bool
			want  string
		}{{false, c.js}, {true, c.goWant}} {
			got, ok := hjsonJSON(nil, []byte(c.in), mode.goNUL)
			if mode.want == "" && ok || mode.want != "" && string(got) != mode.want {
				t.Errorf("hjsonJSON(%q, goNUL %v) = %s, %v; want %q", c.in, mode.goNUL, got, ok, mode.want)
			}
		}
	}
}

// What hjson-go reads of a body holding a NUL is charged, bounded and
// counted against max_batch like any other reading.
func TestHjsonGoReadingIsCharged(t *testing.T) {
	runCostCases(t, []costCase{
		{"nul_before_a_value", "{\"jsonrpc\":\"2.0\",\"id\":1,\"x\":\x00{\n\"method\":\"tools/call\",\"params\":{\"name\":\"big\"}}", 5, false},
		{"nul_after_the_body", "{method: tools/call\nparams: {name: big\n}\n}\x00x", 5, false},
	})
	r := parse(t, "[\n{method: tools/call\nid: 1\n}\n{method: tools/call\nid: 2\n}\n{method: tools/call\nid: 3\n}\n{method: tools/call\nid: 4\n}\n]\x00x")
	if got := r.Largest(); got != 4 {
		t.Errorf("Largest() = %d, want hjson-go's 4 entries", got)
	}
	runLenientArgCases(t, []lenientArgCase{
		{"nul_after_the_body", "{method: tools/call\nparams: {name: search\narguments: {limit: 1000}\n}\n}\x00x", 1000, true},
	})
}
