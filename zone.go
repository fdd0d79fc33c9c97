package mcplimit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/known"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// zones holds every zone in the process, keyed by name. A zone outlives
// the handlers (and config loads) that use it and is destroyed when the
// last of them is cleaned up.
var zones = caddy.NewUsagePool()

// zoneEnds orders a zone's end before the start of the next of its name.
// The pool forgets a zone before destroying it, so a zone of the same
// name started meanwhile (a handler that let go after its config was
// unloaded, while the next load names the zone again) would read storage
// before the going zone's final flush wrote it, and miss what it parks:
// releases hold it, starts wait for them.
var zoneEnds sync.RWMutex

// globalKey and anonymousKey key the zone-wide buckets (global,
// anonymous) and the zone's concurrency gauge. They are fingerprint-shaped
// so that those sets run the code compiled for the tenants' sets: in a
// busy server each line of code a decision runs is fetched from memory
// again for every request (see BENCHMARKS.md), and one copy is half the
// fetching of two.
var globalKey, anonymousKey = [16]byte{}, [16]byte{1}

// zone is the state shared by every handler with the same zone name.
type zone struct {
	name   string
	pol    atomic.Pointer[policy]
	logger atomic.Pointer[zap.Logger]
	fpKey  atomic.Pointer[fingerprinter]
	inMemory
	known *known.Set[[16]byte]
	// forgotten holds the identities forgotten after they were proven,
	// or dropped from known (expired, evicted), and the unproven ones
	// whose calls got a 2xx that proves nothing (see learn), for the
	// capacity's forgottenTTL: unproven, they are charged to a tenant
	// bucket all the same (see forgottenWithBucket), in Redis with store
	// redis.
	forgotten *known.Set[[16]byte]
	quota     *quota.Counter
	// redisBound counts the calls counted locally for Redis (in quota too)
	// and not yet pushed there (see redis_bound.go).
	redisBound *quota.Counter
	storage    *swapStorage
	redis      atomic.Pointer[zoneRedis] // nil without `store redis`
	// detached keeps, while the zone has no store but had one this
	// period, the counts made locally for Redis (see redis_detached.go).
	detached atomic.Pointer[zoneRedis]
	sampler  *sampler
	// forwarded holds, per Caddy server name, what the zone said about
	// X-Forwarded-For there under the server's trusted-proxy settings
	// (*forwardedState): each server has its own trusted proxies.
	forwarded sync.Map
	// totalsDue says a quota was used up or refused since the host's copy
	// of the totals was written: the next flush writes it again (see
	// saveTotals), so that a start during an outage after a crash keeps
	// the identity refused.
	totalsDue atomic.Bool
	// totalsSaved is when the host's copy of the totals was last written
	// (Unix nanoseconds; the zone's start before the first).
	totalsSaved atomic.Int64
	// flushedAt is when the run loop last flushed (Unix nanoseconds; the
	// loop's start before the first flush): a degraded storage is tried
	// again at the next flush, a flush interval later.
	flushedAt atomic.Int64

	forgetMu sync.Mutex
	forgets  map[string]int64

	holdMu  sync.Mutex
	holders []*holder // the handlers holding the zone, in load order
	// applied is, per bucket set (by its layer), the limitsMap of the
	// holders last retuned to; overridesApplied their overrides'.
	applied          [numLayers]string
	overridesApplied map[[16]byte]string
	// limitsSince is, per bucket set (by its layer), when retune last
	// changed the limits of some of its keys, in Unix microseconds: Redis
	// credits a bucket's idle time before it at the limits the bucket was
	// last charged under.
	limitsSince [numLayers]atomic.Int64
	// knownNew says an identity was proven since the known-good set was
	// last saved; knownSaved is when that was, in Unix nanoseconds.
	knownNew   atomic.Bool
	knownSaved atomic.Int64

	// keyUnconfirmed is why fpKey is not yet known to be the key in
	// storage (unreachable when the zone was created); nil once it is.
	keyUnconfirmed atomic.Pointer[keyFailure]
	// capacity is the most generous max_known, known_ttl and forgotten
	// identities' lifetime of the handlers holding the zone
	// (noteCapacity).
	capacity atomic.Pointer[zoneCapacity]
	// storageMoved says a config load switched the zone to another
	// storage, where its fingerprint key is still to be confirmed.
	storageMoved atomic.Bool
	// redisPendingUnread says the counts saved in storage during a Redis
	// outage could not be read at start: each flush tries again.
	redisPendingUnread atomic.Bool
	// pendingTaken names the objects of those counts taken into the store
	// whose deletion failed (takePending): newZone, then the run loop.
	pendingTaken map[string]bool
	// pendingLocks takes the locks of those objects, waiting pendingWait
	// at most, and holds the ones whose Unlock failed, released again by
	// the next loadRedisPending.
	pendingLocks quota.Locks
	pendingWait  time.Duration
	// errorHolds counts the requests holding their slots through the
	// server's error routes (see holdThroughErrorRoutes), and heldVar
	// names the request variable that marks them: while there are none,
	// no request looks for the mark.
	errorHolds atomic.Int64
	heldVar    string
	// keyMade says the zone started on a key made then while its Redis
	// store was out of reach: a Redis first reached with no key takes it,
	// and the zone's overrides then match no identity (adoptRedisKey).
	keyMade atomic.Bool

	// unpushed and boundUnpushed are the zone's copies on the host of
	// the counts storage did not take (quota counts, and those bound for
	// Redis); redisHost its file of the counts Redis did not take;
	// redisCounts its copy of what Redis reported (redisCountsKind).
	unpushed, boundUnpushed unpushedCopy
	redisHost, redisCounts  hostFiles

	cancel context.CancelFunc
	done   chan struct{}
	// flushNow asks the run loop for a flush, closing the channel sent
	// once it is done (see flushSoon).
	flushNow chan chan struct{}
	// flushHint asks the run loop for a flush without waiting for it;
	// requests made while one waits are one (see hintFlush).
	flushHint chan struct{}
	// lingering counts the handlers cleaned up whose calls still run,
	// holding the zone's end back (see Handler.Cleanup).
	lingering atomic.Int32
	beat      chan struct{} // closed when keepHostFiles has returned
}

