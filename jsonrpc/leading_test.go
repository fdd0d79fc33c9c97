package jsonrpc

import "testing"

// A body cut short still names its id when the id came whole before the
// cut: a refusal of it can then echo the id.
func TestLeadingID(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"number", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"arguments":{"text":"xxxx`, "42"},
		{"string", `{"id":"a-1","method":"tools/c`, `"a-1"`},
		{"after_params", `{"method":"tools/call","params":{"name":"x"},"id":7,"more":"xx`, "7"},
		{"exact_spelling_wins", `{"ID":1,"id":2,"x":"…`, "2"},
		{"folded_spelling", `{"Id":3,"x":"…`, "3"},
		{"nested_id_is_not_the_message's", `{"params":{"id":5,"arguments":{"t":"xx`, ""},
		{"number_at_the_cut", `{"method":"ping","id":12`, ""},
		{"string_at_the_cut", `{"method":"ping","id":"ab`, ""},
		{"before_the_id", `{"method":"tools/call","params":{"arguments":{"text":"xx`, ""},
		{"batch", `[{"id":1,"method":"ping"},{"id":2,"meth`, ""},
		{"not_json", `id=1&method=ping`, ""},
		{"empty", ``, ""},
		{"byte_order_mark", "\xef\xbb\xbf{\"id\":9,\"method\":\"p", "9"},
		{"response", `{"jsonrpc":"2.0","id":4,"result":{"t":"xxx`, ""},
		{"error_response", `{"jsonrpc":"2.0","error":{"code":1},"id":4,"x":"xxx`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(LeadingID(nil, []byte(c.body))); got != c.want {
				t.Errorf("LeadingID = %q, want %q", got, c.want)
			}
		})
	}
	if got := string(LeadingID([]byte("x"), []byte(`{"id":1,`))); got != "x1" {
		t.Errorf("LeadingID appends to dst: %q, want %q", got, "x1")
	}
}
