package mcplimit

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// A zone made by one handler and held at once by a second one with a
// larger max_known applies the larger, whenever the zone's loop first
// looks: its sets were made with the first handler's, and the loop must
// compare against those, not against the second's it may read first.
func TestZoneAppliesTheLargestMaxKnownOfItsHandlers(t *testing.T) {
	z := heldByTwo(t, &Handler{Zone: "capacity-race", MaxKnown: 1}, &Handler{Zone: "capacity-race", MaxKnown: 3})
	ids := [][16]byte{{1}, {2}, {3}}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		now := time.Now()
		for _, fp := range ids {
			z.prove(fp, now)
		}
		kept := 0
		for _, fp := range ids {
			if z.known.Proven(fp, now) {
				kept++
			}
		}
		if kept == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 proven identities kept, want 3 (max_known 3 of the second handler)", kept)
		}
	}
}

// The admin API shows the max_known and known_ttl the zone applies, the
// most generous of its handlers', not those of the handler loaded last.
func TestZoneStatusShowsTheCapacityInForce(t *testing.T) {
	z := heldByTwo(t,
		&Handler{Zone: "capacity-status", MaxKnown: 3, KnownTTL: caddy.Duration(48 * time.Hour)},
		&Handler{Zone: "capacity-status", MaxKnown: 1, KnownTTL: caddy.Duration(2 * time.Second)})
	limits := z.status()["limits"].(map[string]any)
	if limits["max_known"] != 3 || limits["known_ttl"] != "48h0m0s" {
		t.Fatalf("limits show max_known %v, known_ttl %v; want the zone's 3 and 48h", limits["max_known"], limits["known_ttl"])
	}
}

// heldByTwo returns a zone made with first's policy and held by first's
// handler, then second's, as two handlers of one config hold it.
func heldByTwo(t *testing.T, first, second *Handler) *zone {
	t.Helper()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	var pols []*policy
	for _, h := range []*Handler{first, second} {
		pol, err := compile(h)
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, pol)
	}
	z, err := newZone(st, pols[0], zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	for _, pol := range pols {
		z.hold(&holder{pol: pol, storage: st, logger: zap.NewNop()})
	}
	return z
}

// The admin API's list of proven identities leaves out those unused for
// known_ttl, which the zone no longer holds proven, before its loop's
// sweep has dropped them.
func TestKnownViewLeavesOutIdentitiesPastKnownTTL(t *testing.T) {
	z := heldByTwo(t,
		&Handler{Zone: "known-view-ttl", KnownTTL: caddy.Duration(time.Hour)},
		&Handler{Zone: "known-view-ttl", KnownTTL: caddy.Duration(time.Hour)})
	now := time.Now()
	z.prove([16]byte{1}, now)
	z.prove([16]byte{2}, now.Add(90*time.Minute))
	view := z.knownView(10, now.Add(2*time.Hour))
	list := view["identities"].([]map[string]any)
	if view["total"] != 1 || len(list) != 1 || list[0]["fingerprint"] != fingerprintHex([16]byte{2}) {
		t.Fatalf("two hours on, with known_ttl 1h: %v; want only the identity used 30 minutes before", view)
	}
}
