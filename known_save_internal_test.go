package mcplimit

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// TestKnownSetIsSavedWhenItMatters checks when a flush rewrites the
// known-good set: after an identity is proven or forgotten, and after
// knownRefresh when only last uses changed, but not at every flush.
func TestKnownSetIsSavedWhenItMatters(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "known-save", KnownTTL: caddy.Duration(24 * time.Hour), FlushInterval: caddy.Duration(time.Second)})
	z := h.zone
	now := time.Now()
	if z.knownDue(now) {
		t.Fatal("a zone that just loaded its known set wants to save it again")
	}
	saved := func() int64 { return z.knownSaved.Load() }
	flush := func() { z.flush(t.Context(), false) }

	z.prove([16]byte{1}, now)
	before := saved()
	flush()
	if saved() == before {
		t.Fatal("a newly proven identity was not saved at the next flush")
	}
	stored, err := z.quota.LoadKnown(t.Context())
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored known set %v, %v; want the proven identity", stored, err)
	}

	z.known.Proven([16]byte{1}, now.Add(time.Second)) // a use, no new identity
	before = saved()
	flush()
	if saved() != before {
		t.Fatal("a flush with only last uses changed rewrote the whole known set")
	}

	if refresh := knownRefresh(z.pol.Load()); refresh != time.Hour {
		t.Fatalf("knownRefresh = %v, want a 24th of known_ttl 24h", refresh)
	}
	if !z.knownDue(time.Now().Add(time.Hour)) {
		t.Fatal("last uses are never saved")
	}

	z.forget([16]byte{1}, time.Now())
	before = saved()
	flush()
	if saved() == before {
		t.Fatal("a forgotten identity was not saved at the next flush")
	}
	if stored, _ := z.quota.LoadKnown(t.Context()); len(stored) != 0 {
		t.Fatalf("forgotten identity still stored: %v", stored)
	}
}

// The last flush, as a zone stops, saves the known-good set whatever
// knownRefresh says: the last uses since the previous save would be lost
// otherwise, and after a restart an identity in use could lapse up to
// knownRefresh early and have to prove itself again.
func TestLastFlushSavesTheLastUses(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "known-final", KnownTTL: caddy.Duration(24 * time.Hour), FlushInterval: caddy.Duration(time.Second)})
	z := h.zone
	now := time.Now()
	z.prove([16]byte{1}, now.Add(-30*time.Minute))
	z.flush(t.Context(), false)
	z.known.Proven([16]byte{1}, now) // a use, saved only when due
	last := func() int64 {
		t.Helper()
		stored, err := z.quota.LoadKnown(t.Context())
		if err != nil || len(stored) != 1 {
			t.Fatalf("stored known set %v, %v; want the proven identity", stored, err)
		}
		return stored[0].Last
	}
	z.flush(t.Context(), false)
	if last() >= now.UnixMilli() {
		t.Fatal("setup: a flush saved a last use before knownRefresh")
	}
	z.flush(t.Context(), true)
	if got := last(); got < now.UnixMilli() {
		t.Fatalf("the last flush left the stored last use at %d, before the use at %d", got, now.UnixMilli())
	}
}

// An identity forgotten and proven again within one second stays proven in
// storage: forget times are whole seconds, so the save must not read the
// new proof as older than the forget.
func TestReprovenInTheForgetsSecondStaysSaved(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "known-reprove", FlushInterval: caddy.Duration(time.Second)})
	z := h.zone
	now := time.Now().Truncate(time.Second).Add(100 * time.Millisecond) // all in one second
	z.prove([16]byte{2}, now)
	z.flush(t.Context(), false)
	z.forget([16]byte{2}, now.Add(time.Millisecond))
	z.prove([16]byte{2}, now.Add(2*time.Millisecond))
	z.flush(t.Context(), false)
	if stored, err := z.quota.LoadKnown(t.Context()); err != nil || len(stored) != 1 {
		t.Fatalf("stored known set %v, %v; want the identity proven again", stored, err)
	}
}

// Identities last used within one second keep their order across a
// restart: the least recently used is the one a full set drops, not the
// one whose fingerprint sorts last.
func TestRestoredIdentitiesKeepTheirOrderWithinASecond(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	pol, err := compile(&Handler{Zone: "known-order", MaxKnown: 3})
	if err != nil {
		t.Fatal(err)
	}
	z, err := newZone(st, pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	a, b, c, d := [16]byte{3}, [16]byte{2}, [16]byte{1}, [16]byte{4}
	second := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	for i, fp := range [][16]byte{a, b, c} { // least recent first, in reverse key order
		z.prove(fp, second.Add(time.Duration(i+1)*100*time.Millisecond))
	}
	if err := z.Destruct(); err != nil { // saves the set
		t.Fatal(err)
	}
	z, err = newZone(st, pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	now := time.Now()
	z.prove(d, now)
	for fp, want := range map[[16]byte]bool{a: false, b: true, c: true, d: true} {
		if got := z.known.Proven(fp, now); got != want {
			t.Errorf("identity %x proven %v after the restart and a fourth proof, want %v (the least recently used goes)", fp[0], got, want)
		}
	}
}

// Only a forget of an identity proven here is remembered and saved: the
// backend's 401s to garbage credentials leave nothing in the saved set,
// which would otherwise hold one line per garbage credential for
// known_ttl, past max_known.
func TestOnlyProvenIdentitiesForgetsAreSaved(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "known-forgets", MaxKnown: 2})
	z, now := h.zone, time.Now()
	for i := range 5 {
		z.forget([16]byte{0xee, byte(i)}, now)
	}
	z.prove([16]byte{1}, now)
	z.forget([16]byte{1}, now)
	if err := z.saveKnown(t.Context()); err != nil {
		t.Fatal(err)
	}
	data, err := z.storage.Load(t.Context(), storagePrefix(z.name)+"/known")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != 1 || !strings.HasPrefix(string(data), "!01") {
		t.Fatalf("saved set %q, want the one forget of the proven identity", data)
	}
}

// An identity evicted beyond max_known is forgotten in storage too: it has
// not expired there, and a restart that finds newer ones forgotten would
// otherwise load it back as proven, without a new 2xx.
func TestEvictedIdentityIsForgottenInStorage(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "known-evict", MaxKnown: 2, FlushInterval: caddy.Duration(time.Second)})
	z := h.zone
	now := time.Now()
	z.prove([16]byte{1}, now)
	z.prove([16]byte{2}, now.Add(time.Millisecond))
	z.flush(t.Context(), false)
	z.prove([16]byte{3}, now.Add(2*time.Millisecond)) // evicts 1
	z.flush(t.Context(), false)
	stored, err := z.quota.LoadKnown(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range stored {
		if e.Key == fingerprintHex([16]byte{1}) {
			t.Fatalf("the evicted identity is still stored as proven: %v", stored)
		}
	}
	if len(stored) != 2 {
		t.Fatalf("stored known set %v, want the two identities still proven", stored)
	}
}
