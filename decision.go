package mcplimit

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/clientip"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// decision carries one request through admission and, once admitted,
// through the backend's answer. Decisions are pooled.
type decision struct {
	h   *Handler
	z   *zone
	pol *policy
	now time.Time

	ip     netip.Addr   // the client address of an unproven caller
	addr   netip.Prefix // its key: the network of ip
	fp     [16]byte
	cached *fpEntry // fp's entry in the fingerprint cache, if it was there
	hasID  bool
	proven bool
	// forgotten says the unproven identity was proven before (forgotten,
	// expired or evicted) or had a call answered by a 2xx that proves
	// nothing (see learn), and is still remembered so (zone.forgotten),
	// or, with store redis, holds a count here (countedHere). Its calls
	// are charged as a proven identity's, to its tenant bucket and quotas.
	forgotten bool
	groupFP   [16]byte
	hasGroup  bool
	lim       limits

	body    *jsonrpc.Buffer
	bodyOwn bool
	req     *jsonrpc.Request // the body as parsed (into parsed), once it is read
	parsed  *jsonrpc.Request // kept across uses, as items and keys are
	cost    int64
	header  http.Header // the request's header, for the Accept values a refusal answers by
	post    bool        // the request is a POST, which may carry JSON-RPC messages
	// cutID is the id a body inspect read only in part (too large, too
	// slow) began with, for its refusal to echo (see jsonrpc.LeadingID).
	cutID []byte
	// unread says peekIDs left a body it found unread (too large, too
	// slow): what the request costs is not known.
	unread bool
	// linger says the rest of a refused body is to be read and dropped
	// once the refusal is sent (startLinger).
	linger bool
	// probing makes the layers after a refusal decide without taking
	// anything, to find the refusal that holds the request back longest.
	probing bool
	// dryRefused says a layer would have refused the request in dry run:
	// it is forwarded, but what the layers took is given back (see admit);
	// dryRefs are the refusals a dry run recorded (see wouldGive), and
	// dryRef the one of them enforcement would have given (dryRefusal).
	dryRefused bool
	dryRefs    []refusal // kept across uses
	dryRef     refusal
	carried    *carried // what outlives the decision; see carry
	// unreadable says why the request cannot be limited as sent: its
	// identity headers do not name one credential as backends read it, or
	// it asks for a tunnel. Such a request is refused before anything else.
	unreadable string
	// answeredBlind marks a method whose 2xx does not prove the identity.
	answeredBlind bool
	// called says the body of an unproven identity's request is a
	// well-formed JSON-RPC 2.0 request or notification, or a batch
	// holding one (jsonrpc.WellFormedCall): on a JSON-RPC route, only a
	// 2xx answering one in a POST proves the identity.
	called bool

	rec        statusRecorder
	watch      callWatch              // the answers an SSE stream still owes; see callWatch
	undetach   func()                 // ends what detach set up, if it did
	letGo      func()                 // tells detach the slots are freed, if it holds for them
	heard      func()                 // tells detach the backend's verdict came, if it awaits it (see hear)
	awaiting   context.Context        // the detached request's context, while detach awaits a verdict
	client     context.Context        // the client's own context, once detached
	res        [8]buckets.Reservation // at most 7: preauth ×2, tenant, group, kept-for-Redis, global, anonymous
	nres       int
	items      []quota.Item
	itemLayers []layer
	quotaHeld  bool // the local quota counted the items (Refund on rollback)
	// uncounted says the identity's quotas were left out of the items: an
	// unproven identity with no count yet. A 2xx that proves it counts
	// the call then (countProvingCall), in uncountedItems.
	uncounted      bool
	uncountedItems []quota.Item
	// ifCounted is how many of the last items are uncountedItems in a
	// decision in Redis, charged there only where it holds a count of
	// them (see redisItems).
	ifCounted int
	// idUsed is the identity's quota count per period as the deciding
	// layer (local or Redis) reported it, where idKnown says so.
	idUsed  [quota.Month + 1]int64
	idKnown [quota.Month + 1]bool
	keys    []byte    // the quota keys of items, back to back; kept across uses
	refs    []refusal // the refusals probe weighs; kept across uses
	idKey   []byte    // the identity's quota key, in keys once computed
	// The pre-auth bucket that charged an unproven caller, for RateLimit.
	preauthLim    bucketLimit
	preauthPolicy []string // nil until the pre-auth layer ran
	preauthLeft   float64
	preauthHeld   bool
	policySet     []string // the RateLimit-Policy values setRateLimit set on the response
	// describedOwn says the pre-auth RateLimit fields went on to the
	// identity's tenant bucket and quotas (see writePreauthHeaders), and
	// chargedNext that the backend's 2xx has just made its next calls
	// spend them (see learn and describeCharged).
	describedOwn bool
	chargedNext  bool
	tenantLeft   float64 // tokens the tenant's bucket holds, as its layer reported
	tenantHeld   bool    // tenantLeft is set and stands
	// untracked has bit 1<<l set when layer l refused a new key because
	// its bucket set was full: that key has no bucket, and none to spend
	// until roomWait has passed, when a bucket may have made room.
	untracked uint32
	roomWait  time.Duration
	inRedis   bool // the Redis store decided tenant, group, quota, global
	concAll   bool // holds concN slots of the zone's cap
	concID    bool // holds concN slots of the identity's cap
	// tookLocal says the anonymous and concurrency layers took before
	// Redis was asked (see admitLayers): their steps then pass.
	tookLocal bool
	// slotsHeld says the request holds its slots through the error
	// routes that run it now (see heldByErrorRoute): the concurrency
	// layer and the in-flight gauge pass it.
	slotsHeld bool
	concN     int
	// listens says the body holds only listen requests, whose answer is a
	// stream held open: its slots go when the answer starts.
	listens  bool
	inflight int64 // calls counted in the in-flight gauge
	// ref is the refusal of the admission step that last returned false;
	// steps leave it alone when they pass, so that admitting copies no
	// refusal.
	ref refusal
}

