package mcplimit_test

import "testing"

// Under meter *, objects that are no JSON-RPC message cost nothing, even
// when they hold an id (an invalid request) or a result without an id (no
// response), or params: the REST array costs 1 in all.
func TestMeterAllChargesNonMessageObjectsNothing(t *testing.T) {
	e := start(t, "zone nonmessages\nmeter *\ntenant 1/m burst 10\nquota off")
	e.prove("valid-nonmessages")
	for i, c := range []struct {
		body string
		left int64
	}{
		{`[{"id":1,"q":1},{"id":2,"q":2},{"params":{"name":"x"}}]`, 9},
		{`[{"result":1,"params":{"name":"x"}},{"error":{},"params":{"name":"y"}}]`, 8},
	} {
		r := e.post(c.body, "Authorization", "Bearer valid-nonmessages")
		if f := rateLimit(t, r)["tenant"]; f[0] != c.left {
			t.Fatalf("body %d: tenant r=%d, want %d (it costs 1): %q", i, f[0], c.left, r.Header.Get("RateLimit"))
		}
	}
}

// A message whose method is read both as tools/call and as another
// metered method costs what its tool costs.
func TestDuplicateMethodKeepsTheToolCost(t *testing.T) {
	e := start(t, "zone dupmethod\nmeter tools/call tools/list\ncost big 5\ntenant 1/m burst 10\nquota off")
	e.prove("valid-dupmethod")
	r := e.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"big","arguments":{}}}`, "Authorization", "Bearer valid-dupmethod")
	if f := rateLimit(t, r)["tenant"]; f[0] != 5 {
		t.Fatalf("tenant r=%d, want 5 (big costs 5): %d %q", f[0], r.Status, r.Header.Get("RateLimit"))
	}
}
