package jsonrpc

import (
	"strings"
	"testing"
)

// The conversion agrees with qs 6.13 (qs.parse with body-parser's options:
// allowPrototypes, depth 32, as body-parser sets it since 1.20.3 without
// its strictDepth, which refuses a deeper key) on these bodies, but for
// fields of one name, each a member of its own here (qs merges them), and
// the places of elements past two segments.
func TestFormJSONReadsAsQsDoes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a=1&b", `{"a":"1","b":""}`},
		{"a[b][c]=d&a[e]=f", `{"a":{"b":{"c":"d"}},"a":{"e":"f"}}`},
		{"a%5Bb%5d=c", `{"a":{"b":"c"}}`},
		{"a[b=c]=d", `{"a":{"b=c":"d"}}`},            // the key ends at "]="
		{"a%5Bb=c%5D=d", `{"a":{"b=c":"d"}}`},        // %5D too
		{"a[b]x[c]=1", `{"a":{"b":{"c":"1"}}}`},      // text between segments is skipped
		{"a[[b]]=1", `{"a[":{"b":"1"}}`},             // a '[' before the next ']' opens no segment
		{"a[b=1", `{"a[b":"1"}`},                     // no closing bracket: one name
		{"[x][y]=1&[]=2", `{"x":{"y":"1"},"0":"2"}`}, // no name: the first segment is one
		{"a=b+c%20d%2B", `{"a":"b c d+"}`},
		{"%E2%82%AC=%ZZ+1", `{"€":"%ZZ 1"}`}, // a bad escape leaves the value undecoded
		{"a=%C3+%5B", `{"a":"%C3 ["}`},       // as does a run of escapes that is not UTF-8
		{"a=%C3%A9%41", `{"a":"éA"}`},
		{"a\"=b\\%0A", `{"a\"":"b\\\u000a"}`},
		{"=x&&__proto__[method]=y&a[__proto__][b]=c&k=v", `{"a":{},"k":"v"}`},
		{"a[b][__proto__]=1&c.__proto__=2", `{"a":{"b":{}},"c.__proto__":"2","c":{}}`}, // an empty object where __proto__ starts
		{"a=1&a=2", `{"a":"1","a":"2"}`},
		// Past 32 segments, the rest of the key is one, from its next
		// segment on (the text before that skipped).
		{"a" + strings.Repeat("[b]", 32) + "x[c][d]=1", `{"a":` + strings.Repeat(`{"b":`, 32) + `{"[c][d]":"1"}` + strings.Repeat("}", 32) + "}"},
		{"a" + strings.Repeat("[b]", 32) + "[c=1", `{"a":` + strings.Repeat(`{"b":`, 32) + `"1"` + strings.Repeat("}", 32) + "}"},
		// [] and an index up to qs's arrayLimit make arrays, without
		// holes; a larger index or one with a leading zero is a key.
		{"a[]=1&a[2][b]=3", `{"a":["1"],"a":[null,{"b":"3"}]}`},
		{"a[b][0][]=1", `{"a":{"b":[["1"]]}}`},
		{"a[5][b]=1&a[b][7]=2", `{"a":[{"b":"1"}],"a":{"b":["2"]}}`},
		{"a[0]=x&a[5][b]=1&a[5][c]=2", `{"a":["x"],"a":[null,{"b":"1"}],"a":[null,{"c":"2"}]}`},
		{"a[3]=b&a[]=a", `{"a":[null,"b"],"a":["a"]}`},
		{"a[2][4]=x&a[2][1]=y&a[7][4]=z", `{"a":[[null,"x"]],"a":[["y"]],"a":[null,["z"]]}`},
		// Past two segments an element is first in its array, wherever
		// qs puts it (here second).
		{"a[b][c][3]=x&a[b][c][5]=y", `{"a":{"b":{"c":["x"]}},"a":{"b":{"c":["y"]}}}`},
		{"a[20]=1&a[21]=2&a[01]=3&a[-1]=4", `{"a":["1"],"a":{"21":"2"},"a":{"01":"3"},"a":{"-1":"4"}}`},
		{"a.0=1", `{"a.0":"1","a":["1"]}`},
		{"\xef\xbb\xbfa=1&\xef\xbb\xbfb=2", "{\"a\":\"1\",\"\xef\xbb\xbfb\":\"2\"}"}, // the body's BOM is dropped first
		// With allowDots (co-body's default) too: a dot followed by text
		// up to the next dot or '[' makes a segment, even in brackets.
		{"a.b.c=1", `{"a.b.c":"1","a":{"b":{"c":"1"}}}`},
		{"p[x].y%2Ez=1", `{"p":{"x":"1"},"p":{"x":{"y":{"z":"1"}}}}`},
		{"a[b.c]=1", `{"a":{"b.c":"1"},"a[b":{"c":"1"}}`}, // a[b[c]]
		{"a..b=1&.c=2&d.=3", `{"a..b":"1","a.":{"b":"1"},".c":"2","c":"2","d.":"3"}`},
		{"a.b[c]=1", `{"a.b":{"c":"1"},"a":{"b":{"c":"1"}}}`}, // a dot's segment ends at '[' (/\.([^.[]+)/g)
		// qs reads %5d as a bracket in either case, before it looks for "]=".
		{"a[b%5dx=y%5d=c", `{"a":{"b":"c"}}`},
		// A lone % leaves the whole value undecoded, its valid escapes too.
		{"a=%41%", `{"a":"%41%"}`},
		{"a=%41%4", `{"a":"%41%4"}`},
		// A field ending in a bracket, without "=".
		{"a=1&b]", `{"a":"1","b]":""}`},
		{"a=1&b%5D", `{"a":"1","b]":""}`},
	} {
		got, ok := formJSON(nil, []byte(c.in))
		if !ok || string(got) != c.want {
			t.Errorf("formJSON(%q) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{"", "abc", "a&b", "=1&=2", "{\"method\":\"tools/call\"}", "__proto__=1"} {
		if got, ok := formJSON(nil, []byte(in)); ok {
			t.Errorf("formJSON(%q) = %s; it holds no field qs keeps", in, got)
		}
	}
}

// A form an Express app parses with qs (express.urlencoded({extended:
// true})) and hands to the TypeScript SDK as the message runs its call:
// the body costs the call's tool, and its arguments meet their bounds.
func TestFormReadingIsCharged(t *testing.T) {
	runCostCases(t, []costCase{
		{"tool_call", "jsonrpc=2.0&id=1&method=tools/call&params[name]=big", 5, false},
		{"escaped", "jsonrpc=2.0&id=1&method=tools%2Fcall&params%5Bname%5D=photo", 3, false},
		{"plus_is_a_space", "method=tools/call&params[name]=big+", 1, false},
		{"first_segment_is_the_name", "[method]=tools/call&[params][name]=big", 5, false},
		{"proto_is_dropped", "method=tools/call&params[__proto__][name]=big", 1, false},
		{"not_a_call", "method=tools/list&params[name]=big", 1, false},
		{"after_a_bom", "\xef\xbb\xbfmethod=tools%2Fcall&params[name]=big&jsonrpc=2.0&id=1", 5, false},
		{"dotted_as_koa_reads_it", "jsonrpc=2.0&id=1&method=tools%2Fcall&params.name=big", 5, false},
		{"dotted_escaped", "jsonrpc=2.0&id=1&method=tools%2Fcall&params%2Ename=big", 5, false},
		{"after_a_question_mark", "?method=tools%2Fcall&params.name=big&jsonrpc=2.0&id=1", 5, false},
		// params as an array, which qs makes of indexes: by position, or
		// holding the params object.
		{"params_by_position", "method=tools/call&params[0]=big&params[1][q]=x", 5, false},
		{"params_pushed", "method=tools/call&params[]=big", 5, false},
		{"params_dotted_index", "method=tools/call&params.0=photo", 3, false},
		{"params_object_in_an_array", "method=tools/call&params[0][name]=big", 5, false},
		// qs drops an array's holes: a lone params[5][name]=big is
		// params[0][name]=big, a lone params[1]=big is big by position,
		// and beside params[0] given too, params[5] is the second element.
		{"params_object_at_a_later_index", "method=tools/call&params[5][name]=big", 5, false},
		{"params_by_a_later_position", "method=tools/call&params[1]=big", 5, false},
		{"params_pushed_after_a_later_index", "method=tools/call&params[3][q]=x&params[]=big", 5, false},
		{"later_index_after_the_first", "method=tools/call&params[0]=echo&params[5]=big", 1, false},
		{"later_dotted_index_after_the_first", "method=tools/call&params.0=echo&params.5=big", 1, false},
		{"dotted_index_after_a_bracketed_one", "method=tools/call&params[0]=echo&params.5=big", 1, false},
		{"lowercase_5d_before_an_equals", "method=tools/call&params[name%5dx=y%5d=big", 5, false},
		{"dotted_index_then_bracket", "method=tools/call&params.0[name]=big", 5, false},
		{"dotted_then_bracket", "method=tools/call&params.x[y]=1&params.name=big", 5, false},
		// qs leaves the key undecoded but its brackets: params[n%61me] names nothing.
		{"lone_percent_leaves_the_key_undecoded", "method=tools/call&params[n%61me]%=big", 1, false},
	})
	runLenientArgCases(t, []lenientArgCase{
		{"argument_is_a_string", "method=tools/call&params[name]=search&params[arguments][limit]=1000", 0, false},
		{"argument_after_a_dot", "method=tools/call&params[name]=search&params[arguments].limit=1000", 0, false},
		{"argument_emptied_by_proto", "method=tools/call&params[name]=search&params[arguments][limit][__proto__]=1000", 0, false},
		{"argument_holding_proto", "method=tools/call&params.name=search&params.arguments.limit.__proto__=1000", 0, false},
		{"argument_by_position", "method=tools/call&params[0]=search&params[1][limit]=1000", 0, false},
		{"arguments_at_a_later_position", "method=tools/call&params[2]=search&params[9][limit]=1000", 0, false},
	})
}
