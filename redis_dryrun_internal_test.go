package mcplimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// In dry run with Redis, a call some layer would refuse takes nothing from
// any layer, not even for a moment: a call of the same identity decided
// meanwhile (here, from inside the first one's admission) finds the quota
// where enforcement would have left it. Tenant burst 2 and quota 4/day:
// after the proving call and two more, the tenant bucket is empty and the
// quota holds 3 of 4, so two calls over the tenant's burst are two
// would-be tenant refusals and no quota one.
func TestRedisDryRunWouldBeRefusalTakesNothingMeanwhile(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-dry-meanwhile", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 2}, Quota: &QuotaLimit{Day: 4}, Global: &RateLimit{Off: true},
		DryRun: true,
	})
	const token = "Bearer valid-dry-meanwhile"
	for i := range 3 {
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	inRedis := countedInRedis(t, h, token)
	if n := inRedis(); n != 3 {
		t.Fatalf("Redis counts %d calls, want 3", n)
	}
	redisStep := admissionSteps[0]
	t.Cleanup(func() { admissionSteps[0] = redisStep })
	nested := false
	admissionSteps[0] = func(d *decision) bool {
		ok := redisStep(d)
		if !nested {
			nested = true
			if n := inRedis(); n != 3 {
				t.Errorf("Redis counts %d calls while a would-be refusal is decided, want 3", n)
			}
			if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
				t.Errorf("call meanwhile: %d %s", code, body)
			}
		}
		return ok
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("call over the tenant's burst in dry run: %d %s", code, body)
	}
	for l, want := range map[layer]uint64{layerTenant: 2, layerQuota: 0} {
		if n := h.zone.metrics.dryN[l].Load(); n != want {
			t.Errorf("%d would-be %s refusals, want %d", n, layerNames[l], want)
		}
	}
	if n := inRedis(); n != 3 {
		t.Errorf("Redis counts %d calls after two would-be refusals, want 3", n)
	}
}

// In dry run with Redis, a call the concurrency layer would refuse takes
// nothing in Redis either: the layers there only look (one round trip
// that charges nothing), and each of them that would refuse is recorded
// too. Concurrency 1, tenant burst 2, quota 10/day: with one call held in
// the backend, the next calls would be concurrency refusals, and once
// the tenant bucket is empty, tenant refusals as well.
func TestRedisDryRunConcurrencyRefusalTakesNothing(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-dry-concurrency", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 2}, Quota: &QuotaLimit{Day: 10}, Global: &RateLimit{Off: true},
		Concurrency: &Concurrency{Max: 1}, DryRun: true,
	})
	const token = "Bearer valid-dry-concurrency"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("proving call: %d %s", code, body)
	}
	inRedis := countedInRedis(t, h, token)
	var want int64 // what Redis must count whenever the concurrency layer decides
	concurrencyStep := admissionSteps[len(admissionSteps)-1]
	t.Cleanup(func() { admissionSteps[len(admissionSteps)-1] = concurrencyStep })
	admissionSteps[len(admissionSteps)-1] = func(d *decision) bool {
		if n := inRedis(); n != want {
			t.Errorf("Redis counts %d calls while the concurrency layer decides, want %d", n, want)
		}
		return concurrencyStep(d)
	}
	hold := func() (release func()) {
		entered, done := make(chan struct{}), make(chan struct{})
		free := make(chan struct{})
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
			close(entered)
			<-free
			w.WriteHeader(http.StatusOK)
			return nil
		})
		go func() {
			defer close(done)
			req := httptest.NewRequest(http.MethodPost, "http://test/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
			req.Header.Set("Authorization", token)
			req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
			if err := h.ServeHTTP(httptest.NewRecorder(), req, next); err != nil {
				t.Error(err)
			}
		}()
		<-entered
		return func() { close(free); <-done }
	}
	want = 2
	release := hold() // tenant 2 -> 1, quota 2
	for range 2 {
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call over the cap in dry run: %d %s", code, body)
		}
	}
	release()
	want = 3
	release = hold() // tenant 1 -> 0, quota 3
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("call over the cap and the tenant's burst in dry run: %d %s", code, body)
	}
	release()
	for l, want := range map[layer]uint64{layerConcurrency: 3, layerTenant: 1, layerQuota: 0} {
		if n := h.zone.metrics.dryN[l].Load(); n != want {
			t.Errorf("%d would-be %s refusals, want %d", n, layerNames[l], want)
		}
	}
	if n := inRedis(); n != 3 {
		t.Errorf("Redis counts %d calls, want the 3 admitted", n)
	}
}

// countedInRedis returns a function reading what Redis counts today for
// the identity of the Authorization value token in h's zone.
func countedInRedis(t *testing.T, h *Handler, token string) func() int64 {
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	return func() int64 {
		n, err := h.zone.redis.Load().store.Used(t.Context(), key, quota.Day, quota.Day.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// In dry run with Redis, a request pre-auth would refuse takes nothing in
// Redis either, not even for a moment: its group quota, charged there for
// unproven callers, holds only the calls that would pass. Pre-auth burst
// 1: the first call of a credential the backend rejects passes, the
// second would be refused.
func TestRedisDryRunPreauthRefusalTakesNothingMeanwhile(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-dry-preauth", Preauth: &RateLimit{Rate: "1/h", Burst: 1},
		Global: &RateLimit{Off: true}, DryRun: true,
		Group: &Group{Key: "{http.request.header.X-Org}", Rate: "100/s", Burst: 100}, GroupQuota: &QuotaLimit{Day: 100},
	})
	key := "g/" + fingerprintHex(h.zone.fpKey.Load().sum("acme"))
	groupCount := func() int64 {
		n, err := h.zone.redis.Load().store.Used(t.Context(), key, quota.Day, quota.Day.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const token = "Bearer rejected-dry-preauth"
	if code, body := serveCall(t, h, token, http.StatusUnauthorized, "X-Org", "acme"); code != http.StatusUnauthorized {
		t.Fatalf("first call: %d %s", code, body)
	}
	if n := groupCount(); n != 1 {
		t.Fatalf("Redis counts %d calls of the group, want 1", n)
	}
	redisStep := admissionSteps[0]
	t.Cleanup(func() { admissionSteps[0] = redisStep })
	admissionSteps[0] = func(d *decision) bool {
		ok := redisStep(d)
		if n := groupCount(); n != 1 {
			t.Errorf("Redis counts %d calls of the group while a would-be pre-auth refusal is decided, want 1", n)
		}
		return ok
	}
	if code, body := serveCall(t, h, token, http.StatusUnauthorized, "X-Org", "acme"); code != http.StatusUnauthorized {
		t.Fatalf("second call: %d %s", code, body)
	}
	admissionSteps[0] = redisStep
	if n := h.zone.metrics.dryN[layerPreauth].Load(); n != 1 {
		t.Errorf("%d would-be pre-auth refusals, want 1", n)
	}
	if n := groupCount(); n != 1 {
		t.Errorf("Redis counts %d calls of the group after a would-be pre-auth refusal, want 1", n)
	}
}
