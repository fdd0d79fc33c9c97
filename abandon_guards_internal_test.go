package mcplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// A call whose answer frees its slots while its client is still there
// goes on: the backend may hold its stream open after the answer (for
// more messages), and the client reads them. Only a client that has left
// ends the request once nothing holds it.
func TestAnsweredCallGoesOnWhileItsClientStays(t *testing.T) {
	h := heldForAnHour(t, "abandon-answered-stays")
	endedEarly := make(chan bool, 1)
	answering := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"))
		endedEarly <- r.Context().Err() != nil
		_, _ = w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n"))
		return nil
	})
	req := slowCall(context.Background(), "valid-answered-stays")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	if err := h.ServeHTTP(rec, req, answering); err != nil {
		t.Fatal(err)
	}
	if <-endedEarly {
		t.Fatal("the answer that freed the call's slot ended the request while its client was still there")
	}
	if n := h.zone.metrics.inflightN.Load(); n != 0 {
		t.Fatalf("%d calls in flight after the answer", n)
	}
	if !strings.Contains(rec.Body.String(), "notifications/message") {
		t.Fatalf("the client did not get what the backend wrote after the answer: %q", rec.Body.String())
	}
}
