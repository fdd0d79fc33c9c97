package mcplimit

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// Between its flushes a zone reads the shared totals again, every tenth
// of an interval: counts another instance pushed are seen within a
// fraction of the interval, not only at this zone's next flush.
func TestZoneReadsOthersCountsBetweenFlushes(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "reread", FlushInterval: caddy.Duration(30 * time.Second), Quota: &QuotaLimit{Day: 5},
	})
	z := h.zone
	other := quota.New(quota.Config{Storage: z.storage.get(), Prefix: storagePrefix("reread"), Clock: time.Now})
	key := []byte("i/00000000000000000000000000000001")
	if _, ok := other.TryAdd([]quota.Item{{Key: key, Period: quota.Day, Limit: 100, N: 4}}, time.Now()); !ok {
		t.Fatal("the other instance's count was refused")
	}
	if err := other.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // a third of the interval
	for z.quota.Used(key, quota.Day, time.Now()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the zone sees %d of the other instance's 4 calls 10s after their push, with 30s between its flushes",
				z.quota.Used(key, quota.Day, time.Now()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
