package mcplimit

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
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
