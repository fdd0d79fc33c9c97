package mcplimit

import "testing"

// A string id holding invalid UTF-8 is matched by the text a decoder reads
// (U+FFFD for each bad byte): an answer echoing it decoded (escaped or
// not) or byte for byte ends the call.
func TestCallWatchMatchesAnInvalidUTF8IDAsDecoded(t *testing.T) {
	for _, c := range []struct {
		sent, echoed string
		match        bool
	}{
		{"\"a\xff\"", `"a\ufffd"`, true},
		{"\"a\xff\"", "\"a\xef\xbf\xbd\"", true},
		{"\"a\xff\"", "\"a\xff\"", true}, // echoed as sent, by a backend that copies bytes
		{"\"a\xff\"", `"a"`, false},
	} {
		body := `{"jsonrpc":"2.0","id":` + c.sent + `,"method":"tools/call","params":{"name":"slow"}}`
		w := watching(t, body)
		event := "data: {\"jsonrpc\":\"2.0\",\"id\":" + c.echoed + ",\"result\":{}}\n\n"
		if got := w.feed([]byte(event)); got != c.match {
			t.Errorf("sent %q, answered %s: answered = %v, want %v", c.sent, c.echoed, got, c.match)
		}
	}
}

// Integer values past what an int64 holds keep their own keys: ids that
// differ in value (1e19, 1e20, 1e400) are not one id, and an answer to one
// ends no call sent with another.
func TestCallWatchTellsHugeIntegerIDsApart(t *testing.T) {
	for _, c := range []struct {
		sent, echoed string
		match        bool
	}{
		{`1e19`, `1e20`, false},
		{`-1e19`, `-1e30`, false},
		{`1e19`, `1e400`, false},
		{`1e19`, `10000000000000000000`, true},
		{`1e15`, `1000000000000000`, true},
	} {
		body := `{"jsonrpc":"2.0","id":` + c.sent + `,"method":"tools/call","params":{"name":"slow"}}`
		w := watching(t, body)
		event := "data: {\"jsonrpc\":\"2.0\",\"id\":" + c.echoed + ",\"result\":{}}\n\n"
		if got := w.feed([]byte(event)); got != c.match {
			t.Errorf("sent %s, answered %s: answered = %v, want %v", c.sent, c.echoed, got, c.match)
		}
	}
}
