package mcplimit_test

import (
	"net/http"
	"testing"
)

// An argument only one reading sees is still bounded: a JSON5 one (\x6d
// is m) after a nested value holding a single-quoted brace, and the
// lenient (Kotlin) one, where a single quote is part of an unquoted key.
func TestArgBoundSeesKeysOnlyOneQuoteReadingFinds(t *testing.T) {
	e := start(t, "tool echo {\narg limit max 10\n}")
	for _, args := range []string{`{'x':{'a':'}'},'li\x6dit':500}`, `{'x:1,limit:500,y':2}`} {
		r := e.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`)
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || got.Error.Code != -32602 {
			t.Fatalf("arguments %s: %d %s, want 400 and -32602", args, r.Status, r.Body)
		}
	}
}

// Zero is a number within any bound: a call with limit 0 passes.
func TestArgBoundAdmitsZero(t *testing.T) {
	e := start(t, "tool echo {\narg limit max 10\n}")
	for _, v := range []string{`0`, `0.5`} {
		r := e.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","limit":` + v + `}}}`)
		if r.Status != http.StatusOK {
			t.Fatalf("limit %s: %d %s, want 200", v, r.Status, r.Body)
		}
	}
}
