package mcplimit_test

import (
	"net/http"
	"testing"
)

// A text/event-stream range whose q-value cannot be read (empty, not a
// number) is not q=0: the client still lists event streams, so it is a
// Streamable HTTP client and gets refuse_with's answer (a 200 under
// refuse_with jsonrpc), not the legacy client's 429.
func TestUnreadableQValueDoesNotRefuseTheEventStream(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nquota off\nrefuse_with jsonrpc")
	e.prove("valid-qvalue")
	e.call(1, "Authorization", "Bearer valid-qvalue")
	for _, accept := range []string{"application/json, text/event-stream;q=", "application/json, text/event-stream;q=high"} {
		r := e.call(2, "Authorization", "Bearer valid-qvalue", "Accept", accept)
		if r.Status != http.StatusOK {
			t.Fatalf("Accept %q: %d %s, want refuse_with's 200", accept, r.Status, r.Body)
		}
		if got := refusal(t, r, http.StatusOK, "tenant"); got.ID != float64(2) {
			t.Fatalf("Accept %q: %s", accept, r.Body)
		}
	}
}
