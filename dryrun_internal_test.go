package mcplimit

import (
	"net/http"
	"testing"
)

// In dry run on this instance's own layers, a call some layer would refuse
// takes nothing from any layer, not even for a moment: a call of the same
// identity decided meanwhile (here, from inside the first one's quota
// step) finds the tenant bucket where enforcement would have left it.
// Tenant burst 1 and quota 1/day: the proving call uses the quota up and
// leaves the bucket full, so every later call is a would-be quota refusal
// and none a tenant one. Taking the tenant token before the quota looked
// would have the call meanwhile record a tenant refusal enforcement never
// gives.
func TestDryRunWouldBeRefusalTakesNothingMeanwhile(t *testing.T) {
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{
		Zone: "dry-meanwhile", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 1}, Quota: &QuotaLimit{Day: 1}, Global: &RateLimit{Off: true},
		DryRun: true,
	})
	const token = "Bearer valid-dry-meanwhile"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("proving call: %d %s", code, body)
	}
	quotaStep := admissionSteps[4]
	t.Cleanup(func() { admissionSteps[4] = quotaStep })
	// Each time the first call's quota step decides, another call is
	// decided meanwhile (the step is put back before a later call, whose
	// decision may be the first one's, reused).
	var outer *decision
	inner, meanwhile := false, uint64(0)
	admissionSteps[4] = func(d *decision) bool {
		if outer == nil {
			outer = d
		}
		if d == outer && !inner {
			inner = true
			meanwhile++
			if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
				t.Errorf("call meanwhile: %d %s", code, body)
			}
			inner = false
		}
		return quotaStep(d)
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("call over the quota in dry run: %d %s", code, body)
	}
	admissionSteps[4] = quotaStep
	for l, want := range map[layer]uint64{layerQuota: 1 + meanwhile, layerTenant: 0} {
		if n := h.zone.metrics.dryN[l].Load(); n != want {
			t.Errorf("%d would-be %s refusals, want %d", n, layerNames[l], want)
		}
	}
}
