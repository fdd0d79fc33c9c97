package mcplimit

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// A Redis that loses its data while the zone runs (FLUSHALL, a restart
// without persistence) is noticed by the zone's periodic key check, and
// the zone raises its quota counts back to what it knows of the period:
// an identity that had used up its daily quota stays refused, instead of
// getting the whole quota afresh until Caddy restarts.
func TestRedisThatLostItsDataIsRaisedBackWhileTheZoneRuns(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-guard-epoch-lost", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 5}, Global: &RateLimit{Off: true},
	})
	const token = "Bearer valid-epoch-lost"
	for i := range 5 { // the first proves the identity; all five use up its quota
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	opts, err := redis.ParseURL(h.Store.Redis.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	r := h.zone.redis.Load()
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	used := func() int64 {
		t.Helper()
		n, err := r.store.Used(t.Context(), key, quota.Day, quota.Day.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The key check runs every redisKeyCheck; the raise at the next tick.
	for deadline := time.Now().Add(redisKeyCheck + 10*time.Second); used() != 5; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Redis holds %d for the identity after it lost its data, want it raised back to the 5 used", used())
		}
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "QUOTA_EXHAUSTED") {
		t.Fatalf("a call of the identity whose quota was used before Redis lost its data: %d %s, want a quota refusal", code, body)
	}
}

// storeFails is storage whose Store always fails: storage down.
type storeFails struct{ certmagic.Storage }

func (s *storeFails) Store(context.Context, string, []byte) error {
	return errors.New("store refused")
}

// At a stop during a Redis outage with storage down too, the outage's
// counts can be neither pushed nor saved in storage: they stay in memory,
// so the host's copy written next keeps them for the next process to
// push. Dropped instead, that copy is removed, and the calls are lost:
// every instance hands their quota out again.
func TestOutageCountsStorageRefusedStayOnTheHost(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := provisionForTest(t, &Handler{Zone: "redis-guard-save-fails", Quota: &QuotaLimit{Day: 10}})
	z := h.zone
	t.Cleanup(func() { _ = os.Remove(z.redisHost.path()) })
	r := &zoneRedis{redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	r.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, time.Now(), 1)
	z.mirrorRedisPending(r) // the outage's copy, as each tick writes it
	z.storage.set(&storeFails{Storage: *z.storage.cur.Load()})
	if err := z.saveRedisPending(context.Background(), r); err == nil {
		t.Fatal("saving the outage's counts succeeded though storage refuses")
	}
	if n := r.pendingLen(); n != 1 {
		t.Fatalf("%d counts left pending after storage refused them, want the 1", n)
	}
	z.mirrorRedisPending(r) // as closeRedis does next
	if cs, err := readCounts(z.redisHost.path()); err != nil || len(cs) != 1 || cs[0].Key != "i/a" || cs[0].N != 2 {
		t.Fatalf("the host's copy holds %v (%v), want i/a's 2 calls", cs, err)
	}
}

// Once the outage's counts are in Redis, the host's copy of them goes: a
// copy outliving the push would be pushed again by the next process after
// a crash, counting the calls twice against the tenants' quotas.
func TestHostCopyOfOutageCountsGoesOncePushed(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := provisionForTest(t, &Handler{Zone: "redis-guard-copy-goes", Quota: &QuotaLimit{Day: 10}})
	z := h.zone
	t.Cleanup(func() { _ = os.Remove(z.redisHost.path()) })
	url, _ := localRedis(t)
	st, err := redisstore.New(redisstore.Config{URL: url, Zone: "redis-guard-copy-goes", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &zoneRedis{store: st, redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	r.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, time.Now(), 1)
	z.mirrorRedisPending(r)
	if cs, _ := readCounts(z.redisHost.path()); len(cs) != 1 {
		t.Fatalf("the host's copy holds %v during the outage, want i/a's calls", cs)
	}
	if err := r.push(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	z.mirrorRedisPending(r)
	if _, err := os.Stat(z.redisHost.path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the host's copy is still there after its counts were pushed (%v)", err)
	}
}

// A seed raises Redis to the counts the zone knows less those bound for
// Redis, which their maker pushes there itself: counted in the seed as
// well, those calls would be counted twice, and a tenant refused early.
func TestSeedLeavesOutCountsBoundForRedis(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	z := provisionForTest(t, &Handler{Zone: "redis-guard-seed-bound", Quota: &QuotaLimit{Day: 10}}).zone
	now := time.Now()
	bound := []quota.Item{{Key: []byte("i/bound"), Period: quota.Day, N: 2}}
	z.quota.Add(bound, now)
	z.redisBound.Add(bound, now)
	z.quota.Add([]quota.Item{{Key: []byte("i/counted"), Period: quota.Day, N: 3}}, now)
	got := map[string]int64{}
	for _, c := range z.seedCounts(t.Context(), now) {
		if c.Period == quota.Day {
			got[c.Key] = c.N
		}
	}
	if got["i/bound"] != 0 || got["i/counted"] != 3 {
		t.Fatalf("the seed raises i/bound to %d and i/counted to %d, want 0 (its maker pushes it) and 3", got["i/bound"], got["i/counted"])
	}
}

// Counts of an ended period that a push carried to Redis (an outage over
// midnight) are not taken out of today's counts bound for Redis: those
// are today's calls, still to be pushed, and a seed meanwhile would carry
// them too (counting them twice) if they no longer showed as bound.
func TestPushOfAnEndedPeriodLeavesTodaysBoundCounts(t *testing.T) {
	awayFromMidnight(t)
	r := &zoneRedis{redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	now := time.Now()
	r.bound.Add([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 3}}, now)
	yesterday := quota.Day.Start(now).Add(-24 * time.Hour).Unix()
	r.unbind(&pushBatch{counts: map[deltaKey]int64{{key: "i/a", period: quota.Day, start: yesterday}: 3}})
	if n := r.bound.Used([]byte("i/a"), quota.Day, time.Now()); n != 3 {
		t.Fatalf("today's count bound for Redis is %d after a push of yesterday's, want still 3", n)
	}
}

// A reload that moves the store to another Redis while counts of an
// outage are still to be pushed starts the new store degraded: until its
// probe has pushed them and raised the new Redis to what the zone knows,
// the zone decides locally. Deciding at once in the new, empty Redis
// would hand an identity that used up its quota its quota again, and the
// operator would see the store healthy.
func TestStoreMovedWithCountsToPushDecidesLocallyUntilTheyAreIn(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-guard-moved-pending", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 2}, Global: &RateLimit{Off: true},
	})
	const token = "Bearer valid-moved-pending"
	for i := range 2 { // the whole quota, no refusal remembered
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	old := h.zone.redis.Load()
	old.mu.Lock()
	old.nextProbe = time.Now().Add(time.Hour) // no probe of the old Redis meanwhile
	old.mu.Unlock()
	old.degraded.Store(true) // an outage: another identity's call is kept to push
	if code, body := serveCall(t, h, "Bearer valid-moved-other", http.StatusOK); code != http.StatusOK {
		t.Fatalf("a call during the outage: %d %s", code, body)
	}
	if old.pendingLen() == 0 {
		t.Fatal("the outage's call is not pending")
	}
	url, _ := localRedis(t)
	pol := *h.pol
	pol.redis = &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}
	h.zone.applyRedis(&pol)
	if r := h.zone.redis.Load(); r == old || !r.degraded.Load() {
		t.Fatalf("the store moved with counts to push is not degraded: %v", h.zone.storeStatus())
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "QUOTA_EXHAUSTED") {
		t.Fatalf("a call of the identity that used up its quota, right after the move: %d %s, want a quota refusal", code, body)
	}
}

// Counts recorded for Redis while it is healthy (a request that saw the
// store degraded just before it recovered) are pushed by the zone's next
// tick: left pending, the other instances would never see them, and the
// quota would hold on this instance alone.
func TestStragglersRecordedWhileHealthyArePushed(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{Zone: "redis-guard-stragglers", Quota: &QuotaLimit{Day: 10}})
	r := h.zone.redis.Load()
	r.record([]quota.Item{{Key: []byte("i/straggler"), Period: quota.Day, N: 1}}, time.Now(), 1)
	used := func() int64 {
		t.Helper()
		n, err := r.store.Used(t.Context(), "i/straggler", quota.Day, quota.Day.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); used() != 1 || r.pendingLen() != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Redis holds %d of the straggler, %d counts pending, want 1 and none", used(), r.pendingLen())
		}
	}
}

