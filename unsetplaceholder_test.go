package mcplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// In a real Caddy, a tier matching a placeholder that Caddy's map handler
// sets draws no warning, at start or at a request; a group key that no
// handler sets is warned about once, at the first request.
func TestAMapsPlaceholderIsNotWarnedAbout(t *testing.T) {
	opts, logPath := logOptions(t)
	e := startSite(t, `map {http.request.header.X-Plan} {plan} {
 default free
}
mcp_ratelimit {
 zone unsetph
 preauth 100/s burst 100
 tier paid {
  match {plan} paid
  tenant 100/s burst 100
 }
 group {org} 100/s burst 100
}
reverse_proxy $BACKEND`, opts)
	warnings := func() (named []string) {
		for _, ev := range logEvents(t, logPath) {
			if msg, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(msg, "none of Caddy's own") {
				named = append(named, ev["placeholder"].(string))
			}
		}
		return named
	}
	if w := warnings(); len(w) != 0 {
		t.Fatalf("warnings at start for %q, want none before a request", w)
	}
	for i := range 2 {
		if r := e.call(i+1, "X-Plan", "paid"); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	harness.Eventually(t, 5*time.Second, "the group key's warning", func() bool { return len(warnings()) > 0 })
	time.Sleep(200 * time.Millisecond)
	if w := warnings(); len(w) != 1 || w[0] != "{org}" {
		t.Fatalf("warnings for %q, want one, for {org}", w)
	}
}

// In a real Caddy, an identity placeholder misspelt under {http.*} (a
// header's placeholder written {http.request.headers.…}) is empty for
// every caller, which puts every key on pre-auth for good: the first
// request says so.
func TestAMisspeltHTTPPlaceholderIsWarnedAbout(t *testing.T) {
	opts, logPath := logOptions(t)
	e := startSite(t, `mcp_ratelimit {
 zone misspelt
 identity {http.request.headers.Authorization}
 preauth 100/s burst 100
}
reverse_proxy $BACKEND`, opts)
	if r := e.call(1, "Authorization", "Bearer valid-misspelt"); r.Status != http.StatusOK {
		t.Fatalf("call: %d %s", r.Status, r.Body)
	}
	harness.Eventually(t, 5*time.Second, "the misspelt placeholder's warning", func() bool {
		for _, ev := range logEvents(t, logPath) {
			msg, _ := ev["msg"].(string)
			if ev["level"] == "warn" && strings.Contains(msg, "none that Caddy's HTTP server answers itself") &&
				ev["placeholder"] == "{http.request.headers.Authorization}" {
				return true
			}
		}
		return false
	})
}
