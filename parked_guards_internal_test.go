package mcplimit

import (
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
)

// A zone that takes up a parked one keeps as many pre-auth, tenant and
// group buckets as its own max_known asks (bucketRoom), not the parked
// zone's.
func TestTakenUpZoneHasItsOwnCapacity(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	handler := func(maxKnown int) *Handler {
		return &Handler{
			Zone: "parked-capacity", Preauth: &RateLimit{Rate: "1/h", Burst: 5}, Tenant: &RateLimit{Rate: "1/h", Burst: 5},
			Global: &RateLimit{Off: true}, Quota: &QuotaLimit{Off: true}, MaxKnown: maxKnown,
		}
	}
	h := provisionForTest(t, handler(5000))
	_ = h.zone.Destruct()
	pol, err := compile(handler(600))
	if err != nil {
		t.Fatal(err)
	}
	z2, err := newZone(h.zone.storage.get(), pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z2.Destruct() })
	if z2.preauth != h.zone.preauth {
		t.Fatal("the parked zone was not taken up")
	}
	lim := buckets.Limit{Rate: rate.Every(time.Hour), Burst: 5}
	now := time.Now()
	const keys = 1300
	const room = 1200 // twice max_known: see bucketRoom
	held := func(reserve func(i int) bool) int {
		n := 0
		for i := range keys {
			if reserve(i) {
				n++
			}
		}
		return n
	}
	for name, reserve := range map[string]func(i int) bool{
		"preauth": func(i int) bool {
			_, _, ok, _ := z2.preauth.Reserve(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32), lim, 1, now)
			return ok
		},
		"tenant": func(i int) bool {
			_, _, ok, _ := z2.tenants.Reserve([16]byte{byte(i >> 8), byte(i)}, lim, 1, now)
			return ok
		},
		"group": func(i int) bool {
			_, _, ok, _ := z2.groups.Reserve([16]byte{byte(i >> 8), byte(i)}, lim, 1, now)
			return ok
		},
	} {
		if n := held(reserve); n != room {
			t.Errorf("%s buckets: %d of %d new keys taken under max_known 600 of the zone that took them up, want %d", name, n, keys, room)
		}
	}
}
