package mcplimit

import (
	"testing"
	"time"

	"go.uber.org/zap"
)

// A stopped zone whose buckets would all have refilled, or that has no
// bucket at all, stays parked while calls it admitted are in flight: the
// zone that takes it up finds their slots of the concurrency cap held.
func TestParkedZoneOutlivesItsCallsInFlight(t *testing.T) {
	for name, h := range map[string]*Handler{
		"refilled": {
			Zone: "parked-busy", Preauth: &RateLimit{Rate: "1000/s", Burst: 1}, Tenant: &RateLimit{Rate: "1000/s", Burst: 1},
			Global: &RateLimit{Off: true}, Quota: &QuotaLimit{Off: true}, Concurrency: &Concurrency{Max: 1},
		},
		"no bucket": {
			Zone: "parked-busy-nobucket", Preauth: &RateLimit{Off: true}, Tenant: &RateLimit{Off: true},
			Global: &RateLimit{Off: true}, Quota: &QuotaLimit{Off: true}, Concurrency: &Concurrency{Max: 1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := provisionForTest(t, h)
			z := h.zone
			if !z.all.Acquire(globalKey, 1, 1) {
				t.Fatal("no slot for the call in flight")
			}
			z2 := takenUpLater(t, h)
			if n := z2.all.Count(globalKey); n != 1 {
				t.Fatalf("the zone taken up again finds %d calls in flight, want 1", n)
			}
		})
	}
}

// A stopped zone with no concurrency cap stays parked while calls it
// admitted are in flight too: the zone that takes it up counts them in
// mcp_ratelimit_inflight until they end, not from zero.
func TestParkedZoneWithoutACapOutlivesItsCallsInFlight(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "parked-busy-nocap", Preauth: &RateLimit{Rate: "1000/s", Burst: 1}, Tenant: &RateLimit{Rate: "1000/s", Burst: 1},
		Global: &RateLimit{Off: true}, Quota: &QuotaLimit{Off: true},
	})
	z := h.zone
	z.metrics.inflightAdd(1) // a call admitted, still running
	z2 := takenUpLater(t, h)
	if n := z2.metrics.inflightN.Load(); n != 1 {
		t.Fatalf("the zone taken up again counts %d calls in flight, want 1", n)
	}
}

// takenUpLater stops h's zone and, once every bucket it had would have
// refilled, starts a zone of its name again, which takes up the parked
// one when it is still parked.
func takenUpLater(t *testing.T, h *Handler) *zone {
	t.Helper()
	_ = h.zone.Destruct()
	time.Sleep(50 * time.Millisecond) // fifty times the longest refill
	z, err := newZone(h.zone.storage.get(), h.pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	return z
}
