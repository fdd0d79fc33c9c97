package jsonrpc

import "testing"

// A body of more than one value is no single message: the id of a later
// one is not the request's.
func TestLeadingIDOfALaterValueIsNone(t *testing.T) {
	for _, body := range []string{
		`{"x":1} {"id":5,"method":"tools/call","params":{"arguments":{"t":"xx`,
		`{} {"id":5,"method":"tools/c`,
	} {
		if got := string(LeadingID(nil, []byte(body))); got != "" {
			t.Errorf("LeadingID(%s) = %q, want none", body, got)
		}
	}
}
