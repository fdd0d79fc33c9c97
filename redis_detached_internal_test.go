package mcplimit

import (
	"context"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// At each flush, the counts a zone without a store keeps for Redis lose
// those of periods that have ended, and the host's copy (read by the next
// process after a crash) holds the others.
func TestDetachedCountsDropEndedPeriodsAndAreCopiedToTheHost(t *testing.T) {
	now := time.Now()
	if now.Sub(quota.Day.Start(now)) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	z := &zone{
		name:      "detached",
		redisHost: hostFiles{dir: t.TempDir(), zone: hex.EncodeToString([]byte("detached")), owner: newOwner()},
	}
	z.logger.Store(zap.NewNop())
	dt := &zoneRedis{redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	z.detached.Store(dt)
	dt.record([]quota.Item{{Key: []byte("i/today"), Period: quota.Day, N: 2}}, now, 1)
	dt.record([]quota.Item{{Key: []byte("i/yesterday"), Period: quota.Day, N: 3}}, now.AddDate(0, 0, -1), 1)
	z.detachedTick(now)
	today := deltaKey{key: "i/today", period: quota.Day, start: quota.Day.Start(now).Unix()}
	if dt.pendingLen() != 1 || dt.pending[today] != 2 {
		t.Fatalf("kept %v, want today's 2 only", dt.pending)
	}
	data, err := os.ReadFile(z.redisHost.path())
	if err != nil {
		t.Fatal(err)
	}
	if cs := parseCounts(data); len(cs) != 1 || cs[0].Key != "i/today" || cs[0].N != 2 {
		t.Fatalf("host copy %q, want today's 2 only", data)
	}
}

// While the counts bound for Redis cannot be written, the quota counts
// that hold them wait in memory too (an instance raising Redis to
// storage's counts would otherwise carry them unmarked), the quota store
// shows degraded, logged once, not at every flush; once storage takes
// them, both are pushed.
func TestQuotaCountsWaitForTheCountsBoundForRedis(t *testing.T) {
	st := &boundFailing{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	st.failing.Store(true)
	pol, err := compile(&Handler{Zone: "bound-outage", Quota: &QuotaLimit{Day: 100}})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	z, err := newZone(st, pol, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	items := []quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 1}}
	for range 3 {
		z.quota.Add(items, time.Now())
		z.redisBound.Add(items, time.Now())
		z.flush(t.Context(), false)
	}
	if n := len(logs.FilterMessageSnippet("counts kept for redis cannot be marked").All()); n != 1 {
		t.Fatalf("%d log lines for three failed flushes of the counts bound for redis, want 1", n)
	}
	if !z.quotaState().Degraded || z.quota.State().Pending == 0 || z.redisBound.State().Pending == 0 {
		t.Fatalf("quota store %+v, counts bound for redis %+v: want degraded, both pending", z.quotaState(), z.redisBound.State())
	}
	st.failing.Store(false)
	z.flush(t.Context(), false)
	if z.quotaState().Degraded || z.quota.State().Pending != 0 || z.redisBound.State().Pending != 0 {
		t.Fatalf("quota store %+v, counts bound for redis %+v: want both pushed", z.quotaState(), z.redisBound.State())
	}
	// Counts that net to nothing once pushed to Redis (a push takes them
	// out) leave nothing to flush: storage answering clears the state.
	st.failing.Store(true)
	z.redisBound.Add(items, time.Now())
	z.flush(t.Context(), false)
	z.redisBound.Refund(items, time.Now())
	st.failing.Store(false)
	z.flush(t.Context(), false)
	if z.quotaState().Degraded {
		t.Fatalf("quota store %+v after storage answered again, want not degraded", z.quotaState())
	}
	if n := len(logs.FilterMessageSnippet("counts kept for redis marked as such in storage again").All()); n != 2 {
		t.Fatalf("%d log lines for two recoveries, want 2", n)
	}
}

// boundFailing is storage that refuses to lock the objects of the counts
// bound for Redis while failing is set.
type boundFailing struct {
	certmagic.Storage
	failing atomic.Bool
}

func (s *boundFailing) Lock(ctx context.Context, name string) error {
	if s.failing.Load() && strings.Contains(name, "/redis-bound/") {
		return errors.New("redis-bound objects refused (test)")
	}
	return s.Storage.Lock(ctx, name)
}

// A zone without a store that holds counts Redis reported (its store was
// removed, or a start found the host's copy) keeps that copy up to date at
// each flush, with the calls counted since: a crash then loses at most a
// flush interval of them.
func TestCopyOfWhatRedisReportedFollowsTheCallsCountedWithoutTheStore(t *testing.T) {
	if now := time.Now(); now.Sub(quota.Day.Start(now)) < quota.ObserveSlack+time.Minute || quota.Day.Next(now).Sub(now) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	pol, err := compile(&Handler{Zone: "reported-without-store", Quota: &QuotaLimit{Day: 100}, FlushInterval: caddy.Duration(100 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	z, err := newZone(&certmagic.FileStorage{Path: t.TempDir()}, pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	now := time.Now()
	z.quota.Observe([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, Used: 3}}, now)
	z.quota.Add([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 1}}, now)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cs, _ := readCounts(z.redisCounts.path())
		if len(cs) == 1 && cs[0].Key == "i/a" && cs[0].N == 4 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host's copy of what Redis reported holds %v, want i/a 4: 3 reported, 1 counted since", cs)
		}
	}
}

// The counts bound for Redis that storage refuses are copied to the host,
// as the quota counts are, and the next process of the zone on the host
// flushes them: a crash must not lose them, or that process, pushing the
// calls they mark (from the host's copy of what Redis did not take), would
// take out of the record what was never in it, going below what other
// instances marked, and a raise would then carry their calls too.
func TestCountsBoundForRedisThatStorageRefusedOutliveACrash(t *testing.T) {
	if now := time.Now(); quota.Day.Next(now).Sub(now) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	st := &boundFailing{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	st.failing.Store(true)
	pol, err := compile(&Handler{Zone: "bound-crash", Quota: &QuotaLimit{Day: 100}})
	if err != nil {
		t.Fatal(err)
	}
	z, err := newZone(st, pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	items := []quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}
	z.quota.Add(items, time.Now())
	z.redisBound.Add(items, time.Now())
	z.flush(t.Context(), false)
	own := z.boundUnpushed.files.path()
	hostCopy := func(when string, want map[string]int64) {
		t.Helper()
		cs, err := readCounts(own)
		got := map[string]int64{}
		for _, c := range cs {
			got[c.Key] += c.N
		}
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("host copy of the counts bound for redis %s: %v (%v), want %v", when, got, err, want)
		}
	}
	hostCopy("after a flush storage refused", map[string]int64{"i/a": 2})
	z.redisBound.Add([]quota.Item{{Key: []byte("i/b"), Period: quota.Day, N: 1}}, time.Now())
	if err := z.Destruct(); err != nil {
		t.Fatal(err)
	}
	hostCopy("after a stop storage refused", map[string]int64{"i/a": 2, "i/b": 1})

	// Had the process crashed, its file would be a gone owner's. The
	// next process takes it over and flushes it once storage takes it.
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}
	gone := thisHost + "-" + strconv.Itoa(goneProcess(t)) + "-GONEGONE"
	hostFile(t, z.boundUnpushed.files, gone, "i/a", 2, time.Now())
	st.failing.Store(false)
	next, err := newZone(st, pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Destruct() })
	next.flush(t.Context(), false)
	stored := quota.New(quota.Config{Storage: st, Prefix: redisBoundPrefix("bound-crash")})
	if err := stored.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := stored.Used([]byte("i/a"), quota.Day, time.Now()); n != 2 {
		t.Fatalf("storage holds %d calls of i/a bound for redis after the next process flushed, want the crashed one's 2", n)
	}
}
