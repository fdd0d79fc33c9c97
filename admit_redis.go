package mcplimit

import (
	"context"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// admitRedis decides the tenant, group, quota and global layers in Redis,
// in one atomic round trip, when the zone has a healthy Redis store; the
// local steps for those layers then pass (d.inRedis). Without a store, or
// while it is degraded or failing now, it passes and the local steps
// decide, exactly as without Redis.
func (d *decision) admitRedis() (refusal, bool) {
	r := d.z.redis.Load()
	if r == nil || r.degraded.Load() {
		return refusal{}, true
	}
	ref, ok, err := d.decideRedis(r)
	if err != nil {
		d.z.redisFailed(r, err)
		return refusal{}, true
	}
	d.inRedis = true
	return ref, ok
}

// keepForRedis remembers quota counts made locally while a zone's Redis
// store is degraded, to push them when it returns; a rollback takes them
// back.
func (d *decision) keepForRedis() {
	r := d.z.redis.Load()
	if r == nil {
		return
	}
	r.record(d.items, d.now, 1)
	d.res[d.nres] = buckets.Compensate(func(time.Time) { r.record(d.items, d.now, -1) })
	d.nres++
}

// decideRedis builds the request's items (tenant, group, quotas, global, in
// the local order) and has Redis decide them all at once. A later local
// layer's refusal refunds them through the decision's rollback.
func (d *decision) decideRedis(r *zoneRedis) (refusal, bool, error) {
	d.quotaItems()
	items := make([]redisstore.Item, 0, 3+len(d.items))
	var (
		layers [3]layer
		lims   [3]bucketLimit
		nb     int
	)
	addBucket := func(l layer, key string, lim bucketLimit) {
		items = append(items, redisstore.Item{Kind: redisstore.Bucket, Key: key, Rate: float64(lim.rate), Burst: int64(lim.burst), N: d.cost})
		layers[nb], lims[nb] = l, lim
		nb++
	}
	if d.proven && !d.lim.tenantOff {
		addBucket(layerTenant, "t/"+string(d.identityQuotaKey()[2:]), d.lim.tenant)
	}
	if d.hasGroup && d.pol.groupKey != "" {
		addBucket(layerGroup, "g/"+fingerprintHex(d.groupFP), d.pol.group)
	}
	firstQuota := len(items)
	for _, it := range d.items {
		items = append(items, redisstore.Item{Kind: redisstore.Quota, Key: string(it.Key), Period: it.Period, Limit: it.Limit, N: it.N})
	}
	if !d.pol.globalOff {
		addBucket(layerGlobal, "global", d.pol.global)
	}
	if len(items) == 0 {
		return refusal{}, true, nil
	}
	start := time.Now()
	res, err := r.store.Decide(context.Background(), items)
	if err != nil {
		return refusal{}, false, err
	}
	if res.Local {
		d.z.metrics.storeHits.Inc()
	} else {
		d.z.metrics.storeRTT.Observe(time.Since(start).Seconds())
	}
	if res.OK {
		d.res[d.nres] = buckets.Compensate(func(time.Time) {
			d.z.refundRedis(r, items)
			d.forgetLevels()
		})
		d.nres++
		d.levelsInRedis(items, res.After, firstQuota)
		return refusal{}, true, nil
	}
	d.levelsInRedis(items, res.Now, firstQuota)
	i := res.Refused
	if i >= firstQuota && i < firstQuota+len(d.items) {
		q := i - firstQuota
		it := d.items[q]
		if res.Local {
			d.knowUsed(q, int64(res.Held))
		}
		return quotaRefusal(d.itemLayers[q], it, toolOfKey(it.Key), d.now), false, nil
	}
	b := 0 // which bucket: tenant/group come before the quotas, global after
	for j := 0; j < i; j++ {
		if items[j].Kind == redisstore.Bucket {
			b++
		}
	}
	wait := res.Wait
	if wait < 0 {
		wait = time.Hour
	}
	if res.Local && layers[b] == layerTenant {
		d.tenantLeft, d.tenantHeld = res.Held, true
	}
	return rateRefusal(layers[b], lims[b], wait, int(d.cost)), false, nil
}

// levelsInRedis records what Redis reported for items (after charging
// them, or uncharged after a refusal), for the RateLimit headers: the
// tenant bucket's tokens and the identity's quota counts, every
// instance's calls included.
func (d *decision) levelsInRedis(items []redisstore.Item, levels []float64, firstQuota int) {
	if len(levels) != len(items) {
		return
	}
	if d.proven && !d.lim.tenantOff { // the tenant's bucket is item 0
		d.tenantLeft, d.tenantHeld = levels[0], true
	}
	for q := range d.items {
		d.knowUsed(q, int64(levels[firstQuota+q]))
	}
}

// refundRedis gives back a Redis admission that a later local layer
// refused. If Redis cannot be reached, the quota part is kept as a
// negative count to push when it returns.
func (z *zone) refundRedis(r *zoneRedis, items []redisstore.Item) {
	err := r.store.Refund(context.Background(), items)
	if err == nil {
		return
	}
	z.redisFailed(r, err)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, it := range items {
		if it.Kind == redisstore.Quota {
			r.add(deltaKey{key: string(it.Key), period: it.Period, start: it.Period.Start(now).Unix()}, -it.N)
		}
	}
}