// acquireZone returns the zone named by pol, creating it on first use on
// st, and applies pol's limits to it; its metrics join reg, the registry
// of the config loading.
func acquireZone(st certmagic.Storage, reg *prometheus.Registry, pol *policy, logger *zap.Logger) (*zone, error) {
	val, _, err := zones.LoadOrNew(pol.zone, func() (caddy.Destructor, error) {
		// A zone of this name ending now has ended once the read lock is
		// held: the empty section is the wait.
		zoneEnds.RLock()
		zoneEnds.RUnlock() //lint:ignore SA2001 a barrier, not a critical section
		return newZone(st, pol, logger)
	})
	if err != nil {
		return nil, err
	}
	z := val.(*zone)
	if err := z.agree(reg, pol); err != nil {
		_ = dropZone(z)
		return nil, err
	}
	if err := z.metrics.register(reg); err != nil {
		_ = dropZone(z)
		return nil, err
	}
	z.hold(&holder{pol: pol, storage: st, logger: logger, reg: reg})
	return z, nil
}

// holder is what one handler brings to its zone: the zone-wide settings
// of the handler loaded last are the zone's.
type holder struct {
	pol     *policy
	storage certmagic.Storage
	logger  *zap.Logger
	reg     *prometheus.Registry // the metrics registry of its config
}

// hold makes h's settings the zone's.
func (z *zone) hold(h *holder) {
	z.holdMu.Lock()
	defer z.holdMu.Unlock()
	z.holders = append(z.holders, h)
	z.noteCapacity()
	z.apply(h)
}

// unhold drops the hold of the handler whose policy is pol. When it was
// the zone's last loaded settings (a config load that failed after this
// handler was provisioned), the settings of the last remaining handler
// are the zone's again: a rejected load changes nothing.
func (z *zone) unhold(pol *policy) {
	z.holdMu.Lock()
	defer z.holdMu.Unlock()
	for i, h := range z.holders {
		if h.pol != pol {
			continue
		}
		z.metrics.release(h.reg)
		z.holders = slices.Delete(z.holders, i, i+1)
		z.noteCapacity()
		switch n := len(z.holders); {
		case n == 0: // the zone is being released
			return
		case i == n:
			z.apply(z.holders[n-1])
		default:
			z.retune(time.Now()) // the dropped handler's limits are gone
		}
		// A load is in force once the old handlers let go: a lower
		// max_known or known_ttl applies from then, not at the run
		// loop's next tick, which a request may come before.
		z.applyCapacities(zoneCapacity{})
		return
	}
}

// dropZone drops one hold on z's life: the last one destroys it (see
// zoneEnds).
func dropZone(z *zone) error {
	zoneEnds.Lock()
	defer zoneEnds.Unlock()
	_, err := zones.Delete(z.name)
	return err
}

