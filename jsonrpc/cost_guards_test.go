package jsonrpc

import "testing"

// A later metered method reading never lowers the cost an earlier
// tools/call reading gave the entry.
func TestCostLaterMeteredMethodKeepsToolCost(t *testing.T) {
	m := Meter{Methods: []string{ToolsCall, "tools/list"}}
	for _, body := range []string{
		`{"method":"tools/call","method":"tools/list","params":{"name":"big"}}`,
		`{"method":"tools/list","method":"tools/call","params":{"name":"big"}}`,
	} {
		if got := parse(t, body).Cost(m, tableCost); got != 5 {
			t.Errorf("Cost(%s) = %d, want 5", body, got)
		}
		if got := parse(t, body).Cost(Meter{All: true}, tableCost); got != 5 {
			t.Errorf("Cost(%s, all) = %d, want 5", body, got)
		}
	}
}

// toolCost results below 1 count as 1, for a call without a tool name too.
func TestCostToolCostBelowOneCountsAsOne(t *testing.T) {
	zero := func([]byte) int64 { return 0 }
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
	} {
		if got := parse(t, body).Cost(toolsCallMeter, zero); got != 1 {
			t.Errorf("Cost(%s) = %d, want 1", body, got)
		}
	}
}

// Under All, objects that are no JSON-RPC message (no method, and no
// response: an id with a result or an error) cost nothing and put no call
// in flight: the caller charges the body at least 1.
func TestCostAllSkipsNonMessages(t *testing.T) {
	all := Meter{All: true}
	for body, want := range map[string]int64{
		`[{"a":1},{"b":2}]`:                                 0,
		`[{"id":1,"q":1},{"params":{"name":"big"}}]`:        0, // an invalid request and a bare params
		`[{"result":1,"params":{"name":"x"}},{"error":{}}]`: 0, // no id: no response
		`[{"id":1,"result":1},{"result":1,"params":{}}]`:    1,
		`[{"id":1,"method":"x"},{"x":1,"id":2}]`:            1,
	} {
		r := parse(t, body)
		if got := r.Cost(all, tableCost); got != want {
			t.Errorf("Cost(%s) = %d, want %d", body, got, want)
		}
		if got := r.Calls(all); got != max(int(want), 1) {
			t.Errorf("Calls(%s) = %d, want %d", body, got, max(int(want), 1))
		}
	}
}

// An object without an id is no response, whatever else it holds.
func TestResponseNeedsAnID(t *testing.T) {
	for _, body := range []string{
		`{"result":1}`,
		`{"jsonrpc":"2.0","error":{"code":1}}`,
		`{"result":1,"params":{"name":"x"}}`, // a record kept for its params.name
		`{"error":{},"params":{"arguments":{"limit":1}}}`,
	} {
		if parse(t, body).Entry(0).Response() {
			t.Errorf("%s: Response() = true, want false", body)
		}
	}
}

// Calls is at least 1 for a body of several entries none of which is
// metered: it still costs something.
func TestCallsAtLeastOneForUnmeteredBatches(t *testing.T) {
	for _, body := range []string{
		`[1,2]`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`,
	} {
		if got := parse(t, body).Calls(toolsCallMeter); got != 1 {
			t.Errorf("Calls(%s) = %d, want 1", body, got)
		}
	}
}
