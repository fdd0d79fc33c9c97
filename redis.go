package mcplimit

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// Probe backoff while the Redis store is unreachable.
const (
	redisProbeMin = time.Second
	redisProbeMax = 5 * time.Second
)

// redisKeyCheck is how often a zone deciding in Redis checks that the
// fingerprint key is still there, storing its own again if Redis lost it
// (eviction, a restart without persistence, FLUSHALL): an instance
// started meanwhile must find the key every other instance uses. The
// scripts are checked with it, and loaded again if Redis lost them; and
// the zone's epoch, whose change says Redis lost its counts (see
// adoptRedisKey).
const redisKeyCheck = 5 * time.Second

// redisStartMin is the least a zone starting with a Redis store waits for
// it (see zoneRedis.startWait): a first connection may need a TLS
// handshake that a command's timeout leaves no room for.
const redisStartMin = 250 * time.Millisecond

// zoneRedis is a zone's Redis store and its outage bookkeeping: whether
// it is degraded (requests are then decided locally), and the quota counts
// made locally meanwhile, pushed to Redis when it answers again. Without a
// store (zone.detached), it is the bookkeeping alone: the counts kept for
// a store the zone had and will push once it is added back.
type zoneRedis struct {
	store    *redisstore.Store
	cfg      RedisStore // as configured, to notice changes on reload
	degraded atomic.Bool
	// keyAdopted says the zone fingerprints under the key this store
	// holds; until then, the store must not decide.
	keyAdopted atomic.Bool
	// unseeded says the zone's counts are still to be carried to the
	// store: it was added to a running zone while Redis was unreachable,
	// or at a start that found Redis unreachable or counts of an outage
	// still to push (they go first). They are carried once Redis answers.
	unseeded atomic.Bool

	redisCounters

	mu      sync.Mutex
	pending map[deltaKey]int64
	// doubt is the batch of a push that failed: Redis may still have run
	// it (a timeout), so it is sent again first, as it was, under its id,
	// which Redis adds once (see push). nil when there is none.
	doubt     *pushBatch
	lastErr   string
	lastErrAt time.Time
	failures  uint64
	backoff   time.Duration
	nextProbe time.Time
	pushed    uint64
	mirrored  bool // the host holds a copy of pending (mirrorRedisPending)
	// epoch is the zone's epoch in Redis as last read (see
	// redisstore.Store.FingerprintKey), "" before the first read.
	epoch string
	// keyChecked is when the run loop last checked the key in Redis.
	keyChecked time.Time
	// movedTo is the store a reload replaced this one with, once this
	// one's pending counts went to it: counts recorded since (by a request
	// or an adoption that loaded this store before the swap) go there.
	movedTo *zoneRedis
}

// deltaKey is one quota count of one period made while degraded.
type deltaKey struct {
	key    string
	period quota.Period
	start  int64 // unix seconds of the period start
}

// redisTimeout is the configured timeout, or the default.
func redisTimeout(rs *RedisStore) (time.Duration, error) {
	switch {
	case rs.Timeout == 0:
		return redisstore.DefaultTimeout, nil
	case rs.Timeout < 0:
		return 0, fmt.Errorf("store redis timeout %v: want a positive duration", time.Duration(rs.Timeout))
	}
	return time.Duration(rs.Timeout), nil
}

// expandRedisURL expands placeholders such as {env.REDIS_URL}. Braces
// that are no placeholder Caddy knows stay as written (a password's
// `{x}`), and make the URL fail to parse: removed, they would have made
// it another password.
func expandRedisURL(rs *RedisStore) string {
	return caddy.NewReplacer().ReplaceKnown(rs.URL, "")
}

// checkableNow reports whether a store URL can be checked as the config
// is compiled: it holds no placeholder Caddy knows (one is read at start,
// and its value, a variable's braces included, is checked then); a brace
// that no placeholder takes stays, and fails it then as now.
func checkableNow(url string) bool {
	return caddy.NewReplacer().ReplaceKnown(url, "") == url
}

