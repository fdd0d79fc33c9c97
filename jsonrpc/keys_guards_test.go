package jsonrpc

import "testing"

// An escaped __proto__ key in params is a prototype too.
func TestCostEscapedProtoInParams(t *testing.T) {
	runCostCases(t, []costCase{
		{"escaped_params_proto", `{"method":"tools/call","params":{"__proto\u005f_":{"name":"big"}}}`, 5, true},
	})
}

// An error member in another case makes a response, as encoding/json reads it.
func TestResponseErrorInAnotherCase(t *testing.T) {
	r := parse(t, `{"jsonrpc":"2.0","id":1,"ERROR":{"code":-32600,"message":"x"}}`)
	if !r.Entry(0).Response() {
		t.Errorf("Response() = false for an ERROR member")
	}
}

// arguments in another case are arguments, as encoding/json reads them.
func TestArgArgumentsInAnotherCase(t *testing.T) {
	r := parse(t, `{"method":"tools/call","params":{"name":"search","Arguments":{"limit":500}}}`)
	if max, numeric, present := r.Entry(0).Arg("limit"); max != 500 || !numeric || !present {
		t.Errorf("Arg = (%v, %v, %v), want (500, true, true)", max, numeric, present)
	}
}
