package mcplimit_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A tunnel request whose identity headers are unreadable is refused for
// the identity first: the refusal names what the caller must fix in its
// credential, which is checked before the request's shape.
func TestUnreadableIdentityOfATunnelRequestIsNamedFirst(t *testing.T) {
	e := start(t, "zone tunnel-unreadable\npreauth 100/s burst 100")
	req, _ := http.NewRequest(http.MethodGet, e.mcp, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Add("Authorization", "Bearer a")
	req.Header.Add("Authorization", "Bearer b")
	r := harness.Do(t, req)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "Send exactly one Authorization header") {
		t.Fatalf("%d %s, want 400 naming the Authorization headers", r.Status, r.Body)
	}
	if n := e.backend.Requests(); n != 0 {
		t.Fatalf("%d requests reached the backend", n)
	}
}