// storeConfig is the configuration of rs's store for zone, its URL
// expanded: an error when that leaves it empty, or leaves a placeholder in
// it empty (an unset variable), where go-redis would dial its default host
// or port.
func (rs *RedisStore) storeConfig(zone string, timeout time.Duration) (redisstore.Config, error) {
	cfg := redisstore.Config{URL: expandRedisURL(rs), Cluster: rs.Cluster, Zone: zone, Timeout: timeout}
	if cfg.URL == "" {
		return cfg, fmt.Errorf("store redis: url %q is empty once expanded", rs.URL)
	}
	if _, err := caddy.NewReplacer().ReplaceOrErr(rs.URL, true, false); err != nil {
		return cfg, fmt.Errorf("store redis: url %q: %w", rs.URL, err)
	}
	return cfg, nil
}

// checkRedisStore refuses a Redis configuration that cannot work: a bad
// timeout, or a URL that is not redis:// or rediss:// once expanded.
func checkRedisStore(rs *RedisStore, zone string) error {
	timeout, err := redisTimeout(rs)
	if err != nil {
		return err
	}
	cfg, err := rs.storeConfig(zone, timeout)
	if err != nil {
		return err
	}
	s, err := redisstore.New(cfg)
	if err != nil {
		return fmt.Errorf("store redis: %w", err)
	}
	return s.Close()
}

// redisCounters are the zone's counters a zoneRedis keeps up with its
// pushes.
type redisCounters struct {
	// bound is the zone's count of the calls counted locally for Redis
	// and not yet pushed (see redis_bound.go): record adds to it, and a
	// push takes out what it carried.
	bound *quota.Counter
	// counts is the zone's quota counts: a push tells it that the calls
	// counted since Redis's report that it carried are in Redis
	// (quota.Counter.Pushed).
	counts *quota.Counter
}

// openRedis opens the Redis store of pol (nil without one) and returns the
// zone's fingerprint key: the one in Redis, which candidate (the key from
// Caddy storage) becomes when no instance has stored one yet. Redis being
// unreachable is not an error: the store starts degraded and the
// candidate is used.
func openRedis(pol *policy, candidate []byte, cs redisCounters, logger *zap.Logger) (*zoneRedis, []byte, error) {
	if pol.redis == nil {
		return nil, candidate, nil
	}
	r, err := newZoneRedis(pol, cs, logger)
	if err != nil {
		return nil, nil, err
	}
	wait := r.startWait()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if cached := readKeyCache(pol.zone); cached != nil {
		// The key this host last used is Redis's: should Redis have lost
		// it, storing it again keeps every instance's fingerprints.
		candidate = cached
	}
	key, epoch, err := r.store.FingerprintKey(ctx, candidate)
	if err != nil {
		// The key this host last fingerprinted with is Redis's when the
		// zone ever reached it: counts made now go under the same
		// fingerprints as every instance's.
		logger.Error("redis store unavailable at start: deciding locally, fingerprints use the key last used on this host (or Caddy storage's) until it returns",
			zap.String("zone", pol.zone), zap.Duration("timeout", wait), zap.Error(err))
		r.fail(err, time.Now())
		return r, candidate, nil
	}
	r.keyAdopted.Store(true)
	r.epoch = epoch
	if err := r.checkDecides(ctx); err != nil {
		// A user that may touch the key but not decide (an ACL): degraded
		// from the start, not healthy until its first call.
		logger.Error("redis store cannot decide at start: deciding locally until it can",
			zap.String("zone", pol.zone), zap.Error(err))
		r.fail(err, time.Now())
	}
	return r, key, nil
}

// checkDecides loads the scripts into Redis where it lacks them and then
// pings (see redisstore.Store.Ping): an error says the store cannot decide
// now. A Redis that restarted has lost its scripts: loaded first, or the
// ping would send the decision's, and the first decision the others,
// past the timeout when slow. The ping runs whatever the load did: a
// failed one has a cluster's slot map read again (a replica promoted),
// and a load that failed on the old map is tried again after it.
func (r *zoneRedis) checkDecides(ctx context.Context) error {
	loadErr := r.store.Preload(ctx)
	err := r.store.Ping(ctx)
	if err == nil && loadErr != nil {
		err = r.store.Preload(ctx)
	}
	return err
}

