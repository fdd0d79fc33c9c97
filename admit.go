package mcplimit

import (
	"net/http"
	"net/netip"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// admit runs the request path of SPEC.md in order. It returns true when
// the request was refused and the refusal written.
func (h *Handler) admit(d *decision, w http.ResponseWriter, r *http.Request) bool {
	d.header, d.post = r.Header, r.Method == http.MethodPost
	// Pre-auth: an unproven caller pays one token of its address's budget
	// before its body is even read.
	preauthRefused := false // in dry run: the request goes on, refused once
	var dryPreauth refusal  // recorded once inspection knows the cost
	if !d.proven {
		if !d.reservePreauth(1) {
			// A request that no wait lets pass is told so rather than
			// to wait, as far as what is read shows: one whose identity
			// inputs are unreadable is refused as sent below.
			switch {
			case d.pol.dryRun:
				preauthRefused, dryPreauth = true, d.ref
			case d.unreadable != "":
			case d.refusedAsSent(w, r):
				h.refuseRequest(d, w, d.ref)
				return true
			default:
				d.peekIDs(w, r)
				if d.peekRefusedAsSent() {
					h.refuseRequest(d, w, d.ref)
					return true
				}
				return h.refuse(d, w, d.preauthWholeCost(d.ref))
			}
		}
	}
	if d.unreadable != "" {
		// Which credential the backend would check is anyone's guess: a
		// caller must not get to be proven under one and charged under
		// another. It has paid its pre-auth token (kept, as for every
		// refusal of what was sent), so such requests cannot read bodies
		// for free; a small body is read only to echo its ids.
		d.peekIDs(w, r)
		if preauthRefused {
			h.refuse(d, w, dryPreauth)
		}
		h.refuseRequest(d, w, bodyRefusal(http.StatusBadRequest, d.unreadable))
		return true
	}
	inspected := h.inspect(d, w, r)
	if preauthRefused {
		if inspected && d.cost > 1 {
			dryPreauth = d.wholeCostRefusal(dryPreauth)
		}
		asSent := d.dryRefused && d.dryRefs[0].layer == layerRequest
		h.refuse(d, w, dryPreauth)
		if !asSent {
			// Enforcement gives it ahead of every other layer's.
			d.dryRefs = append(d.dryRefs[:0], dryPreauth)
		}
	}
	if !inspected {
		h.refuseRequest(d, w, d.ref)
		return true
	}
	if !d.proven && d.cost > 1 && !preauthRefused {
		if !d.reservePreauth(int(d.cost - 1)) {
			// The token that paid for reading and parsing the body is
			// kept, or a body too costly to pass would be read for free;
			// the wait named is then for the whole cost again.
			d.nres = 0
			ref := d.wholeCostRefusal(d.ref)
			if !d.pol.dryRun {
				ref = d.probe(0, ref)
			}
			if h.refuse(d, w, ref) {
				return true
			}
		}
	}
	if d.cost > 0 {
		if !h.admitLayers(d, w) {
			return h.refuse(d, w, d.ref)
		}
	} else if !d.admitAnonymous() && h.refuse(d, w, d.ref) {
		return true
	}
	if d.dryRefused {
		// Dry run: the request is forwarded but takes nothing, as
		// enforcement would have refused it whole, so every layer stands
		// where enforcement would have left it.
		d.rollback()
	}
	d.z.metrics.admit()
	if d.cost > 0 && !d.slotsHeld {
		d.countInflight()
	}
	return false
}

// countInflight counts the admitted metered request's calls in the
// in-flight gauge, until finish. A body of notifications and responses
// only (see callsNothing) has none, though it costs 1 under `meter *`
// (under a list of methods, it costs only when it holds a call).
func (d *decision) countInflight() {
	n := d.concN
	if n == 0 {
		if d.pol.meter.All && callsNothing(d.req, d.pol.meter) {
			return
		}
		n = 1
		if d.req != nil {
			n = d.req.Calls(d.pol.meter)
		}
	}
	d.inflight = int64(n)
	d.z.metrics.inflightAdd(d.inflight)
}

// admitLayers runs the layers after inspection and returns the refusal to
// give, if any. In dry run every refusal is recorded and the next layer
// decides (on this instance's own layers, each looks before any takes).
// Otherwise the first refusal ends the taking, and the layers
// after it only look (probe), so that the refusal given is the one that
// holds the request back longest.
func (h *Handler) admitLayers(d *decision, w http.ResponseWriter) bool {
	if d.pol.dryRun && (d.dryRefused || !d.z.redisHealthy()) {
		// Dry run on this instance's own layers: every layer looks first,
		// and a request one of them would refuse takes nothing, not even
		// for the moment before the rollback. Else a concurrent call of
		// the same identity would find its tenant bucket short of the
		// tokens such a request held, and record a refusal enforcement
		// never gives (there the longer quota refusal is named). Redis
		// decides a would-be refusal without taking (see admitRedis); a
		// request pre-auth would refuse only looks there too.
		if d.dryRunLook(h, w) {
			return true
		}
	} else if !d.pol.dryRun && d.looksFirst() {
		// An organization's allowance is its members': a member's call
		// that a layer after the group refuses (its own quota used up)
		// must not hold the group's tokens even for the moment before a
		// rollback, or a flood of such calls would refuse the others'.
		// Nor may a call of a tool its quota or a degraded store refuses
		// hold the caller's tenant tokens its calls of other tools need.
		// Every layer looks first, and a call none refuses then takes.
		d.probing = true
		for i, step := range admissionSteps {
			if !step(d) {
				return d.refused(d.probe(i+1, d.ref))
			}
		}
		d.probing = false
	} else if c := d.lim.concurrency; d.pol.anonymousOn || c.Max > 0 || c.PerIdentity > 0 {
		// Anonymous and concurrency come after the shared layers but
		// look first: a request they refuse must not hold global tokens
		// or Redis counts even for the moment before a rollback, or a
		// flood of such requests would crowd out other tenants. In dry
		// run such a request takes nothing either: every layer looks,
		// and each that would refuse it is recorded.
		d.probing = true
		if !d.admitAnonymous() || !d.admitConcurrency() {
			if !d.pol.dryRun {
				return d.refused(d.probe(0, d.ref))
			}
			d.probing = false
			return d.dryRunLook(h, w)
		}
		d.probing = false
		if !d.pol.dryRun && d.z.redisHealthy() {
			// They also take first, before the round trip: else every
			// call of a flood would find the slots free while the others
			// are in Redis, be charged there, and be refused only after,
			// holding the shared buckets' tokens until the refund.
			if !d.admitAnonymous() || !d.admitConcurrency() {
				// Another call took them since the look: give back what
				// this one took, and let every layer look from there.
				d.rollback()
				return d.refused(d.probe(0, d.ref))
			}
			d.tookLocal = true
		}
	}
	for i, step := range admissionSteps {
		switch {
		case step(d):
		case d.pol.dryRun:
			h.refuse(d, w, d.ref)
		default:
			return d.refused(d.probe(i+1, d.ref))
		}
	}
	return true
}

// dryRunLook has every layer of a dry-run request look and records each
// refusal one would give. It reports whether the request would be refused
// (by a layer, or by pre-auth before them): it then takes nothing.
func (d *decision) dryRunLook(h *Handler, w http.ResponseWriter) bool {
	d.probing = true
	for _, step := range admissionSteps {
		if !step(d) {
			h.refuse(d, w, d.ref)
		}
	}
	d.probing = false
	return d.dryRefused
}

// probe has the layers from admissionSteps[from] on decide without taking
// anything (a refused request must not hold capacity even for a moment)
// and returns the refusal that holds the request back longest: ref or one
// of theirs, with what the others say folded in (see longestOf). The
// layers before from may have taken for this request, so they are not
// asked again.
func (d *decision) probe(from int, ref refusal) refusal {
	steps := admissionSteps[from:]
	if d.cost <= 0 {
		// A request that costs nothing (unmetered, a GET stream, a body
		// not read) meets only the anonymous layer after pre-auth.
		steps = unmeteredSteps
	}
	d.probing = true
	refs := d.refs[:0]
	for _, step := range steps {
		if !step(d) {
			if len(refs) == 0 {
				refs = append(refs, ref)
			}
			refs = append(refs, d.ref)
		}
	}
	d.refs = refs
	if len(refs) == 0 {
		return ref // the only refusal: nothing to weigh
	}
	return longestOf(refs)
}

// refuseRequest answers a request refused as sent (body rules, argument
// bounds, identity headers), in dry run too: it can never pass. The
// pre-auth token it paid is kept: reading its body was the work.
func (h *Handler) refuseRequest(d *decision, w http.ResponseWriter, ref refusal) {
	h.record(d, ref, false)
	h.writeRefusal(w, d, ref)
}

// preauthWholeCost turns a pre-auth refusal for the first token into one
// for the request's whole cost, when peekIDs could read the body: the
// wait it names must be enough for the same request. The layers after
// pre-auth look too, for a longer one, those an unread body or a request
// without one meets included. A body left unread, which may well hold a
// tool call, is weighed as one call, and its refusal says that a costlier
// request waits longer (unread).
func (d *decision) preauthWholeCost(ref refusal) refusal {
	d.cost = d.requestCost()
	if d.unread {
		d.cost = max(d.cost, 1)
	}
	if d.cost > 1 {
		ref = d.wholeCostRefusal(ref)
	}
	ref = d.probe(0, ref)
	ref.unread = d.unread
	return ref
}

// wholeCostRefusal makes a pre-auth refusal speak of the request's whole
// cost, with the wait for all of it in the bucket as it is now.
func (d *decision) wholeCostRefusal(ref refusal) refusal {
	ref.n = int(d.cost)
	if wait, fits := d.z.preauth.Wait(d.addr, toBuckets(d.preauthLim), ref.n, d.now); !fits {
		ref.wait = wait
	}
	return ref
}

// requestCost is what the request costs under the handler's meter: the
// parsed body's cost, nothing for a request without one (a GET stream, a
// DELETE) or not parsed, and 1 at least for every request under `meter *`.
func (d *decision) requestCost() int64 {
	var cost int64
	if d.req != nil {
		toolCost := d.toolCost
		if len(d.lim.costs) == 0 {
			toolCost = nil // every tool costs 1: no name to look up
		}
		cost = d.req.Cost(d.pol.meter, toolCost)
	}
	if d.pol.meter.All && cost < 1 {
		cost = 1
	}
	return cost
}

// admissionSteps are the layers after inspection, in SPEC order: tenant
// before global, so a tenant over its own limit cannot spend shared
// capacity. With a healthy Redis store, admitRedis decides tenant, group,
// quota and global in one round trip and their local steps pass. A step
// returns whether its layer admits the request; when it does not, the
// refusal is in d.ref (see refused).
var admissionSteps = []func(*decision) bool{
	(*decision).admitRedis,
	(*decision).admitTenant,
	(*decision).admitGroup,
	(*decision).admitStore,
	(*decision).admitQuota,
	(*decision).admitGlobal,
	(*decision).admitAnonymous,
	(*decision).admitConcurrency,
}

// unmeteredSteps are the layers after inspection that a request costing
// nothing meets: the anonymous bucket charges it 1, as pre-auth does.
var unmeteredSteps = []func(*decision) bool{(*decision).admitAnonymous}

// refuse handles a layer's refusal: in dry run it is recorded and the
// request goes on; otherwise everything reserved so far is given back and
// the refusal is written. It returns true when the request stops here.
func (h *Handler) refuse(d *decision, w http.ResponseWriter, ref refusal) bool {
	if d.pol.dryRun {
		h.record(d, ref, true)
		return false
	}
	d.rollback()
	h.record(d, ref, false)
	h.writeRefusal(w, d, ref)
	return true
}

// reservePreauth takes n tokens from the client address's pre-auth
// bucket (a gateway's larger one when the address is listed).
func (d *decision) reservePreauth(n int) bool {
	pol := d.pol
	if pol.preauthOff {
		return true
	}
	lim, rl := pol.preauth, pol.preauthPolicy
	if g, gw, ok := gatewayOf(pol.gateways, d.ip); ok {
		// A gateway listed narrower than the pre-auth key's network is
		// its own key, so that its neighbours neither get nor spend its
		// budget; one listed wider is keyed like any client, so that a
		// range cannot mint a budget per address.
		lim, rl = g.limit, g.rlPolicy
		if gw.Bits() > d.addr.Bits() {
			d.addr = netip.PrefixFrom(d.ip, gw.Bits()).Masked()
		}
	}
	d.preauthLim, d.preauthPolicy = lim, rl
	ok := reserveIn(d, d.z.preauth, d.addr, lim, n, layerPreauth)
	if ok {
		d.preauthLeft, d.preauthHeld = d.res[d.nres-1].Left(), true
	}
	return ok
}

// refused records ref as the refusal of the layer at hand and returns
// false, for a step to return.
func (d *decision) refused(ref refusal) bool {
	d.ref = ref
	return false
}

// reserveIn takes n tokens from key's bucket in set, recording the
// reservation for rollback, or records the refusal of layer l in d.ref. A new
// key arriving at a full set is refused too.
func reserveIn[K comparable](d *decision, set *buckets.Set[K], key K, lim bucketLimit, n int, l layer) bool {
	if d.probing {
		if wait, ok := set.Wait(key, toBuckets(lim), n, d.now); !ok {
			return d.refused(rateRefusal(l, lim, wait, n))
		}
		return true
	}
	res, wait, ok, full := set.Reserve(key, toBuckets(lim), n, d.now)
	if !ok {
		if full {
			d.untracked |= 1 << l
			d.roomWait = wait
			return d.refused(capacityRefusal(l, wait))
		}
		return d.refused(rateRefusal(l, lim, wait, n))
	}
	d.res[d.nres] = res
	d.nres++
	return true
}

func (d *decision) admitTenant() bool {
	if d.inRedis {
		return true
	}
	if d.lim.tenantOff || !d.proven && !d.forgottenWithBucket() {
		return true
	}
	ok := reserveIn(d, d.z.tenants, d.fp, d.lim.tenant, int(d.cost), layerTenant)
	if ok && !d.probing {
		d.tenantLeft, d.tenantHeld = d.res[d.nres-1].Left(), true
	}
	return ok
}

// forgottenWithBucket says an unproven identity was proven before: it is
// remembered as forgotten (d.forgotten; a full bucket is dropped, and one
// is made again), or it still has the tenant bucket it earned then (a
// drained bucket is kept until it refills). Its calls are charged to the
// bucket too, so that getting itself forgotten (any rejected request does
// it) never buys calls beyond its rate, not even calls sent at once from
// many addresses before a 2xx proves it again. A credential never proven
// has no bucket, and none is made for it.
func (d *decision) forgottenWithBucket() bool {
	if d.forgotten {
		return true
	}
	if !d.hasID {
		return false
	}
	_, ok := d.z.tenants.Tokens(d.fp, d.now)
	return ok
}

// looksFirst reports whether every layer of the request looks before any
// takes: when it is charged to a group bucket of this instance, or a tool
// policy of the zone can refuse it after its tenant tokens are taken. With
// a healthy Redis store, those layers are decided there, at once.
func (d *decision) looksFirst() bool {
	tools := d.req != nil && (d.pol.toolQuotas || d.pol.failClosed)
	return (tools || d.hasGroup && d.pol.groupKey != "") && !d.z.redisHealthy()
}

func (d *decision) admitGroup() bool {
	if d.inRedis {
		return true
	}
	if !d.hasGroup || d.pol.groupKey == "" {
		return true
	}
	return reserveIn(d, d.z.groups, d.groupFP, d.pol.group, int(d.cost), layerGroup)
}

// admitStore refuses calls of fail_closed tools while the quota store is
// degraded; every other call keeps failing open.
func (d *decision) admitStore() bool {
	if d.inRedis || !d.pol.failClosed || d.req == nil || !d.z.quotaDegraded() {
		return true
	}
	var tool string
	d.eachTool(func(name []byte) {
		if tp := d.pol.tools[string(name)]; tp != nil && tp.failClosed && tool == "" {
			tool = string(name)
		}
	})
	if tool == "" {
		return true
	}
	return d.refused(storeRefusal(tool, d.z.storeRetryWait(d.now, d.pol.flush)))
}

func (d *decision) admitGlobal() bool {
	if d.pol.globalOff || d.inRedis {
		return true
	}
	return reserveIn(d, d.z.global, globalKey, d.pol.global, int(d.cost), layerGlobal)
}

// admitAnonymous charges a request without identity to the anonymous
// bucket: 1, or its metered cost if larger, as pre-auth charges an
// unproven one. Unmetered requests (initialize, tools/list, SSE streams)
// pass the other layers untouched, but not this one: it bounds what
// keyless callers from every address send together.
func (d *decision) admitAnonymous() bool {
	if d.hasID || !d.pol.anonymousOn || d.tookLocal {
		return true
	}
	return reserveIn(d, d.z.anon, anonymousKey, d.pol.anonymous, int(max(d.cost, 1)), layerAnonymous)
}

// admitConcurrency takes the in-flight slots last, so no other layer can
// refuse while a slot is held; with a healthy Redis store, before the
// round trip instead (see admitLayers), so that a call refused for want of
// a slot is never charged in Redis. A body of JSON-RPC notifications and
// responses only puts no call in flight (see callsNothing).
func (d *decision) admitConcurrency() bool {
	if d.tookLocal || d.slotsHeld {
		return true
	}
	c := d.lim.concurrency
	perID := c.PerIdentity > 0 && d.hasID
	if c.Max <= 0 && !perID || callsNothing(d.req, d.pol.meter) {
		return true
	}
	// A batch's calls may all run at once: each takes a slot.
	d.concN = 1
	if d.req != nil {
		d.concN = d.req.Calls(d.pol.meter)
	}
	// The identity's own cap first: a caller over it must not hold one of
	// the zone's slots, even for a moment.
	if perID {
		if d.probing && d.z.perID.Count(d.fp)+d.concN > c.PerIdentity || !d.probing && !d.z.perID.Acquire(d.fp, d.concN, c.PerIdentity) {
			return d.refused(concurrencyRefusal(c.PerIdentity, true, d.concN))
		}
		d.concID = !d.probing
	}
	if c.Max > 0 {
		if d.probing && d.z.all.Count(globalKey)+d.concN > c.Max || !d.probing && !d.z.all.Acquire(globalKey, d.concN, c.Max) {
			return d.refused(concurrencyRefusal(c.Max, false, d.concN))
		}
		d.concAll = !d.probing
	}
	return true
}

// forgetLevels drops the tenant and quota levels recorded for the
// RateLimit header, once the charge they describe is given back.
func (d *decision) forgetLevels() {
	d.tenantHeld, d.idKnown = false, [quota.Month + 1]bool{}
	d.preauthHeld = false
}

// rollback gives back everything reserved so far: all-or-nothing
// admission means a refused request consumes nothing.
func (d *decision) rollback() {
	for i := d.nres - 1; i >= 0; i-- {
		d.res[i].Cancel(d.now)
	}
	d.nres = 0
	// The pre-auth bucket is this instance's, given back above; what
	// Redis reported stands (its refund forgets it).
	d.preauthHeld = false
	if !d.inRedis {
		d.forgetLevels()
	}
	if d.quotaHeld {
		d.z.quota.Refund(d.items, d.now)
		d.quotaHeld = false
	}
	d.finish()
}

func toBuckets(b bucketLimit) buckets.Limit { return buckets.Limit{Rate: b.rate, Burst: b.burst} }