// deadRedis returns a store on an address where nothing listens.
func deadRedis(t *testing.T, zone string, timeout time.Duration) (*redisstore.Store, string) {
	t.Helper()
	url := "redis://" + unusedAddr(t)
	st, err := redisstore.New(redisstore.Config{URL: url, Zone: zone, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, url
}

// While the store is degraded, a proving call is counted locally for
// Redis without a round trip: during an outage each new identity would
// otherwise wait on the dead Redis and add a failure the operator reads
// as a new error, not the outage already known.
func TestProvingCallsDuringAnOutageCostNoRoundTrip(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	z := provisionForTest(t, &Handler{Zone: "redis-guard-outage-proving", Quota: &QuotaLimit{Day: 10}}).zone
	st, url := deadRedis(t, "redis-guard-outage-proving", time.Second)
	r := &zoneRedis{store: st, cfg: RedisStore{URL: url}, redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	r.degraded.Store(true)
	for _, id := range []string{"i/a", "i/b", "i/c", "i/d", "i/e"} {
		if z.countInRedis(r, []quota.Item{{Key: []byte(id), Period: quota.Day, N: 1}}, time.Now()) {
			t.Fatalf("the proving call of %s was counted in a Redis that is down", id)
		}
	}
	r.mu.Lock()
	failures := r.failures
	r.mu.Unlock()
	if failures != 0 || r.pendingLen() != 5 {
		t.Fatalf("%d store failures and %d counts pending after 5 proving calls during the outage, want none and 5", failures, r.pendingLen())
	}
}

// A proving call whose push to Redis failed (it may have run there: the
// answer was lost) is counted as bound for Redis, as any count kept to be
// pushed is: a seed by another start then leaves it out, since this
// instance pushes it, instead of carrying it too and counting it twice.
func TestProvingCallInDoubtIsBoundForRedisAtOnce(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	z := provisionForTest(t, &Handler{Zone: "redis-guard-proving-doubt", Quota: &QuotaLimit{Day: 10}}).zone
	url := "redis://" + silentServer(t)
	st, err := redisstore.New(redisstore.Config{URL: url, Zone: "redis-guard-proving-doubt", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &zoneRedis{store: st, cfg: RedisStore{URL: url, Timeout: caddy.Duration(50 * time.Millisecond)}, redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	now := time.Now()
	if z.countInRedis(r, []quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 1}}, now) {
		t.Fatal("the push to a Redis that never answers succeeded")
	}
	if n := z.redisBound.Used([]byte("i/a"), quota.Day, now); n != 1 {
		t.Fatalf("the proving call whose push failed is bound for Redis %d times, want 1", n)
	}
}

// Counts pushed just before a decision (those of its own quotas) are no
// longer bound for Redis once it holds them: still bound, a seed would
// leave them out of what it carries, and storage would keep marking
// calls already in Redis as on their way there. Nor are they pending: the
// next push of the outage's counts would send them a second time.
func TestCountsPushedBeforeADecisionAreNoLongerBound(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{Zone: "redis-guard-pushfor", Quota: &QuotaLimit{Day: 10}})
	z := h.zone
	url := h.Store.Redis.URL
	st, err := redisstore.New(redisstore.Config{URL: url, Zone: "redis-guard-pushfor-apart", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	// A store apart from the zone's, so that no tick pushes its counts.
	r := &zoneRedis{store: st, cfg: RedisStore{URL: url}, redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	now := time.Now()
	r.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, now, 1)
	if n := z.redisBound.Used([]byte("i/a"), quota.Day, now); n != 2 {
		t.Fatalf("the outage's counts are bound for Redis %d times, want 2", n)
	}
	if err := r.pushFor(t.Context(), []redisstore.Item{{Kind: redisstore.Quota, Key: "i/a", Period: quota.Day, Limit: 10, N: 1}}, now); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Used(t.Context(), "i/a", quota.Day, quota.Day.Start(now)); err != nil || n != 2 {
		t.Fatalf("Redis holds %d (%v) after the push before the decision, want 2", n, err)
	}
	if n := z.redisBound.Used([]byte("i/a"), quota.Day, now); n != 0 {
		t.Fatalf("counts Redis holds are still bound for it %d times, want 0", n)
	}
	if n := r.pendingLen(); n != 0 {
		t.Fatalf("%d counts still pending after the push before the decision, want none", n)
	}
	if err := r.push(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Used(t.Context(), "i/a", quota.Day, quota.Day.Start(now)); err != nil || n != 2 {
		t.Fatalf("Redis holds %d (%v) after the push before the decision and the next push, want 2", n, err)
	}
}

// After a reload moved the store and its outage's counts to another
// Redis, mirroring the old store leaves the host's copy alone: the copy
// follows the new store, which holds the counts. Removed, a crash before
// the new store's next mirror would lose them.
func TestMovedStoreLeavesTheHostsCopyToItsSuccessor(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := provisionForTest(t, &Handler{Zone: "redis-guard-moved-copy", Quota: &QuotaLimit{Day: 10}})
	z := h.zone
	t.Cleanup(func() { _ = os.Remove(z.redisHost.path()) })
	st, url := deadRedis(t, "redis-guard-moved-copy", 100*time.Millisecond)
	old := &zoneRedis{store: st, cfg: RedisStore{URL: url, Timeout: caddy.Duration(100 * time.Millisecond)}, redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	old.degraded.Store(true)
	old.nextProbe = time.Now().Add(time.Hour)
	old.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, time.Now(), 1)
	z.mirrorRedisPending(old)
	z.redis.Store(old)
	_, moved := deadRedis(t, "redis-guard-moved-copy", 100*time.Millisecond)
	pol := *h.pol
	pol.redis = &RedisStore{URL: moved, Timeout: caddy.Duration(100 * time.Millisecond)}
	z.applyRedis(&pol)
	if r := z.redis.Load(); r == old || r.pendingLen() != 1 {
		t.Fatal("the reload did not move the outage's counts to the new store")
	}
	z.mirrorRedisPending(old) // a tick or a stop that loaded the old store
	if cs, err := readCounts(z.redisHost.path()); err != nil || len(cs) != 1 || cs[0].N != 2 {
		t.Fatalf("the host's copy holds %v (%v), want i/a's 2 calls, which the new store holds", cs, err)
	}
}

// A reload that removes the store copies what Redis last reported to the
// host at once: the zone decides locally from those counts from then on,
// and a crash before the next flush would otherwise start the zone from
// storage's counts alone, handing identities that used up their quota in
// Redis their quota again.
func TestStoreRemovedCopiesWhatRedisReportedAtOnce(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := onRedis(t, &Handler{
		Zone: "redis-guard-removed-copy", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 5}, Global: &RateLimit{Off: true},
		FlushInterval: caddy.Duration(time.Hour), // no flush writes the copy meanwhile
	})
	z := h.zone
	const token = "Bearer valid-removed-copy"
	for i := range 3 {
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	if cs, _ := readCounts(z.redisCounts.path()); len(cs) != 0 {
		t.Fatalf("the host's copy of what Redis reported holds %v before the reload; the test needs none yet", cs)
	}
	pol := *h.pol
	pol.redis = nil
	z.applyRedis(&pol)
	key := "i/" + fingerprintHex(z.fpKey.Load().sum(token))
	cs, err := readCounts(z.redisCounts.path())
	var n int64
	for _, c := range cs {
		if c.Key == key && c.Period == quota.Day {
			n = c.N
		}
	}
	if err != nil || n != 3 {
		t.Fatalf("right after the reload removed the store, the host's copy holds %d (%v) for the identity, want the 3 calls Redis reported: %v", n, err, cs)
	}
}

// listFails is storage whose List fails while fail is set.
type listFails struct {
	certmagic.Storage
	fail atomic.Bool
}

func (s *listFails) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if s.fail.Load() {
		return nil, errors.New("list refused")
	}
	return s.Storage.List(ctx, prefix, recursive)
}

// A reload adding the store while storage cannot list the counts a stop
// saved there during an outage waits, before raising Redis to the counts
// it knows (which hold those calls), until they are read back and pushed:
// seeded first, Redis would get those calls from the seed and again from
// their push, and their tenants would be refused early.
func TestStoreAddedSeedsOnlyAfterTheSavedOutageCountsAreRead(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := provisionForTest(t, &Handler{Zone: "redis-guard-seed-unread", Quota: &QuotaLimit{Day: 10}, FlushInterval: caddy.Duration(time.Second)})
	z := h.zone
	now := time.Now()
	// A stopped instance's 2 calls, in storage's totals and saved for Redis.
	z.quota.Add([]quota.Item{{Key: []byte("i/saved"), Period: quota.Day, N: 2}}, now)
	saveOutageCounts(t, z, now)
	st := &listFails{Storage: *z.storage.cur.Load()}
	st.fail.Store(true)
	z.storage.set(st)
	url, _ := localRedis(t)
	pol := *h.pol
	pol.redis = &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}
	z.applyRedis(&pol)
	r := z.redis.Load()
	used := func() int64 {
		t.Helper()
		n, err := r.store.Used(t.Context(), "i/saved", quota.Day, quota.Day.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := used(); n != 0 || !r.unseeded.Load() {
		t.Fatalf("Redis holds %d of the saved calls (unseeded %v) while they are unread, want 0, the seed waiting", n, r.unseeded.Load())
	}
	st.fail.Store(false) // storage answers: a flush reads them back and pushes them, then the seed runs
	for deadline := time.Now().Add(10 * time.Second); z.redisPendingUnread.Load() || r.unseeded.Load(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the saved counts unread %v, the seed still waiting %v", z.redisPendingUnread.Load(), r.unseeded.Load())
		}
	}
	if n := used(); n != 2 {
		t.Fatalf("Redis holds %d of the 2 saved calls once read back, pushed and seeded, want 2", n)
	}
}
