package mcplimit

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
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
	alive := newOwner() // a running zone of this process
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
	for _, c := range z.quota.Counts(now, nil) {
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

// A flush interval copies what Redis reported to the host before it puts
// the calls counted since in storage: a crash right after the flush then
// finds each of them in the copy too, and a start, taking the larger of
// the copy and storage's count, counts them with what Redis reported.
func TestCopyOfWhatRedisReportedHoldsTheCallsBeforeStorageDoes(t *testing.T) {
	now := time.Now()
	if now.Sub(quota.Day.Start(now)) < quota.ObserveSlack+time.Minute || quota.Day.Next(now).Sub(now) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	z, st := witnessedZone(t, &Handler{Zone: "copy-first", Quota: &QuotaLimit{Day: 100}}, storagePrefix("copy-first")+"/quota/",
		func(z *zone) string { return z.redisCounts.path() })
	z.quota.Observe([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, Used: 3}}, now)
	z.quota.Add([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, now)
	z.flushTick(t.Context(), now)
	if seen := st.seen(); len(seen) == 0 || seen[len(seen)-1] != 5 {
		t.Fatalf("the host's copy held %v for i/a as storage took the counts, want 5 (3 reported, 2 counted since)", seen)
	}
}

// A flush interval copies the calls kept for Redis to the host before it
// marks them in storage as bound for Redis: a raise leaves the calls so
// marked to their maker, so one that crashed right after the flush must
// have them in its copy, for the next process to push. So with the store
// removed, and during an outage.
func TestCopyOfTheCallsKeptForRedisHoldsThemBeforeStorageMarksThem(t *testing.T) {
	now := time.Now()
	if quota.Day.Next(now).Sub(now) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	down := "redis://" + unusedAddr(t)
	for _, c := range []struct {
		name  string
		store *Store
		kept  func(z *zone) *zoneRedis
	}{
		{"store removed", nil, func(z *zone) *zoneRedis {
			dt := &zoneRedis{redisCounters: z.counters(), pending: map[deltaKey]int64{}}
			z.detached.Store(dt)
			return dt
		}},
		{"redis down", &Store{Redis: &RedisStore{URL: down, Timeout: caddy.Duration(100 * time.Millisecond)}}, func(z *zone) *zoneRedis {
			return z.redis.Load()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			z, st := witnessedZone(t, &Handler{Zone: "pending-first", Quota: &QuotaLimit{Day: 100}, Store: c.store}, redisBoundPrefix("pending-first")+"/quota/",
				func(z *zone) string { return z.redisHost.path() })
			c.kept(z).record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, now, 1)
			z.flushTick(t.Context(), now)
			if seen := st.seen(); len(seen) == 0 || seen[len(seen)-1] != 2 {
				t.Fatalf("the host's copy held %v for i/a as storage marked the calls bound for redis, want 2", seen)
			}
		})
	}
}

// witnessedZone starts h's zone, with a data directory of its own, on a
// copyWitness of the objects under prefix and of the host file copyAt
// names.
func witnessedZone(t *testing.T, h *Handler, under string, copyAt func(z *zone) string) (*zone, *copyWitness) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	pol, err := compile(h)
	if err != nil {
		t.Fatal(err)
	}
	st := &copyWitness{Storage: &certmagic.FileStorage{Path: t.TempDir()}, under: under}
	z, err := newZone(st, pol, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	st.watch(copyAt(z))
	return z, st
}

// copyWitness is storage that notes, as each object under a prefix
// reaches it, what a host file of counts then holds for i/a.
type copyWitness struct {
	certmagic.Storage
	under string

	mu     sync.Mutex
	copyAt string
	held   []int64
}

func (s *copyWitness) watch(copyAt string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.copyAt = copyAt
}

func (s *copyWitness) seen() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *copyWitness) Store(ctx context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copyAt != "" && strings.HasPrefix(key, s.under) {
		cs, _ := readCounts(s.copyAt)
		var n int64
		for _, c := range cs {
			if c.Key == "i/a" {
				n += c.N
			}
		}
		s.held = append(s.held, n)
	}
	return s.Storage.Store(ctx, key, value)
}