var decisionPool = sync.Pool{New: func() any { return new(decision) }}

// newDecision resolves who is asking: client address, identity, whether
// it is proven, and the limits in force for it.
func (h *Handler) newDecision(r *http.Request, now time.Time) *decision {
	d := decisionPool.Get().(*decision)
	d.h, d.z, d.pol, d.now = h, h.zone, h.pol, now
	h.warnForwardedFor(r)
	h.warnUnsetPlaceholders(r)
	// Frameworks answer OPTIONS (and often HEAD) themselves, before any
	// authentication runs (Express does for every route): such a 2xx
	// says nothing about the credential.
	d.answeredBlind = r.Method == http.MethodOptions || r.Method == http.MethodHead
	var v string
	if v, d.unreadable = identityValue(r, d.pol); d.unreadable == "" && tunnels(r) {
		d.unreadable = tunnelRefused
	}
	if v != "" {
		f := d.z.fpKey.Load()
		var fp [16]byte
		if d.cached = f.cache.lookup(v); d.cached != nil {
			fp = d.cached.fp
		} else {
			fp = f.sum(v)
		}
		d.fp, d.hasID = fp, true
		// A request that cannot be limited as sent is refused, and pays
		// its pre-auth token first as an unproven one does, even when the
		// value Caddy's placeholder reads is proven: another spelling
		// beside it must not buy free refusals.
		d.proven = d.unreadable == "" && (d.pol.trustIdentity || d.z.known.Proven(fp, now))
		if d.proven && d.cached == nil {
			// Only proven identities are remembered: a flood of fresh
			// credentials leaves the cache to the callers it serves.
			f.cache.remember(v, fp)
		}
	}
	if d.pol.groupKey != "" {
		if g := placeholderValue(r, d.pol.groupKey); g != "" {
			d.groupFP, d.hasGroup = d.z.fpKey.Load().sum(g), true
		}
	}
	if !d.proven {
		// Only unproven callers are keyed by address (pre-auth).
		d.ip, d.addr = clientAddr(r, d.pol)
		d.forgotten = d.hasID && d.z.forgotten.Contains(d.fp, now)
	}
	d.lim = d.pol.limitsFor(r, d)
	d.slotsHeld = d.heldByErrorRoute(r)
	return d
}

// clientAddr returns the client address from Caddy's own resolution (the
// client_ip var, which honours trusted_proxies), never from a header, and
// its key (the address's network under ipv4_prefix / ipv6_prefix).
func clientAddr(r *http.Request, pol *policy) (netip.Addr, netip.Prefix) {
	s, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if s == "" {
		s = r.RemoteAddr
	}
	addr, err := clientip.Parse(s)
	if err != nil {
		addr = netip.IPv4Unspecified()
	}
	return addr.Unmap(), clientip.Key(addr, pol.v4, pol.v6)
}

// limitsFor returns the limits in force for d's identity: an override
// first, then the first matching tier, then the top-level limits.
func (p *policy) limitsFor(r *http.Request, d *decision) limits {
	l := p.base
	if t := p.tierFor(r); t != nil {
		l = t.limits
	}
	if d.hasID && len(p.overrides) > 0 {
		if o := p.overrides[d.fp]; o != nil {
			l = o.apply(l)
		}
	}
	return l
}

// tierFor returns the first tier whose placeholder matches, or nil.
func (p *policy) tierFor(r *http.Request) *tier {
	for i := range p.tiers {
		t := &p.tiers[i]
		if v := placeholderValue(r, t.placeholder); v != "" && slices.Contains(t.values, v) {
			return t
		}
	}
	return nil
}

// identityQuotaKey is the quota key of d's identity, computed once.
func (d *decision) identityQuotaKey() []byte {
	if d.idKey == nil {
		d.idKey = d.quotaKey("i/", nil, d.fp)
	}
	return d.idKey
}

