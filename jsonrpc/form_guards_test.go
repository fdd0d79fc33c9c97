package jsonrpc

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// Guards of the form conversion that no other test pins down.
func TestFormGuards(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// qs reads %5d as a bracket in either case, before it looks for "]=".
		{"a[b%5dx=y%5d=c", `{"a":{"b":"c"}}`},
		// A lone % leaves the whole value undecoded, its valid escapes too.
		{"a=%41%", `{"a":"%41%"}`},
		{"a=%41%4", `{"a":"%41%4"}`},
		// A field ending in a bracket, without "=".
		{"a=1&b]", `{"a":"1","b]":""}`},
		{"a=1&b%5D", `{"a":"1","b]":""}`},
		// allowDots: a dot's segment ends at '[' (/\.([^.[]+)/g).
		{"a.b[c]=1", `{"a.b":{"c":"1"},"a":{"b":{"c":"1"}}}`},
	} {
		got, ok := formJSON(nil, []byte(c.in))
		if !ok || string(got) != c.want {
			t.Errorf("formJSON(%q) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
}

// A call whose form reading needs those guards is charged.
func TestCostFormGuards(t *testing.T) {
	runCostCases(t, []costCase{
		{"lowercase_5d_before_an_equals", "method=tools/call&params[name%5dx=y%5d=big", 5, false},
		{"dotted_index_then_bracket", "method=tools/call&params.0[name]=big", 5, false},
		{"dotted_then_bracket", "method=tools/call&params.x[y]=1&params.name=big", 5, false},
		// qs leaves the key undecoded but its brackets: params[n%61me] names nothing.
		{"lone_percent_leaves_the_key_undecoded", "method=tools/call&params[n%61me]%=big", 1, false},
	})
}

// Naming the arrays of a key nested 20,000 levels deep costs the key's
// length, not its length squared: a name per level spelling the whole
// path before it allocated 6 GB for this 60 KB body (and more than a
// minute of work for a 1 MiB one); the walk allocates about 10 MB.
func TestFormArraysOfADeepKeyCostItsLength(t *testing.T) {
	body := []byte("method=tools/call&params" + strings.Repeat("[0]", 20000) + "=big")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, ok := formJSON(nil, body)
	runtime.ReadMemStats(&after)
	if !ok || !bytes.HasSuffix(out, []byte(`"big"`+strings.Repeat("]", 20000)+"}")) {
		t.Fatalf("formJSON of the deep key = %.40s…, %v", out, ok)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("formJSON of a %d-byte body allocated %d bytes", len(body), n)
	}
}