// startWait is how long the zone waits for Redis's fingerprint key, the
// scripts' loading and a ping (checkDecides) when it starts with the store
// or gains it on a reload, before it starts degraded (see openRedis): the
// store's timeout, and at least redisStartMin, so that a hung Redis delays
// a start by no more.
func (r *zoneRedis) startWait() time.Duration {
	return max(r.store.Timeout(), redisStartMin)
}

// newZoneRedis opens pol's Redis store, which keeps cs up with its pushes.
func newZoneRedis(pol *policy, cs redisCounters, logger *zap.Logger) (*zoneRedis, error) {
	goRedisLog.use(logger)
	timeout, err := redisTimeout(pol.redis)
	if err != nil {
		return nil, err
	}
	cfg, err := pol.redis.storeConfig(pol.zone, timeout)
	if err != nil {
		return nil, err
	}
	st, err := redisstore.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("store redis: %w", err)
	}
	return &zoneRedis{store: st, cfg: *pol.redis, redisCounters: cs, pending: map[deltaKey]int64{}}, nil
}

// applyRedis follows a reload that adds, changes or removes the store. The
// fingerprint key stays the one the zone was created with.
func (z *zone) applyRedis(pol *policy) {
	old := z.redis.Load()
	if pol.redis == nil && old == nil || pol.redis != nil && old != nil && len(redisConflict(pol.redis, &old.cfg)) == 0 {
		return // the same store, however written
	}
	var r *zoneRedis
	if pol.redis != nil {
		var err error
		if r, err = newZoneRedis(pol, z.counters(), z.logger.Load()); err != nil {
			// Provision checked the configuration; keep the old store.
			z.logger.Load().Error("store redis", zap.String("zone", z.name), zap.Error(err))
			return
		}
	}
	if from := cmp.Or(old, z.detached.Load()); from != nil && r != nil {
		// Counts not yet in Redis (an outage's of the old store, or those
		// made while the zone had none) go to the new one.
		from.mu.Lock()
		r.mirrored = from.mirrored // the host's copy now follows r
		for k, n := range from.pending {
			r.add(k, n)
		}
		r.doubt = from.doubt // r is new: it has none of its own
		if r.countLocked() > 0 {
			r.degraded.Store(true)
		}
		clear(from.pending)
		from.doubt = nil
		from.movedTo = r
		from.mu.Unlock()
	}
	if r != nil {
		// A store added to a running zone, or moved to another URL, is
		// a Redis without this zone's counts: they are carried there.
		moved := old == nil || old.cfg.URL != r.cfg.URL
		// A store added to a running zone decides with the fingerprints
		// every other instance computes, or not at all.
		ctx, cancel := context.WithTimeout(context.Background(), r.startWait())
		if moved {
			z.takeSavedRedisPending(ctx, r)
		}
		key := z.fpKey.Load()
		err := z.adoptRedisKey(ctx, r)
		if err == nil {
			// A user that may touch the key but not decide (an ACL)
			// starts degraded, not healthy until its first call.
			err = r.checkDecides(ctx)
		}
		switch {
		case err != nil:
			r.unseeded.Store(moved)
			// Logged whether or not r starts degraded (counts to push
			// first): it is new, and this is its first failure.
			r.fail(err, time.Now())
			z.metrics.storeErrs.Inc()
			z.logger.Load().Error("redis store unavailable: deciding locally until it returns, which is when the counts made locally this period are carried there",
				zap.String("zone", z.name), zap.Error(err))
		case moved && z.fpKey.Load() == key && !z.seedable(r):
			r.unseeded.Store(true) // carried by the probe once the outage's counts are in
		case moved && z.fpKey.Load() == key:
			if err := z.seedRedis(ctx, r); err != nil {
				z.logger.Load().Warn("redis store added or moved: the counts this zone knows of this period could not be carried to redis yet; the zone tries again with its next probe",
					zap.String("zone", z.name), zap.Error(err))
			}
		}
		cancel()
	}
	if r == nil && old != nil {
		// The outage's counts, and those made from now on, are kept for
		// the store's return; set before the store goes, so that no
		// request finds neither.
		z.detached.Store(old)
	}
	z.redis.Store(r)
	if r != nil {
		z.detached.Store(nil) // its counts went to r (movedTo)
	}
	z.setDegradedGauge()
	if r == nil && old != nil {
		// Deciding locally from here on what Redis last reported: the
		// host keeps a copy of that for the zone's next start.
		z.saveRedisCounts()
	}
	if old != nil {
		_ = old.store.Close()
	}
}

