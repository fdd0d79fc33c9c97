package mcplimit

import (
	"net/http"
	"testing"
	"time"

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
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	inRedis := func() int64 {
		n, err := h.zone.redis.Load().store.Used(t.Context(), key, quota.Day, quota.Day.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
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
