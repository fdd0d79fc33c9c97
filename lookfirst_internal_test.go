package mcplimit

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// meanwhileAt has call decide another request from inside admission step
// i, before the step decides, the first time the step runs. done puts the
// step back and returns how many times call ran.
func meanwhileAt(t *testing.T, i int, call func()) (done func() int) {
	t.Helper()
	step := admissionSteps[i]
	t.Cleanup(func() { admissionSteps[i] = step })
	n := 0
	admissionSteps[i] = func(d *decision) bool {
		if n == 0 {
			n++
			call()
		}
		return step(d)
	}
	return func() int {
		admissionSteps[i] = step
		return n
	}
}

// refusedMeanwhile runs refused, which must be answered status with want
// in its body, and admitted once from inside step i of its decision; that
// call must pass, so the refused call held nothing it needed.
func refusedMeanwhile(t *testing.T, i int, admitted, refused func() (int, string), status int, want string) {
	t.Helper()
	done := meanwhileAt(t, i, func() {
		if code, body := admitted(); code != http.StatusOK {
			t.Errorf("the call decided meanwhile: %d %s", code, body)
		}
	})
	code, body := refused()
	meanwhile := done()
	if code != status || !strings.Contains(body, want) {
		t.Fatalf("the refused call: %d %s, want %d with %s", code, body, status, want)
	}
	if meanwhile != 1 {
		t.Fatalf("%d calls decided meanwhile, want 1", meanwhile)
	}
}

// A member's call that its own quota refuses holds none of the group's
// tokens, not even for a moment: another member's call decided meanwhile
// (here, from inside the first one's quota step) finds the group bucket
// whole. Group burst 4: the two proving calls and p1's second take 3, and
// p1's quota of 2 is then used up; the token left is p2's, whatever p1
// sends.
func TestRefusedMembersCallHoldsNoGroupTokenMeanwhile(t *testing.T) {
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{
		Zone: "group-meanwhile", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Off: true}, Quota: &QuotaLimit{Day: 2}, Global: &RateLimit{Off: true},
		Group: &Group{Key: "{http.request.header.X-Org}", Rate: "1/h", Burst: 4},
	})
	const p1, p2 = "Bearer valid-member-1", "Bearer valid-member-2"
	org := []string{"X-Org", "acme"}
	for i, auth := range []string{p1, p1, p2} {
		if code, body := serveCall(t, h, auth, http.StatusOK, org...); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	refusedMeanwhile(t, 4,
		func() (int, string) { return serveCall(t, h, p2, http.StatusOK, org...) },
		func() (int, string) { return serveCall(t, h, p1, http.StatusOK, org...) },
		http.StatusTooManyRequests, `"limit":"quota"`)
}

// A call its tool's quota refuses holds none of the caller's tenant
// tokens, not even for a moment: the caller's call of another tool decided
// meanwhile finds its bucket whole. Tenant burst 2 and photo 1/day: the
// proving call takes no tenant token (it is not proven yet), the photo
// call takes 1 and uses the photo quota up; the token left is for echo,
// whatever photo calls are sent.
func TestToolQuotaRefusalHoldsNoTenantTokenMeanwhile(t *testing.T) {
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{
		Zone: "tool-meanwhile", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 2}, Quota: &QuotaLimit{Off: true}, Global: &RateLimit{Off: true},
		Tools: map[string]*ToolPolicy{"photo": {Quota: &QuotaLimit{Day: 1}}},
	})
	const token = "Bearer valid-tool-meanwhile"
	for i, tool := range []string{"echo", "photo"} {
		if code, body := serveTool(t, h, tool, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	refusedMeanwhile(t, 4,
		func() (int, string) { return serveTool(t, h, "echo", token, http.StatusOK) },
		func() (int, string) { return serveTool(t, h, "photo", token, http.StatusOK) },
		http.StatusTooManyRequests, `"limit":"tool_quota"`)
}

// A fail_closed tool's call refused while the store is degraded holds none
// of the caller's tenant tokens either: its call of a tool that fails open
// decided meanwhile finds the one token of its bucket.
func TestFailClosedRefusalHoldsNoTenantTokenMeanwhile(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "failclosed-meanwhile", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 1}, Global: &RateLimit{Off: true},
		Tools: map[string]*ToolPolicy{"photo": {FailClosed: true}},
	})
	const token = "Bearer valid-failclosed-meanwhile"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("proving call: %d %s", code, body)
	}
	h.zone.keyUnconfirmed.Store(&keyFailure{err: "storage unreachable (test)", at: time.Now()})
	refusedMeanwhile(t, 3,
		func() (int, string) { return serveCall(t, h, token, http.StatusOK) },
		func() (int, string) { return serveTool(t, h, "photo", token, http.StatusOK) },
		http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
}

// With a Redis store, the concurrency layer takes its slots before the
// round trip: a call of the identity that arrives while another of its
// calls is being decided in Redis finds the slot taken, and is refused
// without being charged there. Were the slot taken after, both calls would
// find it free, both be charged in Redis, and the one refused after would
// hold the shared buckets' tokens until its refund.
func TestRedisConcurrencySlotIsTakenBeforeTheRoundTrip(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: "redis-concurrency-first", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 100},
		Concurrency: &Concurrency{PerIdentity: 1},
	})
	const token = "Bearer valid-concurrency-first"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("proving call: %d %s", code, body)
	}
	redisStep := admissionSteps[0]
	t.Cleanup(func() { admissionSteps[0] = redisStep })
	meanwhile := 0
	admissionSteps[0] = func(d *decision) bool {
		ok := redisStep(d)
		if !d.probing && d.inRedis && meanwhile == 0 {
			meanwhile++
			code, body := serveCall(t, h, token, http.StatusOK)
			if code != http.StatusTooManyRequests || !strings.Contains(body, "CONCURRENCY_LIMITED") {
				t.Errorf("a call while another of the identity is decided in Redis: %d %s, want a concurrency refusal", code, body)
			}
		}
		return ok
	}
	code, body := serveCall(t, h, token, http.StatusOK)
	admissionSteps[0] = redisStep
	if code != http.StatusOK {
		t.Fatalf("the call decided first: %d %s", code, body)
	}
	if meanwhile != 1 {
		t.Fatalf("%d calls decided meanwhile, want 1", meanwhile)
	}
	if n := h.zone.metrics.refusedN[layerConcurrency].Load(); n != 1 {
		t.Errorf("%d concurrency refusals, want 1", n)
	}
}
