package jsonrpc

import "testing"

func TestClientMethod(t *testing.T) {
	for _, m := range []string{"tools/call", "tools/list", "initialize", "ping", "resources/read", "tasks/result", "notifications/initialized"} {
		if !ClientMethod(m) {
			t.Errorf("ClientMethod(%q) = false", m)
		}
	}
	for _, m := range []string{"", "TOOLS/CALL", "tools/cal", "sampling/createMessage", "acme/search", "off", "*"} {
		if ClientMethod(m) {
			t.Errorf("ClientMethod(%q) = true", m)
		}
	}
}

// A name in other case, or an edit or two from a method, is a
// misspelling of it; a method, or a name far from every one (a vendor's
// own method), is not.
func TestMisspelling(t *testing.T) {
	for m, want := range map[string]string{
		"TOOLS/CALL":           "tools/call",
		"Tools/Call":           "tools/call",
		"tools/cal":            "tools/call",
		"tools/calls":          "tools/call",
		"tool/call":            "tools/call",
		"tools_call":           "tools/call",
		"toolscall":            "tools/call",
		"tools/lsit":           "tools/list",
		"prompt/get":           "prompts/get",
		"resource/read":        "resources/read",
		"PING":                 "ping",
		"initialise":           "initialize",
		"logging/setlevel":     "logging/setLevel",
		"TOOLS/CAL":            "tools/call",
		"Tools/Calls":          "tools/call",
		"PROMPT/GET":           "prompts/get",
		"tools/call\u200b":     "tools/call",
		"\ufefftools/call":     "tools/call",
		"tools\uff0fcall":      "tools/call",
		"t\u043e\u043els/call": "tools/call",
	} {
		if got, ok := Misspelling(m); !ok || got != want {
			t.Errorf("Misspelling(%q) = %q, %v; want %q", m, got, ok, want)
		}
	}
	for _, m := range []string{"tools/call", "ping", "pong", "tools/get", "acme/search", "sampling/createMessage", "off", "tools/run", "roots/list", "notifications/tools/list_changed"} {
		if got, ok := Misspelling(m); ok {
			t.Errorf("Misspelling(%q) = %q, want none", m, got)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"tools/call", "tools/cal", 1}, {"tools/call", "tools/list", 4},
		{"tools/call\u200b", "tools/call", 1}, {"t\u043e\u043els/call", "tools/call", 2},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
