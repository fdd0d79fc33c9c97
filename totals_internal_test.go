package mcplimit

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// The host's copy of the totals is written again at the first flush once
// it is totalsRefresh old, though no quota was used up or refused here
// (another instance may have used one up), and not at every flush.
func TestTotalsCopyIsRefreshed(t *testing.T) {
	h, z := threeCallsFlushed(t, "totals-refresh")
	ctx := context.Background()
	z.totalsSaved.Store(time.Now().Add(-totalsRefresh).UnixNano())
	z.flush(ctx, false)
	if n := copiedTotals(t, z); n != 3 {
		t.Fatalf("the copy once totalsRefresh old holds %d calls, want 3", n)
	}
	// The refresh dates the copy: the next flush, with no quota used up,
	// leaves it as it is (with 100k tenants it is megabytes).
	serveCall(t, h, "Bearer valid-totals", http.StatusOK)
	z.flush(ctx, false)
	if n := copiedTotals(t, z); n != 3 {
		t.Fatalf("the flush after a refresh wrote the copy again (%d calls), want the refreshed copy of 3 kept", n)
	}
}

// The host's copy of the totals is written when storage starts failing,
// with the totals last read: a start during the outage (after a crash)
// counts on from them, not from a copy up to totalsRefresh old.
func TestTotalsCopyIsWrittenWhenStorageFails(t *testing.T) {
	h, z := threeCallsFlushed(t, "totals-outage")
	z.storage.set(lockRefused{z.storage.get()})
	serveCall(t, h, "Bearer valid-totals", http.StatusOK)
	z.flush(context.Background(), false)
	if n := copiedTotals(t, z); n != 3 {
		t.Fatalf("the copy once storage failed holds %d calls, want the 3 last read", n)
	}
}

// threeCallsFlushed provisions a zone with a quota of 100 a day, serves
// three calls and flushes them, and checks that the flush, with no quota
// used up and a fresh copy, did not copy the totals.
func threeCallsFlushed(t *testing.T, zone string) (*Handler, *zone) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := provisionForTest(t, &Handler{Zone: zone, Preauth: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 100}})
	for range 3 {
		serveCall(t, h, "Bearer valid-totals", http.StatusOK)
	}
	h.zone.flush(context.Background(), false)
	if n := copiedTotals(t, h.zone); n != 0 {
		t.Fatalf("the totals were copied at a flush with no quota used up and a fresh copy: %d", n)
	}
	return h, h.zone
}

// copiedTotals returns the calls the host's copy of z's totals holds.
func copiedTotals(t *testing.T, z *zone) int64 {
	t.Helper()
	cs, err := readCounts(countsCopyPath(totalsKind, z.name))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range cs {
		n += c.N
	}
	return n
}

// lockRefused is storage that refuses every lock.
type lockRefused struct{ certmagic.Storage }

func (lockRefused) Lock(context.Context, string) error {
	return errors.New("locks refused (test)")
}
