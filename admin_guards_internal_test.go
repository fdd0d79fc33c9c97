package mcplimit

import (
	"net/http"
	"testing"
)

// Tiers that give an identity tenant limits differing in any way (rate,
// burst, or the layer off) leave which limit its next call finds unknown:
// the identity view then shows its bucket capped at the largest burst in
// force, not under the top-level limit alone.
func TestTenantLimitOfIsUnknownWhenATierDiffersInAnyWay(t *testing.T) {
	paid := func(l *RateLimit) []Tier {
		return []Tier{{Name: "paid", Match: TierMatch{Placeholder: "{plan}", Values: []string{"paid"}}, Limits: Limits{Tenant: l}}}
	}
	for name, c := range map[string]struct {
		tiers []Tier
		known bool
		most  int
	}{
		"same":  {paid(&RateLimit{Rate: "1/m", Burst: 5}), true, 5},
		"burst": {paid(&RateLimit{Rate: "1/m", Burst: 6}), false, 6},
		"rate":  {paid(&RateLimit{Rate: "2/m", Burst: 5}), false, 5},
		"off":   {paid(&RateLimit{Off: true}), false, 5},
	} {
		t.Run(name, func(t *testing.T) {
			pol, err := compile(&Handler{Tenant: &RateLimit{Rate: "1/m", Burst: 5}, Tiers: c.tiers})
			if err != nil {
				t.Fatal(err)
			}
			_, known, most := pol.tenantLimitOf([16]byte{})
			if known != c.known || most != c.most {
				t.Fatalf("tenantLimitOf: known %v, most %d; want %v, %d", known, most, c.known, c.most)
			}
		})
	}
}

// With a healthy Redis store the identity view reads Redis (source
// redis); while the store is degraded the zone counts locally, and the
// view shows those counts (source local), even when Redis would answer
// again before the zone has found it back.
func TestIdentityViewReadsRedisOnlyWhileTheStoreIsHealthy(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := onRedis(t, &Handler{
		Zone: "redis-identity-view", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 5}, Global: &RateLimit{Off: true},
	})
	const token = "Bearer valid-identity-view"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("call: %d %s", code, body)
	}
	fpHex := fingerprintHex(h.zone.fpKey.Load().sum(token))
	view, err := h.zone.identityStatus(fpHex)
	if err != nil {
		t.Fatal(err)
	}
	if view["source"] != "redis" {
		t.Fatalf("identity view with a healthy Redis store: source %v, want redis (%v)", view["source"], view)
	}
	r := h.zone.redis.Load()
	r.degraded.Store(true)
	t.Cleanup(func() { r.degraded.Store(false) })
	if view, err = h.zone.identityStatus(fpHex); err != nil {
		t.Fatal(err)
	}
	if view["source"] != "local" {
		t.Fatalf("identity view while the store is degraded: source %v, want local (%v)", view["source"], view)
	}
}

// An identity the zone no longer holds as proven (the backend rejected
// it), without a quota, still has its tenant bucket: its view shows it,
// unproven, rather than a 404.
func TestIdentityViewShowsAForgottenIdentitysBucket(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "view-forgotten", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 5}, Quota: &QuotaLimit{Off: true}, Global: &RateLimit{Off: true},
	})
	const token = "Bearer valid-view-forgotten"
	for range 2 {
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	serveBody(t, h, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, token, http.StatusForbidden)
	fpHex := fingerprintHex(h.zone.fpKey.Load().sum(token))
	view, err := h.zone.identityStatus(fpHex)
	if err != nil {
		t.Fatalf("view of a forgotten identity with a tenant bucket: %v", err)
	}
	if view["proven"] != false || view["tenant_tokens"] == nil {
		t.Fatalf("view %v, want it unproven, with its tenant bucket", view)
	}
}