func newZone(st certmagic.Storage, pol *policy, logger *zap.Logger) (*zone, error) {
	stor := &swapStorage{}
	stor.set(st)
	stored, made, keyErr := startKey(stor, pol.zone, logger)
	var z *zone // the counters' callbacks run from flushes, once z is made
	counter := func(prefix string, onDegraded func(z *zone, degraded bool, err error), kept func(z *zone) *unpushedCopy) *quota.Counter {
		return quota.New(quota.Config{
			Storage:     stor,
			Prefix:      prefix,
			Clock:       time.Now,
			OnDegraded:  func(degraded bool, err error) { onDegraded(z, degraded, err) },
			LockTimeout: lockWait(pol.flush),
			OnLockWait:  func() func() { return z.keepWhileWaiting(kept(z)) },
			OnRepush:    func(object string, n int64) { z.onRepush(object, n) },
			OnDamage: func(object string, malformed int, counts int64, restored bool) {
				z.onDamage(object, malformed, counts, restored)
			},
		})
	}
	bound := counter(redisBoundPrefix(pol.zone), (*zone).onBoundDegraded, func(z *zone) *unpushedCopy { return &z.boundUnpushed })
	counts := counter(storagePrefix(pol.zone), (*zone).onDegraded, func(z *zone) *unpushedCopy { return &z.unpushed })
	rz, key, err := openRedis(pol, stored, redisCounters{bound: bound, counts: counts}, logger)
	if err != nil {
		return nil, err
	}
	warnOrphanedOverrides(logger, pol.zone, orphanedOverrides(pol, made, rz, key, stored))
	owner := newOwner()
	capacity := capacityOf(pol) // the sets are made with it
	z = &zone{
		name:        pol.zone,
		heldVar:     "mcp_ratelimit.held_slots." + pol.zone,
		redisHost:   newHostFiles(redisPendingKind, pol.zone, owner),
		redisCounts: newHostFiles(redisCountsKind, pol.zone, owner),
		inMemory: inMemory{
			preauth: buckets.New[netip.Prefix](bucketRoom(capacity.maxKnown), buckets.HashPrefix),
			tenants: buckets.New[[16]byte](bucketRoom(capacity.maxKnown), buckets.HashFingerprint),
			groups:  buckets.New[[16]byte](bucketRoom(capacity.maxKnown), buckets.HashFingerprint),
			global:  buckets.New[[16]byte](1, buckets.HashFingerprint),
			anon:    buckets.New[[16]byte](1, buckets.HashFingerprint),
			perID:   buckets.NewGauge[[16]byte](buckets.HashFingerprint),
			all:     buckets.NewGauge[[16]byte](buckets.HashFingerprint),
			metrics: newZoneMetrics(pol.zone),
		},
		known:         known.New[[16]byte](capacity.maxKnown, capacity.knownTTL, buckets.HashFingerprint),
		forgotten:     known.New[[16]byte](capacity.maxKnown, capacity.forgottenTTL, buckets.HashFingerprint),
		storage:       stor,
		quota:         counts,
		redisBound:    bound,
		boundUnpushed: unpushedCopy{files: newHostFiles(boundUnpushedKind, pol.zone, owner), counter: bound, what: "bound for redis"},
		sampler:       newSampler(),
		forgets:       map[string]int64{},
		pendingTaken:  map[string]bool{},
		pendingWait:   lockWait(pol.flush),
		beat:          make(chan struct{}),
		done:          make(chan struct{}),
		flushNow:      make(chan chan struct{}),
		flushHint:     make(chan struct{}, 1),
	}
	if rz != nil && rz.degraded.Load() {
		z.metrics.storeErrs.Inc() // openRedis's failure, made before the zone had its metrics
	}
	z.capacity.Store(&capacity)
	z.totalsSaved.Store(time.Now().UnixNano())
	// An identity that expires or is evicted was proven as much as one
	// forgotten: it is charged as one (forgottenWithBucket; in Redis,
	// where its buckets and counts are) rather than as a stranger that
	// its drained bucket or its count made here knows nothing of. An
	// evicted one is forgotten in storage too, where it has not expired:
	// a restart must not load it back once newer ones are forgotten.
	z.known.OnLapse(func(fp [16]byte, at time.Time, evicted bool) {
		z.forgotten.Prove(fp, at)
		if evicted {
			z.storeForget(fp, at)
		}
	})
	z.fpKey.Store(newFingerprinter(key))
	z.keyMade.Store(made && rz != nil && !rz.keyAdopted.Load())
	// Before anything reads or sets the metrics (the quota's first load
	// may mark them degraded; the tracked gauge reads this zone).
	z.adoptParked(capacity)
	if keyErr != nil {
		z.keyUnconfirmed.Store(&keyFailure{err: keyErr.Error(), at: time.Now()})
	}
	z.logger.Store(logger)
	z.cacheKey(key)
	z.redis.Store(rz)
	if keyErr == nil && z.redisKeyInUse() && !bytes.Equal(key, stored) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		z.redisKeyToStorage(ctx)
		cancel()
	}
	z.unpushed = unpushedCopy{files: newHostFiles(unpushedKind, pol.zone, owner), counter: z.quota, what: "quota"}
	// mcp_ratelimit_tracked is read from the zone at each scrape.
	z.metrics.refreshed = func(m *zoneMetrics) {
		for kind, n := range z.tracked() {
			m.tracked.WithLabelValues(kind).Set(float64(n))
		}
	}
	loadCtx, cancelLoad := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLoad()
	if err := z.quota.Load(loadCtx); err != nil {
		z.seedTotals(logger) // the move to degraded was logged (onDegraded)
	} else {
		// A storage that reads but cannot write starts degraded too, not
		// a flush interval later: fail_closed tools are refused from the
		// first call (the move is logged by onDegraded).
		_ = z.quota.Probe(loadCtx)
	}
	for _, u := range z.unpushedCopies() {
		z.adoptUnpushed(u, time.Now())
	}
	if reported := z.seedRedisCounts(logger, rz != nil && rz.degraded.Load()); reported && rz == nil {
		z.detach()
	}
	z.restoreKnown(loadCtx, pol.knownTTL)
	if rz != nil {
		// Pushed by the zone's run loop once Redis answers.
		if err := z.loadRedisPending(loadCtx, rz, !rz.degraded.Load()); err != nil {
			z.redisPendingUnread.Store(true)
			logger.Warn("counts saved during a redis outage unreadable at start; they stay in storage, read again at each flush", zap.String("zone", z.name), zap.Error(err))
		}
		z.adoptRedisPending(rz, time.Now())
	}
	if rz != nil && bytes.Equal(key, stored) {
		// A start that adds the store carries the counts storage holds
		// this period, as a reload that adds it does: a tenant must not
		// get its quota afresh because the decision moved to Redis.
		// Under another key they are under other fingerprints: not.
		// Counts an outage left are pushed first (see seedable).
		if !rz.keyAdopted.Load() || !z.seedable(rz) || z.seedRedis(loadCtx, rz) != nil {
			rz.unseeded.Store(true) // carried by the probe, once Redis answers
		}
	}
	z.setDegradedGauge()
	bg, cancel := context.WithCancel(context.Background())
	z.cancel = cancel
	z.pol.Store(pol)
	go z.keepHostFiles(bg)
	go z.run(bg, capacity)
	return z, nil
}