// seedRedis raises the quota counts in r to at least what the zone knows
// of the current periods (counted locally, or reported by the Redis it
// used before), less the counts their makers push there (seedCounts),
// when a reload or a start adds the store or a reload moves it to another
// URL: a tenant must not get its quota afresh because the decision moved.
// Until it succeeds the zone's probe tries again (unseeded).
func (z *zone) seedRedis(ctx context.Context, r *zoneRedis) error {
	err := r.store.Seed(ctx, z.seedCounts(ctx, time.Now()))
	r.unseeded.Store(err != nil)
	return err
}

// seedable reports whether the counts may be carried to r now: the
// counts of an outage go first, pushed or read back (the local counts
// hold them too, and a seed leaves out only those storage already knows
// to be bound for Redis: a crash loses the last flush interval of that).
func (z *zone) seedable(r *zoneRedis) bool {
	return r.pendingLen() == 0 && !z.redisPendingUnread.Load()
}

// adoptRedisKey makes the zone fingerprint under the key in r (which the
// zone's current key becomes if no instance stored one yet), so that
// every instance computes the same fingerprints. An instance that started
// while Redis was unreachable, or a zone that gains a store on reload, may
// hold another key: identities proven under it prove themselves again,
// and what was counted under it does not carry over.
//
// It also reads the zone's epoch in Redis. One other than the epoch read
// before says Redis lost its data while the zone ran (a restart without
// persistence, FLUSHALL): its quota counts restart from zero, so the zone
// raises them again to what it knows of the period (unseeded), as a start
// does. Every running instance reads the new epoch, and so raises the
// counts of the identities it served. A raise takes the larger figure,
// never the sum, so that no call is counted twice.
func (z *zone) adoptRedisKey(ctx context.Context, r *zoneRedis) error {
	cur := z.fpKey.Load()
	key, epoch, err := r.store.FingerprintKey(ctx, cur.key)
	if err != nil {
		return err
	}
	if z.keyMade.Swap(false) && bytes.Equal(key, cur.key) {
		// Redis, first reached, held no key and took the one the zone
		// made as it started: a new key, as at a start with Redis there.
		warnOrphanedOverrides(z.logger.Load(), z.name, len(z.pol.Load().overrides))
	}
	r.mu.Lock()
	lost := r.epoch != "" && r.epoch != epoch
	r.epoch = epoch
	r.mu.Unlock()
	r.keyAdopted.Store(true)
	if lost && bytes.Equal(key, cur.key) {
		r.unseeded.Store(true)
		z.logger.Load().Warn("redis store lost its data (restarted without persistence, or flushed): raising its quota counts back to what this instance knows of the period",
			zap.String("zone", z.name))
	}
	if !bytes.Equal(key, cur.key) {
		z.fpKey.Store(newFingerprinter(key))
		z.cacheKey(key)
		z.logger.Load().Warn("fingerprint key replaced by the zone's key in redis: identities proven under the old key prove themselves again",
			zap.String("zone", z.name))
		z.redisKeyToStorage(ctx)
	}
	return nil
}

// readRedisPendingAgain reads into r the counts saved in storage for
// Redis that a start, or a reload adding the store, has not read yet, once
// storage answers; push says Redis answers (see loadRedisPending). They
// are then pushed as any pending count, instead of waiting for the next
// start.
func (z *zone) readRedisPendingAgain(ctx context.Context, r *zoneRedis, push bool) {
	if !z.redisPendingUnread.Load() {
		return
	}
	if err := z.loadRedisPending(ctx, r, push); err != nil {
		return
	}
	z.redisPendingUnread.Store(false)
	z.logger.Load().Info("counts saved during a redis outage read from storage, to be pushed", zap.String("zone", z.name))
}

