package mcplimit

import (
	"cmp"
	"context"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// admitRedis decides the tenant, group, quota and global layers of a
// metered call in Redis, in one atomic round trip, when the zone has a
// healthy Redis store; the local steps for those layers then pass
// (d.inRedis). Without a store, or while it is degraded or failing now, it
// passes and the local steps decide, exactly as without Redis. Pre-auth
// stays local (a scanner must not cost a network hop): an unproven
// caller's request reaches Redis only once it has paid its address's
// pre-auth token, and is charged there to the group and global buckets
// and the group's quota, as every instance's calls are, and to the quotas
// of its own that Redis holds a count of (see redisItems); it has no
// tenant bucket. A forgotten identity, or one with a count here
// (countedHere), was proven: it is charged where its tenant bucket and
// counts are, in Redis too.
func (d *decision) admitRedis() bool {
	r := d.z.redis.Load()
	if r == nil || r.degraded.Load() {
		return true
	}
	if !d.proven && !d.forgotten && d.countedHere() {
		d.forgotten = true
	}
	if d.probing && d.pol.dryRun {
		return d.peekRedis(r)
	}
	if d.probing {
		// A look costs no round trip: it asks what this instance already
		// knows of Redis (the refusals it remembers), as the local layers
		// Redis stands in for hold nothing to look at.
		d.inRedis = true
		items, slots := d.redisItems()
		if res, known := r.store.KnownRefusal(items); known {
			return d.refused(d.redisRefusal(slots[res.Refused], res))
		}
		return true
	}
	ref, ok, err := d.decideRedis(r)
	if err != nil {
		d.z.redisFailed(r, err)
		return true
	}
	d.inRedis = true
	if !ok {
		return d.refused(ref)
	}
	return true
}

// redisHolds reports whether Redis, not this instance, holds the levels of
// the request's tenant and quota policies: the zone has a healthy Redis
// store, and the identity is decided there (see admitRedis).
func (d *decision) redisHolds() bool {
	r := d.z.redis.Load()
	return r != nil && !r.degraded.Load() && (d.proven || d.forgotten)
}

// countedHere reports whether the unproven identity holds a count in the
// quotas this instance knows of: only proven identities' calls count, so
// it was proven, and is charged where its counts are, in Redis, as a
// forgotten one (checked against what this instance saw, another
// instance's calls since would go uncounted). A credential never proven
// has none: asking costs a garbage credential no round trip.
func (d *decision) countedHere() bool {
	if !d.hasID {
		return false
	}
	d.items, d.itemLayers = d.items[:0], d.itemLayers[:0]
	d.addIdentityItems()
	counted := len(d.items) > 0 && d.z.quota.AnyCounted(d.items, d.now)
	d.items, d.itemLayers = d.items[:0], d.itemLayers[:0]
	return counted
}

// keepForRedis remembers quota counts made locally (while a zone's Redis
// store is degraded or failing, or while the zone has no store but had
// one: zone.detached) to push them with the zone's
// next tick, when Redis returns or when the store is added back; a
// rollback takes them back.
func (d *decision) keepForRedis() {
	r := cmp.Or(d.z.redis.Load(), d.z.detached.Load())
	if r == nil {
		return
	}
	r.record(d.items, d.now, 1)
	d.res[d.nres] = buckets.Compensate(func(time.Time) { r.record(d.items, d.now, -1) })
	d.nres++
}

// redisSlot says which layer an item of a Redis decision stands for.
type redisSlot struct {
	layer layer       // the bucket's layer; unused for a quota
	lim   bucketLimit // the bucket's limit; unused for a quota
	quota int         // index in d.items for a quota, -1 for a bucket
}

// decideRedis builds the request's items (tenant, group, quotas, global, in
// the local order) and has Redis decide them all at once. A later local
// layer's refusal refunds them through the decision's rollback.
//
// In dry run every layer decides as usual: Redis is asked every time (see
// redisstore.Store.Ask), and when it refuses, every layer whose level it
// reported cannot take the request is recorded (see recordInRedis). Such
// a request takes nothing from any layer, as enforcement would have
// refused it whole: not even for a moment, or a concurrent call of the
// same identity would find a layer spent that is not.
func (d *decision) decideRedis(r *zoneRedis) (refusal, bool, error) {
	items, slots := d.redisItems()
	decide := r.store.Decide
	if d.pol.dryRun {
		decide = r.store.Ask
	}
	res, err := d.callRedis(r, items, decide)
	if err != nil {
		return refusal{}, false, err
	}
	if res.OK {
		charged := d.chargedInRedis(items, slots, res.After)
		d.res[d.nres] = buckets.Compensate(func(time.Time) {
			d.z.refundRedis(r, charged, d.now)
			d.forgetLevels()
		})
		d.nres++
		d.levelsInRedis(slots, res.After)
		return refusal{}, true, nil
	}
	d.levelsInRedis(slots, res.Now)
	ref := d.redisRefusal(slots[res.Refused], res)
	if !d.pol.dryRun {
		return d.outlastingInRedis(ref, items, slots, res), false, nil
	}
	d.recordInRedis(ref, items, slots, res)
	return refusal{}, true, nil
}

// peekRedis has Redis decide the request's layers without charging any,
// in dry run, for a request a local layer would refuse (see admitLayers):
// each layer in Redis that would refuse it too is recorded. Should Redis
// fail, the local layers look instead.
func (d *decision) peekRedis(r *zoneRedis) bool {
	items, slots := d.redisItems()
	res, err := d.callRedis(r, items, r.store.Peek)
	if err != nil {
		d.z.redisFailed(r, err)
		return true
	}
	d.inRedis = true
	d.levelsInRedis(slots, res.Now)
	if !res.OK {
		d.recordInRedis(d.redisRefusal(slots[res.Refused], res), items, slots, res)
	}
	return true
}

// callRedis has r's store decide items with call (its Decide, Ask or
// Peek), once the local counts for them are pushed, which the decision
// must find there; and counts the call in the store's metrics.
func (d *decision) callRedis(r *zoneRedis, items []redisstore.Item, call func(context.Context, []redisstore.Item) (redisstore.Result, error)) (redisstore.Result, error) {
	if err := r.pushFor(context.Background(), items, d.now); err != nil {
		return redisstore.Result{}, err
	}
	start := time.Now()
	res, err := call(context.Background(), items)
	if err != nil {
		return res, err
	}
	if res.Local {
		d.z.metrics.storeHits.Inc()
	} else {
		d.z.metrics.storeRTT.Observe(time.Since(start).Seconds())
	}
	return res, nil
}

// recordInRedis records, in dry run, each layer that would refuse the
// request by the levels Redis reported with its refusal res (uncharged):
// the layer of the item Redis refused, with ref, and every other layer
// one of whose items does not fit; each once (a quota per day and per
// month are one layer), with its own refusal, not the request's other
// quotas'.
func (d *decision) recordInRedis(ref refusal, items []redisstore.Item, slots []redisSlot, res redisstore.Result) {
	var seen uint32 // the layers recorded, one bit each
	for k := range items {
		l := d.slotLayer(slots[k])
		if seen&(1<<l) != 0 {
			continue
		}
		its, wait := ref, res.ItemWait(items, k, d.now)
		switch q := slots[k].quota; {
		case k != res.Refused && wait == 0:
			continue
		case q >= 0:
			its = d.itemRefusal(q)
		case k != res.Refused:
			its = rateRefusal(slots[k].layer, slots[k].lim, wait, int(items[k].N))
		}
		seen |= 1 << l
		d.h.record(d, its, true)
	}
}

// chargedInRedis returns the items Redis charged of those it admitted
// (after holding what each holds since): all but the unproven identity's
// quotas it held no count of. Those it charged are counted, so they leave
// the calls a 2xx that proves the identity counts (countProvingCall).
func (d *decision) chargedInRedis(items []redisstore.Item, slots []redisSlot, after []float64) []redisstore.Item {
	if d.ifCounted == 0 {
		return items
	}
	first := len(d.items) - d.ifCounted
	charged := make([]redisstore.Item, 0, len(items))
	// The if-counted items come in uncountedItems' order, so the ones
	// left uncounted are kept in place.
	uncounted := d.uncountedItems[:0]
	for k, it := range items {
		if it.Kind == redisstore.QuotaIfCounted && after[k] < 0 {
			uncounted = append(uncounted, d.uncountedItems[slots[k].quota-first])
			continue
		}
		charged = append(charged, it)
	}
	d.uncountedItems, d.uncounted = uncounted, len(uncounted) > 0
	return charged
}

// slotLayer is the layer of the item slot describes.
func (d *decision) slotLayer(s redisSlot) layer {
	if s.quota >= 0 {
		return d.itemLayers[s.quota]
	}
	return s.layer
}

// redisItems returns the items of the request's Redis decision and what
// each stands for. An unproven identity's own quotas, which quotaItems
// leaves out while this instance knows no count of them, are items too,
// the last d.ifCounted quota items: Redis charges them only where it holds
// a count of them (the identity was proven and counted elsewhere, and its
// calls count here too, as a forgotten one's do), and leaves a garbage
// credential's alone.
func (d *decision) redisItems() ([]redisstore.Item, []redisSlot) {
	d.quotaItems()
	d.ifCounted = 0
	if d.uncounted {
		n := len(d.items)
		d.identityItems()
		d.ifCounted = len(d.items) - n
	}
	items := make([]redisstore.Item, 0, 3+len(d.items))
	slots := make([]redisSlot, 0, cap(items))
	addBucket := func(l layer, key string, lim bucketLimit) {
		since := time.UnixMicro(d.z.limitsSince[l].Load())
		items = append(items, redisstore.Item{Kind: redisstore.Bucket, Key: key, Rate: float64(lim.rate), Burst: int64(lim.burst), Since: since, N: d.cost})
		slots = append(slots, redisSlot{layer: l, lim: lim, quota: -1})
	}
	if (d.proven || d.forgotten) && !d.lim.tenantOff {
		addBucket(layerTenant, "t/"+string(d.identityQuotaKey()[2:]), d.lim.tenant)
	}
	if d.hasGroup && d.pol.groupKey != "" {
		addBucket(layerGroup, "g/"+fingerprintHex(d.groupFP), d.pol.group)
	}
	for q, it := range d.items {
		kind := redisstore.Quota
		if q >= len(d.items)-d.ifCounted {
			kind = redisstore.QuotaIfCounted
		}
		items = append(items, redisstore.Item{Kind: kind, Key: string(it.Key), Period: it.Period, Limit: it.Limit, N: it.N})
		slots = append(slots, redisSlot{quota: q})
	}
	if !d.pol.globalOff {
		addBucket(layerGlobal, "global", d.pol.global)
	}
	return items, slots
}

// redisRefusal is the refusal of the item Redis refused, which slot
// describes.
func (d *decision) redisRefusal(slot redisSlot, res redisstore.Result) refusal {
	if q := slot.quota; q >= 0 {
		if res.Local {
			// Remembered, not asked: the count is the one Redis gave
			// then, and the other quotas' are known only as Redis last
			// reported them here. The refusal stands (counts only grow);
			// what fits now is not claimed. A used-up quota yields to
			// another this instance knows used up that resets later (a
			// tool's month behind the account's day): no call passes
			// before then.
			if int64(res.Held) >= d.items[q].Limit {
				d.z.quota.Fits(d.items, d.now)
				d.knowUsed(q, max(int64(res.Held), d.items[q].Used))
				return d.quotasRefusal(q)
			}
			d.knowUsed(q, int64(res.Held))
			ref := d.itemRefusal(q)
			if ref.never() {
				ref.wait = time.Second // a smaller request asks Redis
			}
			return ref
		}
		return d.quotasRefusal(q)
	}
	wait := res.Wait
	if res.Local && slot.layer == layerTenant {
		d.tenantLeft, d.tenantHeld = res.Held, true
	}
	return rateRefusal(slot.layer, slot.lim, wait, int(d.cost))
}

// outlastingInRedis returns, of ref and the refusals of the other items
// Redis's answer res says cannot fit either, the one that outlasts the
// others, with what they say folded in (see longestOf): Redis reports
// only the first item that did not fit.
//
// A refusal answered from memory comes without the levels: of the others,
// it weighs the buckets whose burst the request exceeds, which never
// admit it as sent (a smaller request asks Redis, after a second).
func (d *decision) outlastingInRedis(ref refusal, items []redisstore.Item, slots []redisSlot, res redisstore.Result) refusal {
	levels := len(res.Now) == len(items)
	d.refs = append(d.refs[:0], ref)
	for k := range items {
		var wait time.Duration
		switch {
		case levels:
			wait = res.ItemWait(items, k, d.now)
		case items[k].Kind == redisstore.Bucket && items[k].N > items[k].Burst:
			wait = time.Second
		}
		if wait == 0 {
			continue
		}
		other := rateRefusal(slots[k].layer, slots[k].lim, wait, int(items[k].N))
		if q := slots[k].quota; q >= 0 {
			other = d.quotasRefusal(q)
		}
		d.refs = append(d.refs, other)
	}
	if !levels && len(d.refs) == 1 {
		return ref // from memory, and nothing to weigh beside it
	}
	return longestOf(d.refs)
}

// levelsInRedis records what Redis reported for the items slots describe
// (after charging them, or uncharged after a refusal), for the RateLimit
// headers: the tenant bucket's tokens and the identity's quota counts,
// every instance's calls included. The quota counts also go to the
// in-memory quota (quota.Counter.Observe).
func (d *decision) levelsInRedis(slots []redisSlot, levels []float64) {
	if len(levels) != len(slots) {
		return
	}
	quotas := false
	for k, s := range slots {
		switch {
		case s.quota >= 0:
			d.knowUsed(s.quota, max(int64(levels[k]), 0)) // -1: not counted there
			if levels[k] < 0 && d.itemLayers[s.quota] == layerQuota {
				// Nothing charged: not one to describe (forgottenCharges).
				d.idKnown[d.items[s.quota].Period] = false
			}
			quotas = true
		case s.layer == layerTenant:
			d.tenantLeft, d.tenantHeld = levels[k], true
		}
	}
	if quotas {
		// Should Redis become unreachable, the in-memory quota goes on
		// from what Redis held, not from the outage counts alone.
		d.z.quota.Observe(d.items, d.now)
	}
}

// refundRedis gives back a Redis admission that a later local layer
// refused. A refund that fails is not kept to push later: it may have run
// in Redis all the same (a timeout), and pushing it would give the count
// back twice. The count then stays, on the side of over-counting, never
// of losing one.
func (z *zone) refundRedis(r *zoneRedis, items []redisstore.Item, now time.Time) {
	if err := r.store.Refund(context.Background(), items); err != nil {
		z.redisFailed(r, err)
		return
	}
	// The quota counts Redis reported with the call no longer hold it: a
	// count it reports below them is no loss of data (see
	// quota.Counter.Observe), and the host's copy must not hold the call.
	var refunded []quota.Item
	for _, it := range items {
		if it.Kind.IsQuota() {
			refunded = append(refunded, quota.Item{Key: []byte(it.Key), Period: it.Period, N: it.N})
		}
	}
	z.quota.ObserveRefunded(refunded, now)
}
