package jsonrpc

import "testing"

func TestWellFormedCallGuards(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		// A high surrogate needs a low one after it, not any escape past it.
		{`{"jsonrpc":"2.0","id":"\ud800\ue000","method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":"\ud800\uffff","method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":"\udbff\udfff","method":"ping"}`, true},
		// A string value is no member name, even one equal to another name.
		{`{"jsonrpc":"2.0","id":"id","method":"method","params":{"a":"a","A":{}}}`, false},
		{`{"jsonrpc":"2.0","id":"id","method":"method","params":{"a":"a","b":"A"}}`, true},
	} {
		if got := WellFormedCall([]byte(tc.body)); got != tc.want {
			t.Errorf("WellFormedCall(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
