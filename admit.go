package mcplimit

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
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
			if !d.pol.dryRun {
				d.peekIDs(w, r)
				return h.refuse(d, w, d.preauthWholeCost(d.ref))
			}
			preauthRefused, dryPreauth = true, d.ref
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
		h.refuse(d, w, dryPreauth)
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
	d.z.metrics.admit()
	if d.cost > 0 {
		d.countInflight()
	}
	return false
}

// countInflight counts the admitted metered request's calls in the
// in-flight gauge, until finish.
func (d *decision) countInflight() {
	n := d.concN
	if n == 0 {
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
// decides. Otherwise the first refusal ends the taking, and the layers
// after it only look (probe), so that the refusal given is the one that
// holds the request back longest.
func (h *Handler) admitLayers(d *decision, w http.ResponseWriter) bool {
	if c := d.lim.concurrency; !d.pol.dryRun && (d.pol.anonymousOn || c.Max > 0 || c.PerIdentity > 0) {
		// Anonymous and concurrency come after the shared layers but
		// look first: a request they refuse must not hold global tokens
		// or Redis counts even for the moment before a rollback, or a
		// flood of such requests would crowd out other tenants.
		d.probing = true
		if !d.admitAnonymous() || !d.admitConcurrency() {
			return d.refused(d.probe(0, d.ref))
		}
		d.probing = false
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

// probe has the layers from admissionSteps[from] on decide without taking
// anything (a refused request must not hold capacity even for a moment)
// and returns the refusal that holds the request back longest: ref or one
// of theirs. The layers before from may have taken for this request, so
// they are not asked again.
func (d *decision) probe(from int, ref refusal) refusal {
	if d.cost <= 0 {
		return ref
	}
	d.probing = true
	for _, step := range admissionSteps[from:] {
		if !step(d) && d.ref.outlasts(&ref) {
			ref = d.ref
		}
	}
	return ref
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
// wait it names must be enough for the same request, and the layers after
// pre-auth look too, for a longer one.
func (d *decision) preauthWholeCost(ref refusal) refusal {
	if d.req == nil {
		return ref
	}
	d.cost = d.requestCost()
	if d.cost > 1 {
		ref = d.wholeCostRefusal(ref)
	}
	return d.probe(0, ref)
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

// requestCost is what the parsed request costs under the handler's meter.
func (d *decision) requestCost() int64 {
	toolCost := d.toolCost
	if len(d.lim.costs) == 0 {
		toolCost = nil // every tool costs 1: no name to look up
	}
	cost := d.req.Cost(d.pol.meter, toolCost)
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

// inspect reads and classifies the body of a request that carries one,
// and reports whether the request may go on; when it may not, its
// refusal is in d.ref. Requests without a body (SSE GET streams, DELETE)
// cost nothing unless the meter is `*`. A POST always sends a message,
// so one without a body is an empty, invalid one: it costs 1.
func (h *Handler) inspect(d *decision, w http.ResponseWriter, r *http.Request) bool {
	pol := d.pol
	hasBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if !hasBody {
		if pol.meter.All || d.post {
			d.cost = 1
		}
		return true
	}
	if ce, encoded := bodyEncoding(r.Header["Content-Encoding"]); encoded {
		return d.refused(bodyRefusal(http.StatusUnsupportedMediaType, "Request bodies with Content-Encoding "+ce+" are not accepted here; send the JSON-RPC body unencoded."))
	}
	if cs, foreign := foreignCharset(r.Header["Content-Type"]); foreign {
		// A backend that decodes by charset (the TypeScript SDK does) would
		// read a different message than the one classified here.
		return d.refused(bodyRefusal(http.StatusUnsupportedMediaType, "Request bodies must be UTF-8 JSON; charset "+cs+" is not accepted here."))
	}
	// The body is held in memory until it is all here, before any layer
	// after pre-auth can refuse: a caller trickling it must not hold that
	// memory for long. The deadline cannot cut the answer: net/http
	// clears it once the body has been read (HTTP/1) or has ended (HTTP/2).
	wait := bodyWait(pol.maxBody)
	setReadDeadline(w, d.now.Add(wait))
	buf, tooLarge, err := jsonrpc.ReadBody(r.Body, pol.maxBody)
	if err != nil || tooLarge {
		if buf != nil {
			buf.Release()
		}
		// The deadline stays on a refused body: the server stops reading.
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return d.refused(bodyRefusal(http.StatusRequestTimeout, "The request body did not arrive in time (bodies may take at most "+itoa(int64(wait/time.Second))+"s here); send it at once."))
		}
		if err != nil {
			return d.refused(bodyRefusal(http.StatusBadRequest, "The request body could not be read."))
		}
		return d.refused(bodyRefusal(http.StatusRequestEntityTooLarge, "Request body too large: the limit is "+itoa(pol.maxBody)+" bytes."))
	}
	if jsonrpc.WideEncoding(buf.Bytes()) {
		// A backend that detects the encoding (Python's json does) would
		// run every message of a body that reads as nothing in UTF-8.
		buf.Release()
		return d.refused(bodyRefusal(http.StatusUnsupportedMediaType, "Request bodies must be UTF-8 JSON; this one is UTF-16 or UTF-32."))
	}
	d.body, d.bodyOwn = buf, true
	d.parse(buf.Bytes())
	tooLong := d.req.Scanned() > pol.maxBatch
	if tooLong && !pol.dryRun {
		return d.refused(batchRefusal(pol.maxBatch))
	}
	d.cost = d.requestCost()
	for i := 0; i < d.req.Scanned() && !d.called; i++ {
		d.called = d.req.Entry(i).Called()
	}
	// max_batch and arg bounds are limits an operator tunes, so a dry run
	// only records them; the rules above keep the request readable.
	if tooLong {
		h.record(d, batchRefusal(pol.maxBatch), true)
	}
	if !d.checkArgs() {
		if !pol.dryRun {
			return false
		}
		h.record(d, d.ref, true)
	}
	_ = r.Body.Close()
	return true
}

// handOn gives an admitted request the body inspect read, byte for byte.
// The bodyReader takes the buffer over and returns it to the pool when
// closed; a refused request's buffer is released with the decision.
func (d *decision) handOn(r *http.Request) {
	if d.body == nil || !d.bodyOwn {
		return
	}
	br := &d.carry().body
	br.buf = d.body
	br.Reset(d.body.Bytes())
	r.Body = br
	d.bodyOwn = false
	r.ContentLength = int64(len(d.body.Bytes()))
	r.TransferEncoding = nil
}

// peekLimit bounds what a pre-auth refusal reads to echo request ids.
const peekLimit = 64 << 10

// peekWait bounds how long a pre-auth refusal waits for the body it reads
// to echo ids, so that a caller sending its body slowly cannot hold the
// handler: it is answered with id null instead.
const peekWait = 500 * time.Millisecond

// peekIDs reads a small body of a request refused before inspection, only
// so the refusal can echo its JSON-RPC ids; a larger body, one that does
// not arrive within peekWait, or one whose wait cannot be bounded is
// answered with id null rather than read.
func (d *decision) peekIDs(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	if r.ContentLength > peekLimit {
		// Not read, and not waited for either: net/http would otherwise
		// drain up to 256 KiB of it before sending the refusal.
		setReadDeadline(w, time.Now())
		return
	}
	if !setReadDeadline(w, time.Now().Add(peekWait)) {
		return
	}
	buf, tooLarge, err := jsonrpc.ReadBody(r.Body, peekLimit)
	if err != nil || tooLarge {
		// The deadline stays, so the server does not wait for the rest
		// of this body either.
		buf.Release()
		return
	}
	setReadDeadline(w, time.Time{})
	d.body, d.bodyOwn = buf, true
	d.parse(buf.Bytes())
}

// checkArgs applies `arg <name> max <n>` bounds to every tools/call entry,
// before any token is spent, and reports whether they hold; when they do
// not, the refusal is in d.ref. One bad call refuses the whole batch.
func (d *decision) checkArgs() bool {
	tools := d.pol.tools
	if len(tools) == 0 {
		return true
	}
	// Scanned, not Len: an invalid body (NaN, a second value after the
	// first) is still run by lenient or streaming parsers.
	for i := 0; i < d.req.Scanned(); i++ {
		e := d.req.Entry(i)
		if !e.HasMethod("tools/call") {
			continue
		}
		var ref refusal
		bad := false
		e.Tools(func(name []byte) {
			tp := tools[string(name)]
			if bad || tp == nil {
				return
			}
			for _, a := range tp.args {
				max, numeric, present := e.Arg(a.name)
				if present && (!numeric || max > a.max) {
					ref, bad = argRefusal(string(name), a), true
					return
				}
			}
		})
		if bad {
			ref.argEntry = i
			return d.refused(ref)
		}
	}
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
	if !d.proven || d.lim.tenantOff {
		return true
	}
	ok := reserveIn(d, d.z.tenants, d.fp, d.lim.tenant, int(d.cost), layerTenant)
	if ok && !d.probing {
		d.tenantLeft, d.tenantHeld = d.res[d.nres-1].Left(), true
	}
	return ok
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
	if d.inRedis || !d.pol.failClosed || d.req == nil || !d.z.storeDegraded() {
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

// admitQuota checks and charges every quota of the request at once: the
// identity's, its group's and each called tool's.
func (d *decision) admitQuota() bool {
	if d.inRedis {
		return true
	}
	d.quotaItems()
	if len(d.items) == 0 {
		return true
	}
	if d.probing {
		if failed, ok := d.z.quota.Fits(d.items, d.now); !ok {
			return d.refused(d.quotasRefusal(failed))
		}
		return true
	}
	failed, ok := d.z.quota.TryAdd(d.items, d.now)
	for !ok && d.pol.dryRun {
		// Dry run: each quota layer (identity, group, tool) decides. A
		// refusing one is recorded once and left out, and the others
		// are charged as they would be.
		l := d.itemLayers[failed]
		d.h.record(d, d.itemRefusal(failed), true)
		kept := 0
		for q := range d.items {
			if d.itemLayers[q] != l {
				d.items[kept], d.itemLayers[kept] = d.items[q], d.itemLayers[q]
				kept++
			}
		}
		d.items, d.itemLayers = d.items[:kept], d.itemLayers[:kept]
		if kept == 0 {
			return true
		}
		failed, ok = d.z.quota.TryAdd(d.items, d.now)
	}
	if ok {
		d.quotaHeld = true
		for q := range d.items {
			d.knowUsed(q, d.items[q].Used)
		}
		d.keepForRedis()
		return true
	}
	return d.refused(d.quotasRefusal(failed))
}

// itemRefusal is the refusal of quota item q of the request.
func (d *decision) itemRefusal(q int) refusal {
	it := d.items[q]
	return quotaRefusal(d.itemLayers[q], it, toolOfKey(it.Key), d.now)
}

// quotasRefusal is the refusal of the request's quotas once they did not
// all fit, each item's Used being the count found; failed is the item the
// store named. A used-up quota is named first, the one that resets last:
// one counting cost (the identity's, the organization's) lets no metered
// request pass, one of a tool no call of it. Otherwise a quota the request
// exceeds as a whole (it never passes as sent, whatever the others'
// resets), else the one that holds it back longest; the refusal then
// tells what fits now over every quota.
func (d *decision) quotasRefusal(failed int) refusal {
	best, found := d.itemRefusal(failed), false
	for _, tools := range []bool{false, true} {
		for q, it := range d.items {
			if it.Used < it.Limit || (d.itemLayers[q] == layerToolQuota) != tools {
				continue
			}
			if ref := d.itemRefusal(q); !found || ref.outlasts(&best) {
				best, found = ref, true
			}
		}
		if found {
			return best
		}
	}
	d.fitNow(failed, &best)
	for q, it := range d.items {
		if q == failed || it.Used+it.N <= it.Limit {
			continue
		}
		ref := d.itemRefusal(q)
		d.fitNow(q, &ref)
		if ref.never() != best.never() && ref.never() || ref.never() == best.never() && ref.outlasts(&best) {
			best = ref
		}
	}
	return best
}

// fitNow sets what fits now on ref, the refusal of quota item q, when no
// quota is used up: the most a request may ask of q's unit and pass every
// quota (ref.fits), and the most it ever may (ref.most). A call of a tool
// costs its cost against the quotas counting cost, so those bound a
// tool's calls too. A request q never fits as sent passes at that size
// now.
func (d *decision) fitNow(q int, ref *refusal) {
	costLeft, costMost := int64(-1), int64(-1)
	for k, it := range d.items {
		if d.itemLayers[k] != layerToolQuota {
			costLeft, costMost = minKnown(costLeft, it.Limit-it.Used), minKnown(costMost, it.Limit)
		}
	}
	ref.fits, ref.most = costLeft, costMost
	if d.itemLayers[q] == layerToolQuota {
		per := d.toolCost([]byte(ref.tool))
		ref.fits, ref.most = -1, -1
		if costLeft >= 0 {
			ref.fits, ref.most = costLeft/per, costMost/per
		}
		for _, it := range d.items {
			if bytes.Equal(it.Key, d.items[q].Key) {
				ref.fits, ref.most = minKnown(ref.fits, it.Limit-it.Used), minKnown(ref.most, it.Limit)
			}
		}
	}
	if ref.never() && ref.fits > 0 {
		ref.wait = time.Second
	}
}

// minKnown is the smaller of a and b, where a < 0 means none yet.
func minKnown(a, b int64) int64 {
	if a < 0 || b < a {
		return b
	}
	return a
}

// quotaItems sets d.items (and d.itemLayers) to every quota of the
// request: the identity's, each called tool's and its group's. An
// unproven identity's quotas count only once they hold a count: an
// identity proven and then forgotten (a reject_status answer, even to a
// free request) stays charged until its quotas reset, or being forgotten
// and proven again would make every other call free; a flood of fresh
// credentials creates no quota entries.
func (d *decision) quotaItems() {
	d.items, d.itemLayers = d.items[:0], d.itemLayers[:0]
	if d.proven || d.hasID {
		d.addIdentityItems()
		if d.req != nil && d.pol.toolQuotas {
			d.eachTool(func(name []byte) {
				if tp := d.pol.tools[string(name)]; tp != nil && tp.quota.any() {
					d.addItems(layerToolQuota, d.quotaKey("t/", name, d.fp), tp.quota, 1)
				}
			})
		}
		if !d.proven && len(d.items) > 0 && !d.z.quota.AnyCounted(d.items, d.now) {
			d.items, d.itemLayers = d.items[:0], d.itemLayers[:0]
		}
	}
	if d.hasGroup && d.pol.groupQuota.any() {
		d.addItems(layerGroupQuota, d.quotaKey("g/", nil, d.groupFP), d.pol.groupQuota, d.cost)
	}
}

// addIdentityItems adds the identity's quota items: one per period its
// limits set, and one without a limit per other period the zone's limits
// count (policy.counted), so that a move to a tier or an override that
// limits it finds what the identity already used there.
func (d *decision) addIdentityItems() {
	key := d.identityQuotaKey()
	for _, p := range quotaPeriods {
		lim := d.lim.quota.of(p)
		if lim <= 0 {
			if !d.pol.counted[p] {
				continue
			}
			lim = math.MaxInt64
		}
		d.addItem(layerQuota, quota.Item{Key: key, Period: p, Limit: lim, N: d.cost})
	}
}

func (d *decision) addItems(l layer, key []byte, q quotaLimit, n int64) {
	if q.day > 0 {
		d.addItem(l, quota.Item{Key: key, Period: quota.Day, Limit: q.day, N: n})
	}
	if q.month > 0 {
		d.addItem(l, quota.Item{Key: key, Period: quota.Month, Limit: q.month, N: n})
	}
}

// addItem adds it to the request's quota items, or its N to the item of
// the same key and period (a batch calling one tool twice): a refusal
// then tells what the whole request asks of that quota.
func (d *decision) addItem(l layer, it quota.Item) {
	for q := range d.items {
		if d.items[q].Period == it.Period && bytes.Equal(d.items[q].Key, it.Key) {
			d.items[q].N += it.N
			return
		}
	}
	d.items = append(d.items, it)
	d.itemLayers = append(d.itemLayers, l)
}

func (d *decision) admitGlobal() bool {
	if d.inRedis {
		return true
	}
	if d.pol.globalOff {
		return true
	}
	return reserveIn(d, d.z.shared, globalKey, d.pol.global, int(d.cost), layerGlobal)
}

// admitAnonymous charges a request without identity to the anonymous
// bucket: 1, or its metered cost if larger, as pre-auth charges an
// unproven one. Unmetered requests (initialize, tools/list, SSE streams)
// pass the other layers untouched, but not this one: it bounds what
// keyless callers from every address send together.
func (d *decision) admitAnonymous() bool {
	if d.hasID || !d.pol.anonymousOn {
		return true
	}
	return reserveIn(d, d.z.shared, anonymousKey, d.pol.anonymous, int(max(d.cost, 1)), layerAnonymous)
}

// admitConcurrency takes the in-flight slots last, so no other layer can
// refuse while a slot is held.
func (d *decision) admitConcurrency() bool {
	c := d.lim.concurrency
	perID := c.PerIdentity > 0 && d.hasID
	if c.Max <= 0 && !perID {
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
	if !d.inRedis { // what Redis reported stands; its refund forgets it
		d.forgetLevels()
	}
	if d.quotaHeld {
		d.z.quota.Refund(d.items, d.now)
		d.quotaHeld = false
	}
	d.finish()
}

// eachTool calls fn for every tool name any reading of any tools/call
// entry names.
func (d *decision) eachTool(fn func([]byte)) {
	for i := 0; i < d.req.Scanned(); i++ {
		e := d.req.Entry(i)
		if e.HasMethod("tools/call") {
			e.Tools(fn)
		}
	}
}

func toBuckets(b bucketLimit) buckets.Limit { return buckets.Limit{Rate: b.rate, Burst: b.burst} }

// appendKeyTool appends a tool name to a quota key, with '%', space and
// newline percent-encoded: other names, all that MCP clients send, stay
// as they are.
func appendKeyTool(key, tool []byte) []byte {
	const hexDigits = "0123456789ABCDEF"
	for _, c := range tool {
		if c == '%' || c == ' ' || c == '\n' {
			key = append(key, '%', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		key = append(key, c)
	}
	return key
}

// toolOfKey extracts the tool name of a tool-quota key.
func toolOfKey(key []byte) string {
	rest, ok := strings.CutPrefix(string(key), "t/")
	if !ok {
		return ""
	}
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	if name, err := url.PathUnescape(rest); err == nil {
		return name
	}
	return rest
}

// bodyEncoding returns a content coding other than identity among the
// Content-Encoding values, each a comma-separated list: a backend may read
// any field line, or all of them.
func bodyEncoding(values []string) (string, bool) {
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return c, true
			}
		}
	}
	return "", false
}

// foreignCharset returns a charset other than UTF-8 that the Content-Type
// values name anywhere: in any parameter, quoted or not, first or last,
// plain or extended (charset*=). Parsers disagree on quoted strings and
// duplicate parameters (the TypeScript SDK's read the last charset, or
// the one after a quoted ";charset=utf-8"), so any foreign one counts.
func foreignCharset(cts []string) (string, bool) {
	for _, ct := range cts {
		lower := strings.ToLower(ct)
		for rest := lower; ; {
			i := strings.Index(rest, "charset")
			if i < 0 {
				break
			}
			rest = rest[i+len("charset"):]
			v, ok := strings.CutPrefix(strings.TrimLeft(rest, " \t*"), "=")
			if !ok {
				continue
			}
			v = strings.TrimLeft(v, " \t\"'")
			if end := strings.IndexAny(v, "\"'; \t,"); end >= 0 {
				v = v[:end]
			}
			if v != "utf-8" && v != "utf8" {
				return v, true
			}
		}
	}
	return "", false
}

// acceptsEventStream tells a Streamable HTTP POST (whose Accept lists
// text/event-stream) from a legacy HTTP+SSE one (whose 2xx body is never
// read) by the request's Accept values. A range with q=0 is one the
// client refuses, so it is not listed.
func acceptsEventStream(accept []string) bool {
	for _, v := range accept {
		for r := range strings.SplitSeq(v, ",") {
			mt, params, _ := strings.Cut(r, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") && !refusedRange(params) {
				return true
			}
		}
	}
	return false
}

// refusedRange reports whether the parameters of a media range give it
// q=0.
func refusedRange(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// carried holds, in one allocation, what a request takes past the return of
// ServeHTTP and so cannot live in the pooled decision: the reader that hands
// its body on (the transport may read and close it later), and the backing
// array of its RateLimit header value (access logs read headers after the
// handler chain returned).
type carried struct {
	body      bodyReader
	rateLimit [1]string
}

// carry returns d's carried values, allocating them on first use.
func (d *decision) carry() *carried {
	if d.carried == nil {
		d.carried = new(carried)
	}
	return d.carried
}

// bodyReader hands the inspected body on; closing it returns the buffer to
// the pool once the next handler is done with it.
type bodyReader struct {
	bytes.Reader
	buf *jsonrpc.Buffer
}

// Close implements io.Closer.
func (b *bodyReader) Close() error {
	if b.buf != nil {
		b.Reset(nil)
		b.buf.Release()
		b.buf = nil
	}
	return nil
}

var _ io.ReadCloser = (*bodyReader)(nil)
