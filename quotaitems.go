package mcplimit

import (
	"bytes"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

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
		failed, ok := d.z.quota.Fits(d.items, d.now)
		for !ok && d.pol.dryRun && d.leaveOutQuota(failed) {
			failed, ok = d.z.quota.Fits(d.items, d.now)
		}
		if !ok && !d.pol.dryRun {
			d.z.markTotalsDue()
			return d.refused(d.quotasRefusal(failed))
		}
		return true
	}
	failed, ok := d.z.quota.TryAdd(d.items, d.now)
	for !ok && d.pol.dryRun {
		if !d.leaveOutQuota(failed) {
			return true
		}
		failed, ok = d.z.quota.TryAdd(d.items, d.now)
	}
	if ok {
		d.quotaHeld = true
		for q := range d.items {
			d.knowUsed(q, d.items[q].Used)
			if d.items[q].Used >= d.items[q].Limit {
				d.z.markTotalsDue()
			}
		}
		d.keepForRedis()
		return true
	}
	d.z.markTotalsDue()
	return d.refused(d.quotasRefusal(failed))
}

// leaveOutQuota records, in dry run, the refusal of the quota layer
// (identity, group, tool) of item failed, and leaves that layer's items
// out, so that the others decide again (admit gives back what they took);
// each refusing layer is recorded once. It reports whether any are left.
func (d *decision) leaveOutQuota(failed int) bool {
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
	return kept > 0
}

// itemRefusal is the refusal of quota item q of the request.
func (d *decision) itemRefusal(q int) refusal {
	it := d.items[q]
	return quotaRefusal(d.itemLayers[q], it, toolOfKey(it.Key), d.now)
}

// quotasRefusal is the refusal of the request's quotas once they did not
// all fit, each item's Used being the count found; failed is the item the
// store named. A used-up quota is named first, the one that resets last
// (no call of the request passes before then), and of those resetting
// together one counting cost (the identity's, the organization's), which
// lets no metered request pass, ahead of a tool's, which lets no call of
// that tool pass. Otherwise a quota the request exceeds as a whole (it
// never passes as sent, whatever the others' resets), else the one that
// holds it back longest; the refusal then tells what fits now over every
// quota.
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
	}
	if found {
		return d.usedUpRefusal(best)
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

// usedUpRefusal completes best, the refusal of the used-up quota that
// resets last. A quota the request exceeds as sent (with some left, but
// less than it costs) that resets later still is named instead, with what
// fits now: the same request waits for its reset, and Retry-After is
// never earlier than the real wait. A used-up tool quota's refusal names
// the used-up quota counting cost that resets last, if any: the key's
// other tools do not work either before its reset.
func (d *decision) usedUpRefusal(best refusal) refusal {
	for q, it := range d.items {
		if it.Used >= it.Limit || it.Used+it.N <= it.Limit || it.N > it.Limit {
			continue // used up, fitting, or never fitting as sent
		}
		if ref := d.itemRefusal(q); ceilSeconds(ref.wait) > ceilSeconds(best.wait) {
			d.fitNow(q, &ref)
			best = ref
		}
	}
	if !best.usedUp() || best.layer != layerToolQuota {
		return best
	}
	for q, it := range d.items {
		l := d.itemLayers[q]
		if l == layerToolQuota || it.Used < it.Limit {
			continue
		}
		if reset := it.Period.Next(d.now); best.costOut.resetsAt.IsZero() || reset.After(best.costOut.resetsAt) {
			best.costOut = usedUpQuota{layer: l, period: it.Period, limit: it.Limit, resetsAt: reset}
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
		d.identityItems()
		if !d.proven && !d.forgotten && len(d.items) > 0 && !d.z.quota.AnyCounted(d.items, d.now) {
			// Kept for a 2xx that proves the identity (countProvingCall),
			// whose tool names the body, gone by then, no longer holds.
			d.uncountedItems = append(d.uncountedItems[:0], d.items...)
			d.items, d.itemLayers = d.items[:0], d.itemLayers[:0]
			d.uncounted = true
		}
	}
	if d.hasGroup && d.pol.groupQuota.any() {
		d.addItems(layerGroupQuota, d.quotaKey("g/", nil, d.groupFP), d.pol.groupQuota, d.cost)
	}
}

// identityItems adds the identity's own quota items and those of the
// tools it calls.
func (d *decision) identityItems() {
	d.addIdentityItems()
	if d.req != nil && d.pol.toolQuotas {
		d.eachTool(func(name []byte) {
			tp := d.pol.tools[string(name)]
			if tp == nil || !tp.quota.any() {
				return
			}
			key := d.quotaKey("t/", name, d.fp)
			if !d.hasItem(key) { // once per tool: N counts all its calls
				d.addItems(layerToolQuota, key, tp.quota, d.req.ToolCalls(name))
			}
		})
	}
}

// countProvingCall counts a metered call whose 2xx proved its identity, or
// answered it without proving it (see learn), in the identity's quotas,
// which it was not charged to (it had no count yet): the backend ran it.
// Else a credential that gets itself forgotten before each call (any
// rejected request forgets it) would never count. It is counted whatever
// the limits, as work done: the next call pays.
func (d *decision) countProvingCall() {
	if !d.uncounted || d.cost <= 0 || d.dryRefused {
		// A call a layer would refuse in dry run takes nothing (see admit).
		return
	}
	d.uncounted = false
	items := d.uncountedItems
	r := d.z.redis.Load()
	if r != nil && d.z.countInRedis(r, items, d.now) {
		// Redis holds the count: observed here at once too, added to
		// what was observed before (parallel first calls each prove),
		// so that the identity's next unproven call finds them all.
		d.z.quota.ObserveAdded(items, d.now)
		return
	}
	d.z.quota.Add(items, d.now)
	if dt := d.z.detached.Load(); r == nil && dt != nil {
		dt.record(items, d.now, 1) // for the store's return, as keepForRedis
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

// hasItem reports whether the request's quota items hold one of key.
func (d *decision) hasItem(key []byte) bool {
	for q := range d.items {
		if bytes.Equal(d.items[q].Key, key) {
			return true
		}
	}
	return false
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
