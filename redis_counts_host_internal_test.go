package mcplimit

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A start takes, for each key, the largest of the copies of what Redis
// reported that processes of the host left, whoever wrote them; its own
// copy then holds them all, so the copies of processes that are gone are
// removed, and copies of ended periods go too.
func TestSeedRedisCountsTakesTheLargestCopyAndTidiesUp(t *testing.T) {
	now := time.Now()
	if quota.Day.Next(now).Sub(now) < time.Minute || now.Sub(quota.Day.Start(now)) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	newZoneAt := func(dir string) *zone {
		return &zone{
			name:        "a",
			redisCounts: hostFiles{dir: dir, zone: hex.EncodeToString([]byte("a")), owner: newOwner()},
			quota:       quota.New(quota.Config{Clock: time.Now}),
		}
	}
	write := func(f hostFiles, owner string, cs ...quota.Count) string {
		name := filepath.Join(f.dir, f.zone+"."+owner+".counts")
		var b []byte
		for _, c := range cs {
			b = appendCountLine(b, c)
		}
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return name
	}
	today := func(key string, n int64) quota.Count {
		return quota.Count{Key: key, Period: quota.Day, Start: quota.Day.Start(now), N: n}
	}
	yesterday := quota.Count{Key: "i/x", Period: quota.Day, Start: quota.Day.Start(now).AddDate(0, 0, -1), N: 50}
	alive := thisHost + "-" + strconv.Itoa(os.Getpid()) + "-ALIVEZON"
	gone := thisHost + "-" + strconv.Itoa(goneProcess(t)) + "-GONEGONE"
	remote := "00112233aabbccdd-1-REMOTE00"

	dir := t.TempDir()
	z := newZoneAt(dir)
	other := hostFiles{dir: dir, zone: hex.EncodeToString([]byte("ab"))}
	kept := today("i/k", 6)
	kept.Kept = 4 // calls the live process counted since Redis reported, which it pushes itself
	stays := []string{
		write(z.redisCounts, alive, today("i/x", 2), kept),
		write(z.redisCounts, remote, today("i/x", 5)),
		write(other, gone, today("i/x", 100)),
	}
	goneFile := write(z.redisCounts, gone, today("i/x", 1), today("i/y", 32))
	stale := write(z.redisCounts, remote+"OLD", yesterday)

	z.seedRedisCounts(zap.NewNop(), false)

	for _, name := range stays {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(name), err)
		}
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a copy of an ended period stays")
	}
	if _, err := os.Stat(goneFile); err == nil {
		t.Error("the copy of a process that is gone stays")
	}
	if x, y := z.quota.Used([]byte("i/x"), quota.Day, now), z.quota.Used([]byte("i/y"), quota.Day, now); x != 5 || y != 32 {
		t.Errorf("used i/x %d, i/y %d; want the largest copies, 5 and 32", x, y)
	}
	if n := z.quota.Used([]byte("i/k"), quota.Day, now); n != 6 {
		t.Errorf("used i/k %d, want the copy's 6", n)
	}
	for _, c := range z.quota.Counts(now) {
		if c.Key == "i/k" && c.N != 2 {
			t.Errorf("a raise of Redis goes to %d for i/k, want 2: the 4 kept are their maker's to push", c.N)
		}
	}
	own, _ := readCounts(z.redisCounts.path())
	got := map[string]quota.Count{}
	for _, c := range own {
		got[c.Key] = c
	}
	if got["i/x"].N != 5 || got["i/y"].N != 32 || got["i/k"].N != 6 || got["i/k"].Kept != 4 || len(got) != 3 {
		t.Errorf("the zone's own copy holds %v, want i/x 5, i/y 32, and i/k 6 of which 4 kept", got)
	}
}