// apply makes h's policy the zone's policy in force. Existing buckets
// keep their levels; the new limits are applied to them at their next
// use (see retune). The zone-wide capacities (max_known, known_ttl) are
// the most generous of the holders' (noteCapacity), applied by the run
// loop.
func (z *zone) apply(h *holder) {
	pol := h.pol
	z.retune(time.Now())
	z.pol.Store(pol)
	z.logger.Store(h.logger)
	if old := z.storage.cur.Load(); old != nil && !sameStorage(*old, h.storage) {
		z.storageMoved.Store(true)
		z.quota.StorageMoved()
		z.redisBound.StorageMoved()
	}
	z.storage.set(h.storage)
	z.applyRedis(pol)
}

// zoneCapacity is the identity capacity and lifetime a zone applies.
type zoneCapacity struct {
	maxKnown int
	knownTTL time.Duration
	// forgottenTTL is how long a forgotten identity is remembered:
	// known_ttl, or longer while a tenant bucket it drained may not have
	// refilled (with store redis its bucket is there, out of sight).
	forgottenTTL time.Duration
}

// capacityOf is the capacity the policy p asks for.
func capacityOf(p *policy) zoneCapacity {
	refill, _, _ := p.refill(layerTenant)
	return zoneCapacity{p.maxKnown, p.knownTTL, max(p.knownTTL, refill)}
}

// noteCapacity records the zone's capacity for the run loop, which must
// not wait on holdMu (a reload holds it through Redis round trips): the
// most generous max_known and known_ttl of the handlers holding the zone.
// During a config load the old handlers hold it beside the new ones, so a
// lower limit applies only once the load is in force and the old ones
// have let go, and never for a load Caddy rejects, however long it takes
// to fail; handlers of one config that disagree give a result that does
// not depend on the order Caddy loaded them in. z.holdMu must be held.
func (z *zone) noteCapacity() {
	var c zoneCapacity
	for _, h := range z.holders {
		hc := capacityOf(h.pol)
		c.maxKnown = max(c.maxKnown, hc.maxKnown)
		c.knownTTL = max(c.knownTTL, hc.knownTTL)
		c.forgottenTTL = max(c.forgottenTTL, hc.forgottenTTL)
	}
	z.capacity.Store(&c)
}

// applyCapacities applies the zone's capacity when it differs from
// applied, the one last applied, and returns the one in force.
func (z *zone) applyCapacities(applied zoneCapacity) zoneCapacity {
	c := *z.capacity.Load()
	if c == applied || c.maxKnown == 0 {
		return applied // unchanged, or no handler holds the zone
	}
	z.known.SetLimits(c.maxKnown, c.knownTTL)
	z.forgotten.SetLimits(c.maxKnown, c.forgottenTTL)
	z.preauth.SetCapacity(bucketRoom(c.maxKnown))
	z.tenants.SetCapacity(bucketRoom(c.maxKnown))
	z.groups.SetCapacity(bucketRoom(c.maxKnown))
	return c
}

// minBucketRoom is the fewest buckets a bucket set holds, whatever
// max_known says.
const minBucketRoom = 1024

// bucketRoom is how many buckets each of a zone's bucket sets (pre-auth,
// tenant, group) holds under max_known maxKnown: twice it, since the
// identities max_known drops keep their drained tenant buckets until they
// refill (they are charged to them, see decision.forgotten) beside the
// buckets of those it keeps, and at least minBucketRoom, so that a small
// max_known (one that tests its eviction, say) never holds a proven
// identity or a new address back for want of room.
func bucketRoom(maxKnown int) int {
	return max(2*maxKnown, minBucketRoom)
}

// Destruct stops the zone's background work after a final flush.
func (z *zone) Destruct() error {
	z.cancel()
	<-z.done
	endOwner(z.redisCounts.owner) // its files are written: the next start takes them
	z.metrics.unregister()
	z.park()
	return nil
}

// flushSoon has the run loop flush the zone now (its counts, its proven
// set), and waits for it up to wait: a handler cleaned up while its calls
// run keeps the zone from ending until they have (handlerUse), and a
// process that stops meanwhile, its grace period over, would exit before
// the zone's final flush, losing what was counted since the last one.
func (z *zone) flushSoon(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	flushed := make(chan struct{})
	select {
	case z.flushNow <- flushed:
	case <-z.done:
		return
	case <-t.C:
		return
	}
	select {
	case <-flushed:
	case <-z.done:
	case <-t.C:
	}
}

