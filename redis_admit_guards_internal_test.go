package mcplimit

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// degradeUntilReleased marks h's Redis store degraded, as a failed call
// does, with its next probe put off until the returned release, which
// lets the zone's loop probe (and push) at its next sweep.
func degradeUntilReleased(h *Handler) (release func()) {
	r := h.zone.redis.Load()
	r.mu.Lock()
	r.degraded.Store(true)
	r.nextProbe = time.Now().Add(time.Hour)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.nextProbe = time.Time{}
		r.mu.Unlock()
	}
}

// During a Redis outage a call counted locally and then given back (the
// global bucket, after the quota, refuses it) is taken back from the
// counts kept for Redis too: once Redis returns, the push carries the one
// call that ran, not the refused one, or the tenant would find a call it
// never made charged to its quota on every instance.
func TestOutageCallRefusedAfterItsQuotaIsNotPushedToRedis(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: FreshZoneName("redis-outage-rollback"), Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 10},
		Global: &RateLimit{Rate: "1/h", Burst: 1},
	})
	release := degradeUntilReleased(h)
	const token = "Bearer valid-outage-rollback"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("first call during the outage: %d %s", code, body)
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"global"`) {
		t.Fatalf("second call during the outage: %d %s, want the global bucket's refusal", code, body)
	}
	release()
	r := h.zone.redis.Load()
	for deadline := time.Now().Add(10 * time.Second); r.degraded.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Redis never taken back: %v", h.zone.storeStatus())
		}
	}
	if n := countedInRedis(t, h, token)(); n != 1 {
		t.Fatalf("Redis counts %d calls of the identity after the outage, want the 1 admitted", n)
	}
}

// A request whose cost exceeds the whole quota, refused again from
// memory, is still told it can never pass as sent and to retry a smaller
// one in a second (Redis decides that one), not to wait for the reset:
// the quota has room left, and a client told to wait until midnight
// would idle for hours.
func TestRememberedRefusalOfARequestAboveTheQuotaSaysRetryInASecond(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: FreshZoneName("redis-local-above-quota"), Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 5}, Global: &RateLimit{Off: true},
		Tools: map[string]*ToolPolicy{"big": {Cost: 10}},
	})
	const token = "Bearer valid-above-quota"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK { // proves it
		t.Fatalf("proving call: %d %s", code, body)
	}
	for i := range 2 {
		before := storeRoundTrips(t, h)
		rec := serveRecorded(t, h, "big", token, http.StatusOK)
		if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "never be admitted") {
			t.Fatalf("call %d of a tool costing more than the quota: %d %s, want it refused as never admissible", i+1, rec.Code, rec.Body)
		}
		if ra := rec.Header().Get("Retry-After"); ra != "1" {
			t.Fatalf("call %d: Retry-After %q, want 1 (a smaller request may pass)", i+1, ra)
		}
		if n := storeRoundTrips(t, h) - before; i == 1 && n != 0 {
			t.Fatalf("the second call cost %d round trips, want it answered from memory", n)
		}
	}
}

// A call refused from memory for an account quota used up exactly names
// the used-up quota that resets last, here the tool's monthly one behind
// the account's daily one: the proving call of tool t used up both, a
// call of another tool was then refused by the daily one (remembered),
// and t's next call, answered from memory, names t's month. Told the
// day's reset, the client would retry t at midnight and be refused for
// the rest of the month.
func TestRememberedUsedUpQuotaNamesTheOneResettingLast(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: FreshZoneName("redis-local-used-up"), Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 1}, Global: &RateLimit{Off: true},
		Tools: map[string]*ToolPolicy{"t": {Quota: &QuotaLimit{Month: 1}}},
	})
	const token = "Bearer valid-used-up"
	if code, body := serveTool(t, h, "t", token, http.StatusOK); code != http.StatusOK { // proves it
		t.Fatalf("proving call: %d %s", code, body)
	}
	if code, body := serveTool(t, h, "echo", token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"quota"`) {
		t.Fatalf("a call of another tool with the daily quota used up: %d %s, want the daily quota's refusal", code, body)
	}
	before := storeRoundTrips(t, h)
	if code, body := serveTool(t, h, "t", token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"tool_quota"`) {
		t.Fatalf("a call of t with both quotas used up: %d %s, want the tool's monthly quota named", code, body)
	}
	if n := storeRoundTrips(t, h) - before; n != 0 {
		t.Fatalf("the call of t cost %d round trips, want it answered from memory", n)
	}
}

// A call the concurrency cap refuses folds in the quota refusal this
// instance remembers Redis giving the identity: it is told its quota is
// used up until the reset, not to retry in a second, which would only
// bring it back to be refused by the quota once a slot is free.
func TestConcurrencyRefusalFoldsInARememberedQuotaRefusal(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: FreshZoneName("redis-probe-known"), Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 1}, Global: &RateLimit{Off: true},
		Concurrency: &Concurrency{Max: 1},
	})
	const token = "Bearer valid-probe-known"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK { // proves it, using the quota
		t.Fatalf("proving call: %d %s", code, body)
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "QUOTA_EXHAUSTED") {
		t.Fatalf("second call: %d %s, want Redis's quota refusal", code, body)
	}
	// Another identity's call holds the zone's only slot.
	if !h.zone.all.Acquire(globalKey, 1, 1) {
		t.Fatal("the test could not take the slot")
	}
	defer h.zone.all.Release(globalKey, 1)
	rec := serveRecorded(t, h, "echo", token, http.StatusOK)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "QUOTA_EXHAUSTED") {
		t.Fatalf("call with the slot taken: %d %s, want the remembered quota refusal", rec.Code, rec.Body)
	}
	now := time.Now().UTC()
	reset := int64(quota.Day.Next(now).Sub(now) / time.Second)
	if ra, _ := strconv.ParseInt(rec.Header().Get("Retry-After"), 10, 64); ra < reset-5 {
		t.Fatalf("Retry-After %q, want the %ds until the quota resets", rec.Header().Get("Retry-After"), reset)
	}
}

// An identity that lapsed here (past known_ttl, and no longer remembered
// as forgotten) but still holds a quota count here was proven: its calls
// are charged in Redis to its tenant bucket too, which its earlier calls
// drained, so it is refused there. Charged only to pre-auth, it would get
// a fresh burst each time it lapses on an instance.
func TestIdentityCountedHereIsChargedToItsTenantBucketInRedis(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: FreshZoneName("redis-counted-here-tenant"), Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 2}, Quota: &QuotaLimit{Day: 10}, Global: &RateLimit{Off: true},
		KnownTTL: caddy.Duration(time.Second),
	})
	const token = "Bearer valid-counted-here-tenant"
	for i := range 3 { // the first proves the identity, the other two drain its bucket in Redis
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	// Time passes, as the zone's sweeps see it: the identity lapses past
	// known_ttl, and then its time as a forgotten one ends too.
	lapsed := time.Now().Add(2 * time.Second)
	h.zone.known.Sweep(lapsed)
	h.zone.forgotten.Sweep(lapsed.Add(3 * time.Hour))
	fp := h.zone.fpKey.Load().sum(token)
	if now := time.Now(); h.zone.known.Contains(fp, now) || h.zone.forgotten.Contains(fp, now) {
		t.Fatal("the identity is still proven or forgotten")
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "TENANT_RATE_LIMITED") {
		t.Fatalf("the lapsed identity's call with its Redis bucket drained: %d %s, want a tenant refusal", code, body)
	}
}

// While Redis is unreachable the zone decides locally, and its RateLimit
// header describes the local levels: a proven identity refused by its
// tenant bucket is shown that bucket empty and its daily quota's count,
// not left without them as if Redis held them.
func TestDegradedRedisRateLimitHeaderShowsTheLocalTenantAndQuota(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: FreshZoneName("redis-degraded-headers"), Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 1}, Quota: &QuotaLimit{Day: 10}, Global: &RateLimit{Off: true},
	})
	degradeUntilReleased(h)
	const token = "Bearer valid-degraded-headers"
	rec := serveRecorded(t, h, "echo", token, http.StatusOK)
	for i := 0; rec.Code == http.StatusOK && i < 3; i++ {
		rec = serveRecorded(t, h, "echo", token, http.StatusOK)
	}
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "TENANT_RATE_LIMITED") {
		t.Fatalf("the identity's calls during the outage: %d %s, want a tenant refusal", rec.Code, rec.Body)
	}
	rl := rec.Header().Get("RateLimit")
	if !strings.Contains(rl, `"tenant";r=0;`) || !strings.Contains(rl, `"quota-day";`) {
		t.Fatalf("RateLimit %q, want the local tenant bucket at 0 and the daily quota", rl)
	}
}

// Counts kept for Redis while it is healthy (a straggler recorded as the
// store recovered, or carried over a reload) are pushed before the next
// decision that needs them: a quota does not pass its limit by them until
// the zone's next tick pushes them.
func TestPendingCountsArePushedBeforeTheDecision(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: FreshZoneName("redis-push-first"), Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 2}, Global: &RateLimit{Off: true},
	})
	const token = "Bearer valid-push-first"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK { // proves it, counting 1
		t.Fatalf("proving call: %d %s", code, body)
	}
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	h.zone.redis.Load().record([]quota.Item{{Key: []byte(key), Period: quota.Day, N: 1}}, time.Now(), 1)
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "QUOTA_EXHAUSTED") {
		t.Fatalf("a call with the quota used up by a count kept for Redis: %d %s, want a quota refusal", code, body)
	}
}
