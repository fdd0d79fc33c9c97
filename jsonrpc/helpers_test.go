package jsonrpc

import (
	"strings"
	"testing"
)

// toolsCallMeter is the default meter: only tools/call costs.
var toolsCallMeter = Meter{Methods: []string{ToolsCall}}

// tableCost is the per-tool cost table used by tests: big 5, photo 3, the
// camera emoji 4, anything else 1.
func tableCost(tool []byte) int64 {
	switch string(tool) {
	case "big":
		return 5
	case "photo":
		return 3
	case "\U0001F4F7":
		return 4
	case "\uFFFDy":
		return 6
	}
	return 1
}

// parse parses body into a fresh Request.
func parse(t testing.TB, body string) *Request {
	t.Helper()
	r := new(Request)
	r.Parse([]byte(body))
	return r
}

// nest returns depth levels of open+close wrapped around inner.
func nest(open, inner, close string, depth int) string {
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

// methods collects Entry.Methods.
func methods(e *Entry) []string {
	var out []string
	e.Methods(func(m []byte) { out = append(out, string(m)) })
	return out
}

// tools collects Entry.Tools.
func tools(e *Entry) []string {
	var out []string
	e.Tools(func(n []byte) { out = append(out, string(n)) })
	return out
}
