package jsonrpc

import (
	"strconv"
	"strings"
	"testing"
)

func TestWellFormedCall(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, true},
		{` {"jsonrpc":"2.0","method":"notifications/initialized"} ` + "\n", true},
		{`{"jsonrpc":"2.0","id":"a","method":"ping","params":[]}`, true},
		{`{"jsonrpc":"2.0","id":-1.5e3,"method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":1,"meth\u006fd":"ping"}`, true},
		{`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, true},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"x"}}]`, true},
		// Not JSON-RPC 2.0 as written.
		{`{"method":"ping","id":1}`, false},
		{`{"jsonrpc":"1.0","method":"ping","id":1}`, false},
		{`{"jsonrpc":2,"method":"tools/list","id":1}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":{"a":1}}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":true}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":null}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":[1]}`, false},
		{`{"jsonrpc":"2.0","method":5,"id":1}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":1,"params":"x"}`, false},
		{`{"method":"tools/call","params":{"name":"x"},"id":1}`, false},
		// Members twice, or in another case: readings disagree.
		{`{"jsonrpc":"2.0","jsonrpc":"2.0","method":"ping","id":1}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":1,"Method":"ping"}`, false},
		{`{"jsonrpc":"2.0","Method":"ping","id":1}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":1,"x":1,"X":2}`, false},
		{"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1,\"\u212a\":1,\"k\":2}", false},
		{`{"jsonrpc":"2.0","method":"ping","id":1,"\u0078":1,"X":2}`, false}, // an escaped name, decoded
		{`{"jsonrpc":"2.0","method":"ping","id":1,"p":{"\u0078":1,"x":2}}`, false},
		{`{"jsonrpc":"2.0","method":"ping","id":1,"p":{"\u0078":1,"y":2}}`, true},
		// A number cut short.
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":[-]}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1.]}`, false},
		// A value after the first, a string after an empty object too.
		{`{}"x"`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","p":{}} "x"`, false},
		// Not a request.
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},5]`, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2}]`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`, false},
		{`[]`, false},
		{`{}`, false},
		{`null`, false},
		{`5`, false},
		{`"x"`, false},
		// Surrogates escaped in pairs are characters; alone, or bytes
		// that are not UTF-8, strict parsers refuse them.
		{`{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":"\udc00\ud800","method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":"\ud800\u0041","method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":"x\ud800","method":"ping"}`, false},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\xff\"}", false},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\xc0\xaf\"}", false},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\xed\xa0\x80\"}", false},
		// Values common parsers read apart: out of a float64's range,
		// nested past serde's limit, a member twice anywhere.
		{`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":-1e309}}`, false},
		{`{"jsonrpc":"2.0","id":1e-400,"method":"ping"}`, true},
		// 1e350, which strconv.ParseFloat alone reads as 1e249.
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1` + strings.Repeat("0", 900) + `e-550}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1` + strings.Repeat("0", 900) + `e-600}}`, true},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"a","name":"b"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"t","params":{"arguments":{"q":1,"q":2}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"t","params":{"a":{"q":1},"b":{"q":2}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"t","params":[{"q":1},{"q":2}]}`, true},
		// 127 containers deep, and 128: serde refuses the 128th.
		{`{"jsonrpc":"2.0","id":1,"method":"t","params":{"a":` + strings.Repeat("[", 125) + strings.Repeat("]", 125) + `}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"t","params":{"a":` + strings.Repeat("[", 126) + strings.Repeat("]", 126) + `}}`, false},
		// A batch's responses must be messages too: an error is an
		// object with an integer code and a string message.
		{`[{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"x"}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, true},
		{`[{"jsonrpc":"2.0","id":9,"error":"x"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		{`[{"jsonrpc":"2.0","id":9,"error":{}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		{`[{"jsonrpc":"2.0","id":9,"error":null},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		{`[{"jsonrpc":"2.0","id":9,"error":{"message":"x"}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		{`[{"jsonrpc":"2.0","id":9,"error":{"code":"x","message":"x"}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		{`[{"jsonrpc":"2.0","id":9,"error":{"code":1.5,"message":"x"}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		{`[{"jsonrpc":"2.0","id":9,"error":{"code":1,"message":5}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		// A method beside a result or an error reads as a response too.
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","result":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","error":{"code":1,"message":"x"}}`, false},
		// The version as any parser decodes it.
		{`{"jsonrpc":"\u0032.0","id":1,"method":"ping"}`, true},
		{`{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`, true},
		// Not JSON, or more than one value.
		{"\ufeff" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}{}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"} x`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping",}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, false},
		{``, false},
	} {
		if got := WellFormedCall([]byte(tc.body)); got != tc.want {
			t.Errorf("WellFormedCall(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// Objects side by side, each with as many members as make a set of their
// names, are read each on its own: the second holds no name of the first
// twice.
func TestWellFormedCallSiblingObjectsWithManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"m":0`)
	for i := range 40 {
		b.WriteString(`,"m` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString(`}`)
	o := b.String()
	if !WellFormedCall([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":[` + o + `,` + o + `]}`)) {
		t.Fatal("two objects with the same 41 member names each are not well formed")
	}
}

// A request with many members of distinct names is well formed; one of
// them repeated at the end, in another case, makes it not.
func TestWellFormedCallManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"ping"`)
	for i := range 100000 {
		b.WriteString(`,"m` + strconv.Itoa(i) + `":0`)
	}
	if !WellFormedCall([]byte(b.String() + `}`)) {
		t.Fatal("a request with many distinct members is not well formed")
	}
	for _, again := range []string{"M17", "M1", "ID"} { // a name among the first members too
		if WellFormedCall([]byte(b.String() + `,"` + again + `":1}`)) {
			t.Fatalf("member %s repeated in another case went unseen", again)
		}
	}
}
