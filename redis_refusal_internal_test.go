package mcplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// When several of the items decided in Redis refuse a batch, the refusal
// given has every other one folded in (longestOf), not two at a time: a
// tenant bucket's wait that the quota's refusal (to the reset) outlasted
// must still reach the global bucket's refusal that outlasts both. Tenant
// 1/m burst 3, quota 5/day and a global burst of 2: after three calls
// (apart, as the global bucket refills; the first, proving one, is
// charged to pre-auth, not to the tenant), a batch of three finds the
// tenant 2 tokens short of it, the quota 1 short and the global burst
// smaller than it. The global refusal names 2 calls, what the quota has
// left, and the wait before the tenant holds 2 tokens: a minute, not the
// global bucket's own moment.
func TestRedisRefusalFoldsEveryItemThatRefuses(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-fold-refusals", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/m", Burst: 3}, Quota: &QuotaLimit{Day: 5},
		Global: &RateLimit{Rate: "100/s", Burst: 2},
	})
	const token = "Bearer valid-fold-refusals"
	for i := range 3 {
		time.Sleep(20 * time.Millisecond) // the global bucket refills
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	calls := make([]string, 3)
	for i := range calls {
		calls[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/call","params":{"name":"echo"}}`
	}
	// Were the batch forwarded, it would be answered 200.
	rec := serveBody(t, h, "["+strings.Join(calls, ",")+"]", token, http.StatusOK)
	var answers []struct {
		Error struct {
			Message string `json:"message"`
			Data    struct {
				Limit         string `json:"limit"`
				MaxPerRequest int    `json:"maxPerRequest"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &answers); err != nil || rec.Code != http.StatusTooManyRequests || len(answers) != 3 {
		t.Fatalf("want a 429 answering each call: %d %s (%v)", rec.Code, rec.Body, err)
	}
	got := answers[0].Error
	if got.Data.Limit != "global" || got.Data.MaxPerRequest != 2 || !strings.Contains(got.Message, "never be admitted") {
		t.Fatalf("want the global refusal naming 2 calls: %s", rec.Body)
	}
	if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 50 || ra > 60 {
		t.Fatalf("Retry-After %q, want the tenant's 50 to 60 seconds for 2 tokens", rec.Header().Get("Retry-After"))
	}
}

// A refusal answered from memory weighs what this instance's own last
// admission of the caller left its tenant bucket: x's two calls empty it
// (a token every 10s at 6/m), then w's calls are refused by the global
// bucket, which is remembered; x's next call, answered from memory, names
// x's 10s, not the global bucket's second, after which x would be refused
// again by its own bucket.
func TestRedisLocalRefusalNamesTheTenantWaitItsAdmissionLeft(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: "redis-local-weighs-admitted", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "6/m", Burst: 2}, Quota: &QuotaLimit{Off: true},
		Global: &RateLimit{Rate: "1/s", Burst: 4},
	})
	const x, w = "Bearer valid-weighs-x", "Bearer valid-weighs-w"
	for i := range 3 { // the first proves x, charged to pre-auth
		if code, body := serveCall(t, h, x, http.StatusOK); code != http.StatusOK {
			t.Fatalf("x's call %d: %d %s", i+1, code, body)
		}
	}
	code, body := serveCall(t, h, w, http.StatusOK)
	for range 3 {
		if code != http.StatusOK {
			break
		}
		code, body = serveCall(t, h, w, http.StatusOK)
	}
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"global"`) {
		t.Fatalf("w never refused by the global bucket: %d %s", code, body)
	}
	before := storeRoundTrips(t, h)
	rec := serveRecorded(t, h, "echo", x, http.StatusOK)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"limit":"tenant"`) {
		t.Fatalf("x's call: %d %s, want its tenant bucket named", rec.Code, rec.Body)
	}
	if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 8 {
		t.Fatalf("Retry-After %q, want x's own wait for a token, about 10s", rec.Header().Get("Retry-After"))
	}
	if n := storeRoundTrips(t, h) - before; n != 0 {
		t.Fatalf("x's call cost %d round trips, want it answered from memory", n)
	}
}

// midwayInRedis returns two instances of one zone on one Redis, midway
// through a live change: the fast one has the rate of the layer set by
// with raised to 60/m, the slow one still gives 6/m, both at burst 2
// unless with changes it.
func midwayInRedis(t *testing.T, zone string, with func(h *Handler, l *RateLimit)) (fast, slow *Handler) {
	t.Helper()
	url, _ := localRedis(t)
	awayFromMidnight(t)
	instance := func(rate string) *Handler {
		h := &Handler{
			Zone: zone, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
			Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Off: true}, Global: &RateLimit{Off: true},
			Store: &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}},
		}
		with(h, &RateLimit{Rate: rate, Burst: 2})
		return provisionForTest(t, h)
	}
	return instance("60/m"), instance("6/m")
}

// A bucket the slow instance drained earns its last charge's rate (a
// token every 10s) until a call is admitted under the new one, so the fast
// instance's refusal names that wait, not the second its own rate would
// take, after which the call was refused again, nine times over.
func TestRedisRefusalNamesTheRateTheBucketEarns(t *testing.T) {
	fast, slow := midwayInRedis(t, "redis-earned-rate", func(h *Handler, l *RateLimit) { h.Tenant = l })
	const token = "Bearer valid-earned-rate"
	for i, h := range []*Handler{fast, slow, slow, slow} { // each proves it first, charged to pre-auth
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	rec := serveRecorded(t, fast, "echo", token, http.StatusOK)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"limit":"tenant"`) {
		t.Fatalf("the fast instance's call: %d %s, want a tenant refusal", rec.Code, rec.Body)
	}
	if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 9 || ra > 10 {
		t.Fatalf("Retry-After %q, want the 10s a token takes at the rate the bucket earns", rec.Header().Get("Retry-After"))
	}
}

// So too for a bucket behind the one Redis refused first: the caller's
// own tenant bucket (12/m, burst 1, on both instances) refuses the fast
// instance's call for 5s, and the global bucket (burst 3) the slow one
// drained names its 10s, the longer wait, not the second its own rate
// would take, and remembers it so. The proving calls take global tokens
// too.
func TestRedisRefusalWeighsTheRateABucketBehindEarns(t *testing.T) {
	fast, slow := midwayInRedis(t, "redis-earned-rate-behind", func(h *Handler, l *RateLimit) {
		l.Burst = 3
		h.Tenant, h.Global = &RateLimit{Rate: "12/m", Burst: 1}, l
	})
	const token = "Bearer valid-earned-rate-behind"
	for i, h := range []*Handler{fast, slow, slow} { // each proves it first, charged to pre-auth
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	rec := serveRecorded(t, fast, "echo", token, http.StatusOK)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"limit":"global"`) {
		t.Fatalf("the fast instance's call: %d %s, want the global bucket's longer refusal", rec.Code, rec.Body)
	}
	if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 8 {
		t.Fatalf("Retry-After %q, want the global bucket's 10s at 6/m", rec.Header().Get("Retry-After"))
	}
	// Remembered so: the next call, answered from memory, names it too.
	before := storeRoundTrips(t, fast)
	rec = serveRecorded(t, fast, "echo", token, http.StatusOK)
	if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); rec.Code != http.StatusTooManyRequests || ra < 8 {
		t.Fatalf("the next call: %d, Retry-After %q, want the global bucket's wait again", rec.Code, rec.Header().Get("Retry-After"))
	}
	if n := storeRoundTrips(t, fast) - before; n != 0 {
		t.Fatalf("the next call cost %d round trips, want it answered from memory", n)
	}
}

// A dry run records it so too: the fast instance, in dry run, logs the
// global bucket's would-be refusal with its 10s at 6/m beside the tenant
// bucket's, not the second its own rate would take.
func TestRedisDryRunRecordsTheRateABucketBehindEarns(t *testing.T) {
	fast, slow := midwayInRedis(t, "redis-earned-rate-dry", func(h *Handler, l *RateLimit) {
		h.DryRun = l.Rate == "60/m"
		l.Burst = 3
		h.Tenant, h.Global = &RateLimit{Rate: "12/m", Burst: 1}, l
	})
	core, logs := observer.New(zap.InfoLevel)
	fast.logger = zap.New(core)
	const token = "Bearer valid-earned-rate-dry"
	for i, h := range []*Handler{fast, slow, slow, fast} { // the last one admitted in dry run
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	var global []observer.LoggedEntry
	for _, e := range logs.FilterMessage("would refuse (dry run)").All() {
		if e.ContextMap()["layer"] == "global" {
			global = append(global, e)
		}
	}
	if len(global) != 1 {
		t.Fatalf("want one would-be global refusal logged, got %d of %v", len(global), logs.All())
	}
	if ra, _ := global[0].ContextMap()["retry_after"].(int64); ra < 8 {
		t.Fatalf("would-be global refusal with retry_after %v, want its 10s at 6/m", global[0].ContextMap()["retry_after"])
	}
}

// A refusal answered from memory names a bucket whose burst the request
// exceeds ahead of the remembered wait: after the global bucket's refusal
// (1/m, remembered), a batch of two calls from a tenant of burst 1 can
// never pass as sent, and is told so, not to retry in a minute.
func TestRedisLocalRefusalNamesABurstTheRequestExceeds(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: "redis-local-never", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 1}, Quota: &QuotaLimit{Off: true},
		Global: &RateLimit{Rate: "1/m", Burst: 2},
	})
	const token = "Bearer valid-local-never"
	for i := range 2 { // the first proves it; each takes a global token
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"global"`) {
		t.Fatalf("third call: %d %s, want the global refusal Redis gives", code, body)
	}
	before := storeRoundTrips(t, h)
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}`
	rec := serveBody(t, h, "["+strings.ReplaceAll(call, "%d", "1")+","+strings.ReplaceAll(call, "%d", "2")+"]", token, http.StatusOK)
	if n := storeRoundTrips(t, h) - before; n != 0 {
		t.Fatalf("the batch cost %d round trips, want it answered from memory", n)
	}
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"limit":"tenant"`) || !strings.Contains(rec.Body.String(), "never be admitted") {
		t.Fatalf("the batch: %d %s, want the tenant bucket's refusal of a request above its burst", rec.Code, rec.Body)
	}
}