// closeRedis pushes what is pending and closes the store.
func (z *zone) closeRedis(ctx context.Context) {
	r := z.redis.Load()
	if r == nil {
		return
	}
	if err := z.pushRedis(ctx, r); err != nil {
		if serr := z.saveRedisPending(ctx, r); serr != nil {
			z.logger.Load().Error("redis store: counts made during the outage could be neither pushed nor saved at shutdown",
				zap.String("zone", z.name), zap.Error(err), zap.NamedError("save_error", serr))
		} else {
			z.logger.Load().Warn("redis store: counts made during the outage saved in storage, to be pushed by the next start",
				zap.String("zone", z.name), zap.Error(err))
		}
	}
	z.mirrorRedisPending(r) // gone once pushed or saved; fresh if neither
	z.redisHost.release()
	_ = r.store.Close()
}

// redisFailed marks the store degraded after a failed call.
func (z *zone) redisFailed(r *zoneRedis, err error) {
	z.metrics.storeErrs.Inc()
	if r.fail(err, time.Now()) {
		z.setDegradedGauge()
		z.logger.Load().Error("redis store unavailable: deciding locally (fail open) until it returns",
			zap.String("zone", z.name), zap.Error(err))
		go z.saveRedisCounts() // off the request that found Redis gone
	}
}

// fail records err; it returns true on the transition to degraded.
func (r *zoneRedis) fail(err error, now time.Time) bool {
	r.mu.Lock()
	r.failures++
	r.lastErr, r.lastErrAt = err.Error(), now
	if !r.degraded.Load() {
		r.backoff = redisProbeMin
		r.nextProbe = now.Add(r.backoff)
	}
	r.mu.Unlock()
	return r.degraded.CompareAndSwap(false, true)
}

// redisHealthy reports whether the zone decides in Redis right now: it
// has a Redis store, and that store is not degraded.
func (z *zone) redisHealthy() bool {
	r := z.redis.Load()
	return r != nil && !r.degraded.Load()
}

// quotaDegraded reports whether the zone's quotas are counted in memory
// because the store that holds them is unreachable: with a Redis store,
// Redis, whatever becomes of the flushes to storage (which then save only
// the host's copies and the proven identities); otherwise storage, whose
// flush fails or which has not yet confirmed the fingerprint key. Then
// fail_closed tools are refused and mcp_ratelimit_quota_degraded is 1.
func (z *zone) quotaDegraded() bool {
	if r := z.redis.Load(); r != nil {
		return r.degraded.Load()
	}
	return z.quotaState().Degraded
}

// storeRetryWait is how long until the store quotaDegraded found
// degraded may be back: Redis, at its next probe (probes run each second,
// backing off to 5 s); storage, at the next flush, a flush interval after
// the last. A second more covers the tick that runs either and its I/O.
func (z *zone) storeRetryWait(now time.Time, flush time.Duration) time.Duration {
	next := time.Unix(0, z.flushedAt.Load()).Add(flush)
	if r := z.redis.Load(); r != nil {
		r.mu.Lock()
		next = r.nextProbe
		r.mu.Unlock()
	}
	return max(next.Sub(now), 0) + time.Second
}

// setDegradedGauge sets mcp_ratelimit_quota_degraded (see quotaDegraded).
func (z *zone) setDegradedGauge() {
	if z.quotaDegraded() {
		z.metrics.degraded.Set(1)
		return
	}
	z.metrics.degraded.Set(0)
}

