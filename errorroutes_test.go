package mcplimit_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A call whose backend fails, and that handle_errors sends on to a
// fallback backend, is in flight until the fallback has answered: Caddy
// runs the error routes after the limiter's handler returns, and a slot
// given back then would let any number of calls run at the fallback at
// once, with the in-flight gauge at 0. Once the answer is written, the
// slot is free again, and a later call gets it.
func TestCallsHandledByErrorRoutesHoldTheirSlots(t *testing.T) {
	for _, c := range []struct {
		name, zone, cap string
		hdr             []string
		again           bool // the error routes run the zone's handler again
	}{
		{"the zone's cap", "errroutes", "concurrency 1", nil, false},
		{"the identity's cap", "errroutes-id", "concurrency 5 per_identity 1", []string{"Authorization", "Bearer valid-errroutes"}, false},
		// The call holds its slot already: the zone's handler in the
		// error routes must not refuse it for that slot, nor count it in
		// flight twice.
		{"the zone's handler in the error routes too", "errroutes-again", "concurrency 1", nil, true},
		{"the identity's cap, the zone's handler in the error routes too", "errroutes-id-again", "concurrency 5 per_identity 1", []string{"Authorization", "Bearer valid-errroutes-again"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dead := harness.FreePort(t) // nothing listens there: the primary backend fails
			limiter := fmt.Sprintf("mcp_ratelimit {\nzone %s\npreauth 100/s burst 100\n%s\n}", c.zone, c.cap)
			again := ""
			if c.again {
				again = limiter
			}
			e := startSite(t, fmt.Sprintf("%s\nreverse_proxy 127.0.0.1:%d\nhandle_errors {\n%s\nreverse_proxy $BACKEND\n}", limiter, dead, again))
			inflight := func() float64 {
				v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_inflight{zone="`+c.zone+`"}`)
				return v
			}

			done := make(chan string, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(harness.ToolCall(1, "slow", map[string]any{"millis": 3000})))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for i := 0; i+1 < len(c.hdr); i += 2 {
					req.Header.Set(c.hdr[i], c.hdr[i+1])
				}
				resp, err := harness.Send(req)
				if err != nil {
					done <- err.Error()
					return
				}
				resp.Body.Close()
				done <- resp.Status
			}()
			harness.Eventually(t, 10*time.Second, "the fallback running the slow call", func() bool {
				return e.backend.ToolCalls() == 1
			})

			r := e.call(2, c.hdr...)
			if got := refusal(t, r, http.StatusTooManyRequests, "concurrency"); got.Error.Data.Code != "CONCURRENCY_LIMITED" {
				t.Fatalf("second call while the fallback runs the first: %d %s", r.Status, r.Body)
			}
			if v := inflight(); v != 1 {
				t.Fatalf("in-flight gauge %v while the fallback runs a call, want 1", v)
			}
			if n := e.backend.ToolCalls(); n != 1 {
				t.Fatalf("the fallback ran %d calls at once under a cap of 1", n)
			}

			if status := <-done; status != "200 OK" {
				t.Fatalf("the slow call through the fallback: %s", status)
			}
			harness.Eventually(t, 10*time.Second, "the slot given back", func() bool { return inflight() == 0 })
			if r := e.call(3, c.hdr...); r.Status != http.StatusOK {
				t.Fatalf("a call after the fallback answered: %d %s", r.Status, r.Body)
			}
			harness.Eventually(t, 10*time.Second, "the gauge back at 0", func() bool { return inflight() == 0 })
		})
	}
}