// quotaKey builds the quota key "<kind>[<tool>/]<hex of fp>" in d's key
// buffer, which the next decision reuses: the quota copies a key the first
// time it counts it. The tool name is escaped (appendKeyTool), since a
// stored quota line ends its key at the first space.
func (d *decision) quotaKey(kind string, tool []byte, fp [16]byte) []byte {
	lo := len(d.keys)
	d.keys = append(d.keys, kind...)
	if tool != nil {
		d.keys = append(appendKeyTool(d.keys, tool), '/')
	}
	if e := d.cached; e != nil && e.fp == fp {
		d.keys = append(d.keys, e.hex[:]...) // spelled out when it was cached
	} else {
		d.keys = hex.AppendEncode(d.keys, fp[:])
	}
	return d.keys[lo:len(d.keys):len(d.keys)]
}

// toolCost returns the cost of one call of tool under d's limits.
func (d *decision) toolCost(tool []byte) int64 {
	if c, ok := d.lim.costs[string(tool)]; ok {
		return c
	}
	return 1
}

// release returns pooled resources; it runs after the backend answered.
func (d *decision) release() {
	if d.undetach != nil {
		d.undetach()
	}
	if d.req != nil {
		d.req.Trim()
	}
	if d.body != nil && d.bodyOwn {
		d.body.Release()
	}
	items, layers, keys, parsed, uncounted := d.items[:0], d.itemLayers[:0], d.keys[:0], d.parsed, d.uncountedItems[:0]
	watch, refs, dryRefs := d.watch.reuse(), d.refs[:0], d.dryRefs[:0]
	*d = decision{} // cleared in place: a literal with fields is built apart, then copied
	d.items, d.itemLayers, d.keys, d.parsed, d.watch, d.uncountedItems = items, layers, keys, parsed, watch, uncounted
	d.refs, d.dryRefs = refs, dryRefs
	decisionPool.Put(d)
}

// parse parses body into the decision's Request, and makes it d.req.
func (d *decision) parse(body []byte) {
	if d.parsed == nil {
		d.parsed = new(jsonrpc.Request)
	}
	d.req = d.parsed
	d.req.Parse(body)
}

// finish frees the concurrency slots, and takes the calls out of the
// in-flight gauge, once the response is complete, once an SSE answer
// holds every response, or, for a request other than a POST, once its
// answer starts. It frees them once, and then lets a detached request
// end with its client again.
func (d *decision) finish() {
	d.z.releaseSlots(&d.fp, d.concN, d.concAll, d.concID, d.inflight)
	d.concAll, d.concID, d.inflight = false, false, 0
	if d.letGo != nil {
		d.letGo()
		d.letGo = nil
	}
}

// answered frees the slots of n calls whose answers an SSE stream has
// written while others are still to come, and takes them out of the
// in-flight gauge. One slot stays held for finish: a reading of the body
// may count more calls than answers come (see Request.Calls).
func (d *decision) answered(n int) {
	n = min(n, d.concN-1)
	if n <= 0 {
		return
	}
	d.z.releaseSlots(&d.fp, n, d.concAll, d.concID, int64(n))
	d.concN -= n
	d.inflight -= int64(n)
}

// releaseSlots gives back n slots of the zone's cap (all) and of the
// identity fp's (id), and takes inflight calls out of the in-flight
// gauge.
func (z *zone) releaseSlots(fp *[16]byte, n int, all, id bool, inflight int64) {
	if all {
		z.all.Release(globalKey, n)
	}
	if inflight > 0 {
		z.metrics.inflightAdd(-inflight)
	}
	if id {
		z.perID.Release(*fp, n)
	}
}

// chargeUnproven counts an unproven identity's call that the backend may
// have run without proving the identity, and has the identity charged
// from now on as a forgotten one is, to its tenant bucket and quotas.
func (d *decision) chargeUnproven() {
	d.z.forgotten.Prove(d.fp, time.Now())
	d.countProvingCall()
}

// learn takes the backend's verdict: a 2xx proves the identity (or, to a
// request whose 2xx proves nothing, charges it: see chargeUnproven), a
// reject_status forgets it (5xx, timeouts and transport errors never do),
// and a 429 is upstream throttling, counted apart from our refusals.
func (d *decision) learn(status int) {
	switch {
	case status == http.StatusTooManyRequests:
		d.z.metrics.upstreamThrottled()
	case status >= 200 && status < 300:
		if !d.hasID || d.proven || d.answeredBlind {
			return
		}
		if d.post && d.called || d.pol.meter.All {
			d.z.prove(d.fp, time.Now())
			d.countProvingCall()
			d.chargedNext = true
		} else if d.cost > 0 {
			// No proof (see inspect), but the backend may have run the
			// calls it answered: a valid key whose bodies are never
			// written as the specification writes one (a member twice,
			// which every parser reads) would otherwise stay on its
			// address's pre-auth budget, its tenant bucket and quotas
			// never charged.
			d.chargeUnproven()
			d.chargedNext = true
		}
		return
	}
	if d.hasID {
		for _, s := range d.pol.reject {
			if s == status {
				d.z.forget(d.fp, time.Now())
				return
			}
		}
	}
}