// hintFlush asks the run loop for a flush soon and returns at once: a
// call of a handler cleaned up has ended, and what it taught must not wait
// for the flush interval, nor for the zone's end, which a process that
// stops meanwhile may never reach.
func (z *zone) hintFlush() {
	select {
	case z.flushHint <- struct{}{}:
	default:
	}
}

// run is the zone's single owner of background work: sweeping full
// buckets and expired identities, draining sampled logs, and flushing
// quota counts every flush interval. applied is the capacity newZone made
// the zone's sets with: a handler that holds the zone before the loop
// starts changes the zone's policy, not its sets.
func (z *zone) run(ctx context.Context, applied zoneCapacity) {
	defer close(z.done)
	tick := time.NewTicker(readTick)
	defer tick.Stop()
	lastFlush, lastRead, lastSweep := time.Now(), time.Now(), time.Now()
	z.flushedAt.Store(lastFlush.UnixNano())
	for {
		select {
		case <-ctx.Done():
			<-z.beat // it must not refresh the files released below
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			z.confirmKey(final) // else the counts flushed now may be under a key storage never holds
			z.flush(final, true)
			z.saveTotals()
			z.keepUnpushed(&z.unpushed)
			z.closeRedis(final)
			z.closeDetached(final)
			z.saveRedisCounts()
			_ = z.flushRedisBound(final) // without what closeRedis pushed
			z.keepUnpushed(&z.boundUnpushed)
			cancel()
			z.drainSampler(true)
			return
		case flushed := <-z.flushNow:
			z.flushTick(ctx, time.Now())
			close(flushed)
		case <-z.flushHint:
			z.flushTick(ctx, time.Now())
		case now := <-tick.C:
			applied = z.applyCapacities(applied)
			if now.Sub(lastSweep)+readTick/2 >= time.Second {
				lastSweep = now
				z.preauth.Sweep(now)
				z.tenants.Sweep(now)
				z.groups.Sweep(now)
				z.known.Sweep(now)
				z.forgotten.Sweep(now)
				z.drainSampler(false)
				z.probeRedis(ctx, now)
				z.keyToMovedStorage(ctx)
				z.adoptHostFiles(now) // a process of the host that is gone left them: within a second
			}
			// Half a tick of slack: ticks jitter, and without it a tick
			// landing a hair early would put the work off by a whole tick.
			interval := z.pol.Load().flush
			switch {
			case now.Sub(lastFlush)+readTick/2 >= interval:
				lastFlush, lastRead = now, now
				z.flushedAt.Store(now.UnixNano())
				z.flushTick(ctx, now)
			case now.Sub(lastRead)+readTick/2 >= max(interval/readsPerFlush, readTick):
				// Between flushes, read the shared totals again: the others'
				// counts, pushed at their own flushes, are then seen within
				// a fraction of an interval instead of up to a whole one.
				lastRead = now
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_ = z.quota.Refresh(rctx)
				cancel()
			}
		}
	}
}

// flushTick is a flush interval's work: the key kept and confirmed, the
// outage's counts read again if a read failed, the host's copies written,
// and the counts flushed.
func (z *zone) flushTick(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	z.keepKey(ctx)
	z.confirmKey(ctx)
	r := z.redis.Load()
	if r != nil {
		z.readRedisPendingAgain(ctx, r, !r.degraded.Load())
	}
	// Before the flush, so that a crash right after it finds no call in
	// storage that the host's copies lack: of the calls kept for Redis
	// (storage marks them bound for it, which no raise carries: after a
	// crash only this copy gets them there), and of what Redis reported
	// (a start takes the larger of that copy and storage's count).
	z.detachedTick(now)
	if r != nil {
		z.mirrorRedisPending(r)
	}
	z.saveRedisCounts()
	z.flush(ctx, false)
}

// keyFailure is the last failure to confirm a zone's fingerprint key in
// storage, and when it happened.
type keyFailure struct {
	err string
	at  time.Time
}

// startKey returns the fingerprint key a new zone starts with: the one in
// storage. When storage holds none, the key cached on this host (the one
// this zone last used) goes there, or else a new random one: a storage
// wiped or restored without the key then keeps the key instances already
// fingerprint with. When storage cannot be read it returns the cached key,
// or else a provisional random one, with the storage error: the zone then
// starts and serves, and its run loop confirms the key once storage
// answers (see confirmKey). made says the key is a new random one, stored
// now (see orphanedOverrides).
func startKey(stor keyStorage, zone string, logger *zap.Logger) (key []byte, made bool, err error) {
	cached := readKeyCache(zone)
	fresh := offeredKey(cached)
	key, created, err := loadFingerprintKey(context.Background(), stor, zone, fresh)
	if err == nil {
		if created && cached != nil {
			logger.Warn("storage held no fingerprint key: stored the key cached on this host, the one this zone last used",
				zap.String("zone", zone), zap.String("cache", keyCachePath(zone)))
		}
		return key, created && cached == nil, nil
	}
	if key = cached; key != nil {
		logger.Error("fingerprint key unreadable in storage: fingerprinting with the key cached on this host until storage answers",
			zap.String("zone", zone), zap.String("cache", keyCachePath(zone)), zap.Error(err))
		return key, false, err
	}
	logger.Error("fingerprint key unreadable in storage and not cached on this host: fingerprinting with a provisional key until storage answers",
		zap.String("zone", zone), zap.Error(err))
	return fresh, false, err
}