// probeRedis runs once per tick of the zone's loop: it forgets expired
// short-circuit entries, and while degraded pings Redis with backoff; once
// Redis answers it pushes the counts made meanwhile and clears degraded.
func (z *zone) probeRedis(ctx context.Context, now time.Time) {
	r := z.redis.Load()
	if r == nil {
		return
	}
	r.store.Sweep(now)
	defer z.mirrorRedisPending(r)
	if !r.degraded.Load() {
		// Stragglers counted locally by requests that saw the flag just
		// before it cleared.
		if r.pendingLen() > 0 {
			if err := z.pushRedis(ctx, r); err != nil {
				z.redisFailed(r, err)
			}
		}
		if r.unseeded.Load() && !r.degraded.Load() && z.seedable(r) {
			if err := z.seedRedis(ctx, r); err != nil {
				z.redisFailed(r, err)
			}
		}
		if now.Sub(r.keyChecked) >= redisKeyCheck {
			r.keyChecked = now
			err := z.adoptRedisKey(ctx, r)
			if err == nil {
				// A Redis restarted between two calls, or a replica made
				// master, lacks the scripts, and no call failed to tell.
				err = r.store.Preload(ctx)
			}
			if err != nil {
				z.redisFailed(r, err)
			}
		}
		return
	}
	r.mu.Lock()
	due := !now.Before(r.nextProbe)
	r.mu.Unlock()
	if !due {
		return
	}
	// Before asking Redis, which can take up to its timeouts: the host's
	// copy must not lag the calls by that too (a crash meanwhile would
	// lose them).
	z.mirrorRedisPending(r)
	key := z.fpKey.Load()
	err := r.checkDecides(ctx)
	if err == nil {
		// A Redis back from a restart without persistence is told apart
		// from one that kept its data before the zone decides there (see
		// adoptRedisKey): the seed below then raises it.
		err = z.adoptRedisKey(ctx, r)
	}
	if err == nil {
		// Counts stops saved in storage (a reload that added the store
		// found some) are pushed before the zone decides in Redis.
		z.readRedisPendingAgain(ctx, r, true)
	}
	if err == nil {
		err = z.pushRedis(ctx, r)
	}
	if err == nil && r.unseeded.Load() && z.seedable(r) {
		// After the push: the counts kept for Redis during the outage are
		// in the local ones too, which the seed raises Redis's to.
		if z.fpKey.Load() != key {
			r.unseeded.Store(false)
			z.logger.Load().Warn("redis store added: the counts made locally this period are under another fingerprint key than redis's, and are not carried; tenants may spend their quota again this period",
				zap.String("zone", z.name))
		} else {
			err = z.seedRedis(ctx, r)
		}
	}
	if err != nil {
		z.metrics.storeErrs.Inc()
		r.mu.Lock()
		r.failures++
		r.lastErr, r.lastErrAt = err.Error(), now
		r.backoff = min(2*r.backoff, redisProbeMax)
		r.nextProbe = now.Add(r.backoff)
		r.mu.Unlock()
		return
	}
	r.degraded.Store(false)
	z.setDegradedGauge()
	z.logger.Load().Info("redis store available again: counts made during the outage pushed", zap.String("zone", z.name))
}

// record adds (sign 1) or takes back (sign -1) quota counts made locally
// while the store is degraded, and counts them as bound for Redis.
func (r *zoneRedis) record(items []quota.Item, now time.Time, sign int64) {
	if sign > 0 {
		r.bound.Add(items, now)
	} else {
		r.bound.Refund(items, now)
	}
	r = r.lockLive()
	defer r.mu.Unlock()
	for _, it := range items {
		if it.N == 0 || !it.Period.Valid() {
			continue
		}
		r.add(deltaKey{key: string(it.Key), period: it.Period, start: it.Period.Start(now).Unix()}, sign*it.N)
	}
}

// lockLive locks and returns the store that counts recorded into r go to:
// r, or the store a reload replaced it with (movedTo), which took its
// pending counts over.
func (r *zoneRedis) lockLive() *zoneRedis {
	for {
		r.mu.Lock()
		next := r.movedTo
		if next == nil {
			return r
		}
		r.mu.Unlock()
		r = next
	}
}

func (r *zoneRedis) add(k deltaKey, n int64) { addDelta(r.pending, k, n) }

// addDelta adds n to the count of k in m, and drops k when its count
// becomes zero.
func addDelta(m map[deltaKey]int64, k deltaKey, n int64) {
	if v := m[k] + n; v != 0 {
		m[k] = v
	} else {
		delete(m, k)
	}
}

// view is the store section of the zone's admin view.
func (r *zoneRedis) view() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := map[string]any{
		"type":       "redis",
		"degraded":   r.degraded.Load(),
		"timeout":    r.store.Timeout().String(),
		"last_error": r.lastErr,
		"failures":   r.failures,
		"pending":    r.countLocked(),
		"pushed":     r.pushed,
		"remembered": r.store.Remembered(),
	}
	if !r.lastErrAt.IsZero() {
		v["last_error_time"] = r.lastErrAt.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// storeStatus is the `store` section of the zone's admin view: the Redis
// store's state, or null without one.
func (z *zone) storeStatus() any {
	r := z.redis.Load()
	if r == nil {
		return nil
	}
	return r.view()
}
