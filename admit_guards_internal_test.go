package mcplimit

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// With a healthy Redis store, a keyless call takes its anonymous token
// before the round trip (with the concurrency slots); the anonymous step
// after Redis must not charge it again. Burst 2: two keyless calls pass.
func TestKeylessCallOnRedisPaysTheAnonymousBucketOnce(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: "redis-anon-once", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Anonymous: &RateLimit{Rate: "1/h", Burst: 2}, Global: &RateLimit{Off: true},
	})
	for i := range 2 {
		if code, body := serveCall(t, h, "", http.StatusOK); code != http.StatusOK {
			t.Fatalf("keyless call %d of an anonymous burst of 2: %d %s", i+1, code, body)
		}
	}
	if code, body := serveCall(t, h, "", http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"anonymous"`) {
		t.Fatalf("third keyless call: %d %s, want an anonymous refusal", code, body)
	}
}

// A keyless call the anonymous bucket refuses holds no global token, not
// even for a moment: the anonymous layer looks before the shared layers
// take. Global burst 2: the first keyless call takes one, and the call
// with a key decided meanwhile (from inside the anonymous step of the
// refused one) finds the other.
func TestAnonymousRefusalHoldsNoGlobalTokenMeanwhile(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "anon-meanwhile", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Anonymous: &RateLimit{Rate: "1/h", Burst: 1}, Global: &RateLimit{Rate: "1/h", Burst: 2},
		Quota: &QuotaLimit{Off: true},
	})
	if code, body := serveCall(t, h, "", http.StatusOK); code != http.StatusOK {
		t.Fatalf("first keyless call: %d %s", code, body)
	}
	refusedMeanwhile(t, 6,
		func() (int, string) { return serveCall(t, h, "Bearer valid-anon-meanwhile", http.StatusOK) },
		func() (int, string) { return serveCall(t, h, "", http.StatusOK) },
		http.StatusTooManyRequests, `"limit":"anonymous"`)
}

// An unmetered request (tools/list) puts no call in the in-flight gauge
// ("Metered calls in flight"); a metered call puts one.
func TestUnmeteredRequestIsNotCountedInFlight(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "inflight-unmetered", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	for _, c := range []struct {
		body string
		want int64
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`, 1},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://test/mcp", bytes.NewReader([]byte(c.body)))
		req.Header.Set("Authorization", "Bearer valid-inflight-unmetered")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
		got := int64(-1)
		_ = h.ServeHTTP(httptest.NewRecorder(), req, caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
			got = h.zone.metrics.inflightN.Load()
			w.WriteHeader(http.StatusOK)
			return nil
		}))
		if got != c.want {
			t.Fatalf("%s: %d calls in flight while it runs, want %d", c.body, got, c.want)
		}
	}
}

// A used-up quota and one the request exceeds (some left, less than it
// costs) that reset at the same moment: the used-up one is named, as no
// metered request passes before then. Identity 3/day, group 2/day: two
// calls use up the group's day and leave the key 1; a batch of 2 exceeds
// the key's day, which resets with the group's.
func TestUsedUpQuotaIsNamedAheadOfOneExceededThatResetsWithIt(t *testing.T) {
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{
		Zone: "usedup-tie", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 3},
		Group:      &Group{Key: "{http.request.header.X-Org}", Rate: "100/s", Burst: 100},
		GroupQuota: &QuotaLimit{Day: 2}, Global: &RateLimit{Off: true},
	})
	const auth = "Bearer valid-usedup-tie"
	org := []string{"X-Org", "acme"}
	for i := range 2 {
		if code, body := serveCall(t, h, auth, http.StatusOK, org...); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}]`
	rec := serveBody(t, h, batch, auth, http.StatusOK, org...)
	if body := rec.Body.String(); rec.Code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"group_quota"`) || !strings.Contains(body, "Quota exhausted") {
		t.Fatalf("a batch of 2 with the group's day used up and 1 left of the key's: %d %s, want the used-up group quota named", rec.Code, body)
	}
}

// A pre-auth refusal of a request that costs nothing (a keyless
// tools/list) weighs only the layers such a request meets (the anonymous
// one): the zone's concurrency cap, full meanwhile, takes no slot for it
// and is not folded into its refusal.
func TestPreauthRefusalOfAFreeRequestIgnoresAFullConcurrencyCap(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "preauth-free-conc", Preauth: &RateLimit{Rate: "1/h", Burst: 1},
		Concurrency: &Concurrency{Max: 1},
	})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if rec := serveBody(t, h, list, "", http.StatusOK); rec.Code != http.StatusOK {
		t.Fatalf("first keyless tools/list: %d %s", rec.Code, rec.Body)
	}
	if !h.zone.all.Acquire(globalKey, 1, 1) { // a call in flight holds the zone's one slot
		t.Fatal("setup: no slot")
	}
	defer h.zone.all.Release(globalKey, 1)
	// A writer whose connection takes read deadlines, as a server's does:
	// pre-auth then reads the small body (see peekIDs), which costs nothing.
	req := httptest.NewRequest(http.MethodPost, "http://test/mcp", strings.NewReader(list))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	rec := httptest.NewRecorder()
	_ = h.ServeHTTP(deadlineRecorder{rec}, req, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Error("a refused request reached the next handler")
		return nil
	}))
	if body := rec.Body.String(); rec.Code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"preauth"`) || !strings.Contains(body, `"id":1`) || strings.Contains(body, "in flight") {
		t.Fatalf("keyless tools/list over the pre-auth budget, the cap full: %d %s, want a plain pre-auth refusal", rec.Code, body)
	}
}

// deadlineRecorder is a recorder whose connection takes read deadlines.
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetReadDeadline(time.Time) error { return nil }

// While the store is degraded, a batch calling two fail_closed tools is
// refused naming the first of them in the body, so that the refusal reads
// the same whatever the store: the call of that tool is told its own
// store refusal, the other the batch note about it.
func TestStoreRefusalOfABatchNamesItsFirstFailClosedTool(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "failclosed-first", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Global: &RateLimit{Off: true},
		Tools: map[string]*ToolPolicy{"photo": {FailClosed: true}, "video": {FailClosed: true}},
	})
	const token = "Bearer valid-failclosed-first"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("proving call: %d %s", code, body)
	}
	h.zone.keyUnconfirmed.Store(&keyFailure{err: "storage unreachable (test)", at: time.Now()})
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"photo"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"video"}}]`
	rec := serveBody(t, h, batch, token, http.StatusOK)
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, `calls to tool \"photo\" right now`) || strings.Contains(body, `calls to tool \"video\" right now`) {
		t.Fatalf("a batch of two fail_closed tools, the store degraded: %d %s, want photo's store refusal", rec.Code, body)
	}
}