// warnOrphanedOverrides says, when n overrides of zone match no identity
// since its key is new (see orphanedOverrides), how to mend them.
func warnOrphanedOverrides(logger *zap.Logger, zone string, n int) {
	if n > 0 {
		logger.Warn("zone had no fingerprint key, so a new one was made: its overrides' fingerprints were computed under another key (another zone name, another storage) and match no identity; print them again with `caddy mcp-ratelimit fingerprint --zone`",
			zap.String("zone", zone), zap.Int("overrides", n))
	}
}

// orphanedOverrides is how many of pol's overrides match no identity
// because the zone starts on a key made now (a zone renamed, or moved to
// an empty storage): no fingerprint computed before can be under it, so
// all of them. made says startKey made storage's key, offered; with
// store redis the key is Redis's, new only when Redis answered and took
// the one offered (it had none).
func orphanedOverrides(pol *policy, made bool, rz *zoneRedis, key, offered []byte) int {
	if !made {
		return 0
	}
	if pol.redis != nil && (rz == nil || !rz.keyAdopted.Load() || !bytes.Equal(key, offered)) {
		return 0
	}
	return len(pol.overrides)
}

// keepKey runs before each flush while the zone's fingerprint key is
// confirmed: when storage no longer holds it, the zone confirms it again
// (see confirmKey). A key missing or damaged (a wiped storage, a deleted
// zone folder, a truncated file) is stored again: else the next instance
// to start on a host without the key cached would create another, and one
// credential would have a fingerprint, and a quota, on each key. Another
// key (restored from a backup, or created by an instance that started
// meanwhile) is adopted, so that every instance fingerprints alike.
func (z *zone) keepKey(ctx context.Context) {
	if z.keyUnconfirmed.Load() != nil {
		return // confirmKey stores it or adopts storage's
	}
	if z.redis.Load() != nil && !z.redisKeyInUse() {
		return // Redis's key decides, once Redis answers (adoptRedisKey)
	}
	stored, err := z.storage.Load(ctx, fingerprintKeyName(z.name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) || bytes.Equal(stored, z.fpKey.Load().key) {
		return // unreadable (the flush will say so), or the zone's
	}
	z.logger.Load().Warn("fingerprint key in storage missing, damaged or another: confirming the zone's key there again", zap.String("zone", z.name))
	z.keyUnconfirmed.Store(&keyFailure{err: "fingerprint key in storage missing, damaged or another", at: time.Now()})
	z.confirmKey(ctx)
}

// confirmKey runs before each flush while the zone's fingerprint key is
// not confirmed in storage. When storage answers, the key becomes the zone's
// key there if storage holds none; if storage holds another one (another
// instance created it meanwhile), the zone adopts it, unless the zone
// uses the key of its Redis store, which takes precedence: storage's is
// then replaced by it.
func (z *zone) confirmKey(ctx context.Context) {
	if z.keyUnconfirmed.Load() == nil {
		return
	}
	cur := z.fpKey.Load()
	key, _, err := loadFingerprintKey(ctx, z.storage, z.name, cur.key)
	if err == nil && !bytes.Equal(key, cur.key) && z.redisKeyInUse() {
		err = replaceFingerprintKey(ctx, z.storage, z.name, cur.key)
		key = cur.key
	}
	if err != nil {
		z.keyUnconfirmed.Store(&keyFailure{err: err.Error(), at: time.Now()})
		return
	}
	log := z.logger.Load()
	if !bytes.Equal(key, cur.key) {
		z.fpKey.Store(newFingerprinter(key))
		z.cacheKey(key)
		log.Warn("storage answers with another fingerprint key, now in use: identities proven under the previous key prove themselves again, and quota counted under it stays under its fingerprints",
			zap.String("zone", z.name))
	} else {
		log.Info("fingerprint key confirmed in storage", zap.String("zone", z.name))
	}
	z.keyUnconfirmed.Store(nil)
	z.setDegradedGauge()
}

// redisKeyInUse reports whether the zone fingerprints under the key of its
// Redis store.
func (z *zone) redisKeyInUse() bool {
	r := z.redis.Load()
	return r != nil && r.keyAdopted.Load()
}

// redisKeyToStorage makes the key of the zone's Redis store, which the
// zone fingerprints under, its key in Caddy storage too, replacing
// another one there: once `store redis` is removed, a restart then
// fingerprints as before, and so does the fingerprint command without it.
// A failure leaves the key unconfirmed, for confirmKey to retry.
func (z *zone) redisKeyToStorage(ctx context.Context) {
	if err := replaceFingerprintKey(ctx, z.storage, z.name, z.fpKey.Load().key); err != nil {
		z.keyUnconfirmed.Store(&keyFailure{err: err.Error(), at: time.Now()})
		z.setDegradedGauge()
	}
}

// keyToMovedStorage confirms the zone's fingerprint key in the storage a
// config load switched it to, within a second of the load: the key goes
// there when that storage holds none, so an instance started on it
// fingerprints as this one does; when it holds another (instances already
// use it), that one is adopted, as at any confirmation.
func (z *zone) keyToMovedStorage(ctx context.Context) {
	if !z.storageMoved.Swap(false) {
		return
	}
	z.keyUnconfirmed.CompareAndSwap(nil, &keyFailure{err: "storage changed by a config load; fingerprint key not yet confirmed there", at: time.Now()})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	z.confirmKey(cctx)
}

// cacheKey keeps a copy of key, the zone's fingerprint key, on this host
// for a start while storage is unreachable. A failure only costs that
// copy, so it is logged, not returned.
func (z *zone) cacheKey(key []byte) {
	if err := writeKeyCache(z.name, key); err != nil {
		z.logger.Load().Warn("fingerprint key not cached on this host: a start while storage is unreachable will fingerprint with a provisional key",
			zap.String("zone", z.name), zap.Error(err))
	}
}

// quotaState is the quota counter's state, shown degraded, with the
// key's error, while the zone's fingerprint key is not confirmed in
// storage.
func (z *zone) quotaState() quota.State {
	st := z.quota.State()
	if b := z.redisBound.State(); b.Degraded {
		st.Degraded = true
		st.LastError, st.LastErrorTime = b.LastError, b.LastErrorTime
	}
	if f := z.keyUnconfirmed.Load(); f != nil {
		st.Degraded = true
		st.LastError, st.LastErrorTime = f.err, f.at
	}
	return st
}

// The zone loop ticks every readTick; between two flushes it reads the
// shared quota totals readsPerFlush-1 more times (one storage read each),
// so other instances' pushed counts are seen within a tenth of an interval.
const (
	readTick      = 100 * time.Millisecond
	readsPerFlush = 10
)

// flush pushes quota counts to storage, and the known-good set when it
// must be saved (always when final). The counts bound for Redis go first:
// while they cannot, the counts that hold them wait too (an instance
// raising Redis to storage's counts would carry them unmarked).
func (z *zone) flush(ctx context.Context, final bool) {
	err := z.flushRedisBound(ctx)
	if !final {
		z.mirrorUnpushed(&z.boundUnpushed, err == nil)
	}
	pushed := false
	if err == nil {
		// A known-good set storage does not take fails the flush, as the
		// counts would: degraded, with its error, in the admin API.
		err = z.quota.FlushThen(ctx, func(ctx context.Context) error {
			pushed = true
			if final || z.knownDue(time.Now()) {
				return z.saveKnown(ctx)
			}
			return nil
		})
	}
	if !final {
		z.mirrorUnpushed(&z.unpushed, pushed)
	}
	if err != nil {
		z.metrics.flushes.WithLabelValues("error").Inc()
		return
	}
	if !final && (z.totalsDue.Swap(false) || time.Since(time.Unix(0, z.totalsSaved.Load())) >= totalsRefresh) {
		z.saveTotals() // the totals just adopted: a quota used up here, or an old copy
	}
	z.metrics.flushes.WithLabelValues("ok").Inc()
}

// lockWait bounds a flush's wait for the storage lock: a lock left by a
// crashed instance holds every other instance's pushes until it goes stale
// (certmagic: 10s), and a flush waiting longer than its interval would
// hide that stall. Past the wait the flush fails, visibly (degraded), and
// the counts stay pending for the next one.
func lockWait(flush time.Duration) time.Duration {
	return min(quota.DefaultLockTimeout, max(2*time.Second, flush))
}

// onDegraded logs the transitions of the flushes to storage, and sets the
// degraded gauge. With a Redis store, which holds the quotas, storage
// keeps only copies (of the counts, the proven identities): its outage
// alone leaves the quotas exact.
func (z *zone) onDegraded(degraded bool, err error) {
	log := z.logger.Load()
	z.setDegradedGauge()
	inRedis := z.redis.Load() != nil
	if degraded {
		if inRedis {
			log.Error("storage unavailable: quotas are still decided in Redis; the copies storage keeps wait in memory until it returns", zap.String("zone", z.name), zap.Error(err))
		} else {
			log.Error("quota store unavailable: counting in memory until it returns", zap.String("zone", z.name), zap.Error(err))
		}
		z.saveTotals()
		return
	}
	if inRedis {
		log.Info("storage available again: its copies saved", zap.String("zone", z.name))
		return
	}
	log.Info("quota store available again: pending counts pushed", zap.String("zone", z.name))
}

// onRepush logs a push of this instance that another instance's store
// overwrote (one that paused past its lock, see quota.Config.OnRepush):
// the next flush pushes its counts again.
func (z *zone) onRepush(object string, n int64) {
	z.logger.Load().Warn("quota counts overwritten in storage by an instance that paused past its lock: pushing them again",
		zap.String("zone", z.name), zap.String("object", object), zap.Int64("counts", n))
}

// onDamage logs a quota object found damaged in storage, and its repair
// (see quota.Config.OnDamage).
func (z *zone) onDamage(object string, malformed int, counts int64, restored bool) {
	if restored {
		z.logger.Load().Warn("quota counts in storage were damaged: restored from the counts this instance had read",
			zap.String("zone", z.name), zap.String("object", object), zap.Int("unreadable_lines", malformed), zap.Int64("counts_restored", counts))
		return
	}
	z.logger.Load().Warn("quota counts in storage damaged (lines that do not read, emptied, deleted): keeping the counts read before, restored to storage at the next flush",
		zap.String("zone", z.name), zap.String("object", object), zap.Int("unreadable_lines", malformed), zap.Int64("counts_kept", counts))
}

// knownRefresh is how often the known-good set is saved when only last
// uses changed: a 24th of known_ttl (an hour by default), and never more
// often than quota flushes. Saving rewrites the whole set, O(tenants), so
// it is not done every flush for last uses alone; a restart then may
// expire an identity up to this much early, which costs it one more
// proving request.
func knownRefresh(pol *policy) time.Duration {
	if pol.knownTTL <= 0 {
		return time.Hour
	}
	return max(pol.knownTTL/24, pol.flush)
}

// knownDue reports whether the known-good set must be saved at this
// flush: an identity was proven or forgotten since the last save, or last
// uses have not been saved for knownRefresh.
func (z *zone) knownDue(now time.Time) bool {
	z.forgetMu.Lock()
	forgot := len(z.forgets) > 0
	z.forgetMu.Unlock()
	return forgot || z.knownNew.Load() || now.Sub(time.Unix(0, z.knownSaved.Load())) >= knownRefresh(z.pol.Load())
}

// prove makes fp a proven identity and has it saved at the next flush.
func (z *zone) prove(fp [16]byte, now time.Time) {
	z.known.Prove(fp, now)
	z.knownNew.Store(true)
}

// forget drops a proven identity and remembers the forget for the next
// persistence of the known-good set.
func (z *zone) forget(fp [16]byte, now time.Time) {
	if !z.known.Contains(fp, now) && !z.forgotten.Contains(fp, now) {
		// A credential never proven here is remembered nowhere, in
		// memory or storage: garbage credentials the backend rejects
		// would otherwise pile up there for known_ttl.
		return
	}
	z.forgotten.Prove(fp, now)
	z.known.Forget(fp)
	z.storeForget(fp, now)
}

// storeForget has the forget of fp at at saved with the known-good set at
// the next flush, so that a restart does not load fp back as proven.
func (z *zone) storeForget(fp [16]byte, at time.Time) {
	z.forgetMu.Lock()
	z.forgets[hex.EncodeToString(fp[:])] = at.UnixMilli()
	z.forgetMu.Unlock()
}

func (z *zone) saveKnown(ctx context.Context) error {
	started := time.Now()
	wasNew := z.knownNew.Swap(false)
	// Forgets are taken before the set is read: an identity in the set
	// then was proven again after any of them (quota.SaveKnown).
	z.forgetMu.Lock()
	forgets := z.forgets
	z.forgets = map[string]int64{}
	z.forgetMu.Unlock()
	// A fingerprint as two big-endian halves sorts like its hex form, so
	// SaveKnown gets its adds sorted without comparing strings.
	type entry struct{ hi, lo, last uint64 }
	all := make([]entry, 0, z.known.Len())
	z.known.Each(func(fp [16]byte, last time.Time) {
		all = append(all, entry{binary.BigEndian.Uint64(fp[:8]), binary.BigEndian.Uint64(fp[8:]), uint64(last.UnixMilli())})
	})
	slices.SortFunc(all, func(a, b entry) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		return cmp.Compare(a.lo, b.lo)
	})
	adds := make([]quota.KnownEntry, len(all))
	var fp [16]byte
	for i, e := range all {
		binary.BigEndian.PutUint64(fp[:8], e.hi)
		binary.BigEndian.PutUint64(fp[8:], e.lo)
		adds[i] = quota.KnownEntry{Key: hex.EncodeToString(fp[:]), Last: int64(e.last)}
	}
	if err := z.quota.SaveKnown(ctx, adds, forgets, z.capacity.Load().knownTTL, time.Now()); err != nil {
		z.forgetMu.Lock()
		for k, v := range forgets {
			if z.forgets[k] < v {
				z.forgets[k] = v
			}
		}
		z.forgetMu.Unlock()
		if wasNew {
			z.knownNew.Store(true)
		}
		return fmt.Errorf("saving known identities: %w", err)
	}
	z.knownSaved.Store(started.UnixNano())
	return nil
}

func (z *zone) restoreKnown(ctx context.Context, ttl time.Duration) {
	entries, err := z.quota.LoadKnown(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	// Oldest first: the order in which Restore rebuilds a set fastest.
	slices.SortFunc(entries, func(a, b quota.KnownEntry) int { return cmp.Compare(a.Last, b.Last) })
	for _, e := range entries {
		fp, err := parseFingerprint(e.Key)
		if err != nil {
			continue
		}
		z.known.Restore(fp, time.UnixMilli(e.Last), now)
	}
	z.knownSaved.Store(now.UnixNano()) // what is stored is what is known
}

func storagePrefix(zone string) string { return "mcp_ratelimit/" + zone }
