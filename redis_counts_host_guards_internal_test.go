package mcplimit

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A zone that holds no count Redis reported (one without store redis,
// flushing as every zone does) writes no copy of them on the host.
func TestNoCopyOfRedisCountsWithoutAny(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := provisionForTest(t, &Handler{Zone: "no-redis-copy", Quota: &QuotaLimit{Day: 5}})
	h.zone.saveRedisCounts()
	if _, err := os.Stat(h.zone.redisCounts.path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("copy of redis counts of a zone that holds none: %v, want none", err)
	}
}

// The copy of what Redis reported that a gone process left stays while
// the zone's own copy cannot be written: its counts are nowhere else on
// the host, and a later start takes them.
func TestGoneProcesssCopyStaysWhenTheOwnCopyCannotBeWritten(t *testing.T) {
	now := time.Now()
	if quota.Day.Next(now).Sub(now) < time.Minute || now.Sub(quota.Day.Start(now)) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	dir := t.TempDir()
	z := &zone{
		name:        "a",
		redisCounts: hostFiles{dir: dir, zone: hex.EncodeToString([]byte("a")), owner: newOwner()},
		quota:       quota.New(quota.Config{Clock: time.Now}),
	}
	gone := thisHost + "-" + strconv.Itoa(goneProcess(t)) + "-GONEGONE"
	goneFile := filepath.Join(dir, z.redisCounts.zone+"."+gone+".counts")
	if err := os.WriteFile(goneFile, appendCountLine(nil, quota.Count{Key: "i/x", Period: quota.Day, Start: quota.Day.Start(now), N: 3}), 0o600); err != nil {
		t.Fatal(err)
	}
	// The own copy's name is taken by a directory: it cannot be written.
	if err := os.MkdirAll(filepath.Join(z.redisCounts.path(), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if !z.seedRedisCounts(zap.NewNop(), false) {
		t.Fatal("a copy of the current period reported as none")
	}
	if n := z.quota.Used([]byte("i/x"), quota.Day, now); n != 3 {
		t.Fatalf("used i/x %d, want the gone process's 3", n)
	}
	if _, err := os.Stat(goneFile); err != nil {
		t.Fatalf("the gone process's copy was removed though the own copy could not be written: %v", err)
	}
}
