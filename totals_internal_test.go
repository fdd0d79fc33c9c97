package mcplimit

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// The host's copy of the totals is written again at the first flush once
// it is totalsRefresh old, though no quota was used up or refused here
// (another instance may have used one up), and not at every flush.
func TestTotalsCopyIsRefreshed(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := provisionForTest(t, &Handler{Zone: "totals-refresh", Preauth: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 100}})
	z := h.zone
	for range 3 {
		serveCall(t, h, "Bearer valid-totals", http.StatusOK)
	}
	copied := func() int64 {
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
	ctx := context.Background()
	z.flush(ctx, false)
	if n := copied(); n != 0 {
		t.Fatalf("the totals were copied at a flush with no quota used up and a fresh copy: %d", n)
	}
	z.totalsSaved.Store(time.Now().Add(-totalsRefresh).UnixNano())
	z.flush(ctx, false)
	if n := copied(); n != 3 {
		t.Fatalf("the copy once totalsRefresh old holds %d calls, want 3", n)
	}
}
