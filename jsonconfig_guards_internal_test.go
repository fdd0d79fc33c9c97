package mcplimit

import "testing"

// A JSON member spelt as one of the handler's unexported fields is an
// unknown field, named as the decoder names it, not a value of the
// field's type that failed to decode.
func TestUnexportedFieldNameIsAnUnknownField(t *testing.T) {
	err := new(Handler).UnmarshalJSON([]byte(`{"unset":5}`))
	if err == nil || err.Error() != `json: unknown field "unset"` {
		t.Fatalf("error %v, want json: unknown field \"unset\"", err)
	}
}
