package mcplimit

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// The IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers, structured-field syntax) for the
// tenant and quota policies of a metered request by a proven identity:
//
//	RateLimit-Policy: "tenant";q=20;w=4, "quota-day";q=5000;w=86400
//	RateLimit: "tenant";r=19;t=1, "quota-day";r=4990;t=3600
//
// and for the pre-auth bucket that charges every request of an unproven
// caller:
//
//	RateLimit-Policy: "preauth";q=5;w=5
//	RateLimit: "preauth";r=4;t=1
//
// followed, for a forgotten identity still charged to them, and in the
// response whose 2xx proves the caller (see describeCharged), by its
// tenant and quota policies.
//
// For the token bucket, q is the burst, w the seconds to refill it from
// empty, r the whole tokens left and t the seconds until it is full again.
// For a quota, q is the limit, w the period, r what is left and t the
// seconds to the reset.
const (
	hdrPolicy    = "Ratelimit-Policy" // canonical form of RateLimit-Policy
	hdrRateLimit = "Ratelimit"        // canonical form of RateLimit
)

// quotaPeriods are the periods a quota may set, in header order.
var quotaPeriods = [...]quota.Period{quota.Day, quota.Month}

func (q quotaLimit) of(p quota.Period) int64 {
	if p == quota.Day {
		return q.day
	}
	return q.month
}

// policyHeader renders the RateLimit-Policy value of l; it depends only
// on the limits, so it is computed once per compiled limits.
func policyHeader(l limits) []string {
	var b []byte
	sep := func() {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
	}
	if !l.tenantOff && l.tenant.rate > 0 {
		b = appendBucketPolicy(b, "tenant", l.tenant)
	}
	for _, p := range quotaPeriods {
		if lim := l.quota.of(p); lim > 0 {
			sep()
			b = appendQuotaPolicy(b, p, lim)
		}
	}
	if len(b) == 0 {
		return nil
	}
	return []string{string(b)}
}

// appendQuotaPolicy appends the RateLimit-Policy item of the quota of
// period p: its limit, and the period's length (a month's longest).
func appendQuotaPolicy(b []byte, p quota.Period, lim int64) []byte {
	b = append(b, `"quota-`...)
	b = append(b, p.String()...)
	b = append(b, `";q=`...)
	b = appendSFInt(b, lim)
	b = append(b, ";w="...)
	w := int64(86400)
	if p == quota.Month {
		ref := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		w = int64(p.Next(ref).Sub(ref).Seconds()) // 31 days, the longest
	}
	return appendSFInt(b, w)
}

// appendQuotaLeft appends the RateLimit item of the quota of period p: what
// is left of lim with used counted, and the seconds to the reset.
func appendQuotaLeft(b []byte, p quota.Period, lim, used int64, now time.Time) []byte {
	b = append(b, `"quota-`...)
	b = append(b, p.String()...)
	b = append(b, `";r=`...)
	b = appendSFInt(b, lim-used)
	b = append(b, ";t="...)
	return appendSFInt(b, secondsTo(p.Next(now), now))
}

// appendSFInt appends n as a structured-field Integer, clamped to
// 0..maxFigure: a window longer than 15 digits of seconds is reported
// as the largest value a parser accepts.
func appendSFInt(b []byte, n int64) []byte {
	return strconv.AppendInt(b, min(max(n, 0), maxFigure), 10)
}

// appendBucketPolicy appends the RateLimit-Policy item of a token bucket:
// its burst, and the seconds to refill it from empty.
func appendBucketPolicy(b []byte, name string, l bucketLimit) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";q=`...)
	b = appendSFInt(b, int64(l.burst))
	b = append(b, ";w="...)
	return appendSFInt(b, int64(math.Ceil(float64(l.burst)/float64(l.rate))))
}

// appendBucketLeft appends the RateLimit item of a token bucket holding
// tokens: the whole tokens left, and the seconds until it is full, or
// until refused, when the bucket refused the request: a response with
// Retry-After names one instant in both (draft-ietf-httpapi-ratelimit-headers).
func appendBucketLeft(b []byte, name string, l bucketLimit, tokens float64, refused time.Duration) []byte {
	tokens = math.Max(0, math.Min(tokens, float64(l.burst)))
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";r=`...)
	b = appendSFInt(b, int64(math.Floor(tokens)))
	b = append(b, ";t="...)
	if refused > 0 {
		return appendSFInt(b, ceilSeconds(refused))
	}
	return appendSFInt(b, int64(math.Ceil((float64(l.burst)-tokens)/float64(l.rate))))
}

// bucketWait is the wait ref names when layer l's bucket refused the
// request as a rate, 0 otherwise (or without a refusal).
func (ref *refusal) bucketWait(l layer) time.Duration {
	if ref == nil || ref.layer != l || ref.kind != kindRate {
		return 0
	}
	return ref.wait
}

// writeRateLimitHeaders sets RateLimit-Policy and RateLimit: for a
// proven identity's metered request, its tenant and quota policies; for
// an unproven caller, the pre-auth bucket that charged it. ref is the
// refusal given, nil for an admitted request.
func (h *Handler) writeRateLimitHeaders(w http.ResponseWriter, d *decision, ref *refusal) {
	if !d.proven {
		h.writePreauthHeaders(w, d, ref)
		return
	}
	if d.cost <= 0 || d.lim.rlPolicy == nil {
		return
	}
	var arr [160]byte
	b := arr[:0]
	// Where Redis holds the levels (it decided, or would have: a body
	// rule refused before it was asked), the local state stands still: a
	// value Redis did not report is left out rather than read from there.
	inRedis := d.inRedis || d.redisHolds()
	if tokens, ok := d.tenantLeft, d.tenantHeld; !d.lim.tenantOff && d.lim.tenant.rate > 0 && (ok || !inRedis) {
		t := d.lim.tenant
		if !ok {
			tokens, ok = d.z.tenants.Tokens(d.fp, d.now)
		}
		b = d.appendKeyLeft(b, "tenant", layerTenant, t, tokens, ok, ref.bucketWait(layerTenant))
	}
	for _, p := range quotaPeriods {
		lim := d.lim.quota.of(p)
		used, ok := d.idUsed[p], d.idKnown[p]
		if lim <= 0 || !ok && inRedis {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		if !ok {
			used = d.z.quota.Used(d.identityQuotaKey(), p, d.now)
		}
		b = appendQuotaLeft(b, p, lim, used, d.now)
	}
	d.setRateLimit(w, d.lim.rlPolicy, b)
}

// writePreauthHeaders describes the pre-auth bucket that charged (or
// refused) an unproven caller's request and, for a forgotten identity
// still charged to its tenant bucket or quotas (see forgottenCharges),
// those after it: what refuses its request is among what it reads.
func (h *Handler) writePreauthHeaders(w http.ResponseWriter, d *decision, ref *refusal) {
	tenant, quotas := d.forgottenCharges()
	if d.preauthPolicy == nil && !tenant && !quotas {
		return
	}
	var arr, parr [160]byte
	b, pb := arr[:0], parr[:0]
	if d.preauthPolicy != nil {
		tokens, ok := d.preauthLeft, d.preauthHeld
		if !ok {
			tokens, ok = d.z.preauth.Tokens(d.addr, d.now)
		}
		b = d.appendKeyLeft(b, "preauth", layerPreauth, d.preauthLim, tokens, ok, ref.bucketWait(layerPreauth))
		if !tenant && !quotas {
			d.setRateLimit(w, d.preauthPolicy, b)
			return
		}
		pb = append(pb, d.preauthPolicy[0]...)
	}
	d.describedOwn = true
	b, pb = d.appendOwnItems(b, pb, ref, tenant, quotas)
	d.setRateLimit(w, []string{string(pb)}, b)
}

// appendOwnItems appends to b and pb, after what they hold, the RateLimit
// and RateLimit-Policy items of the identity's tenant bucket (if tenant)
// and of its quotas (if quotas), as the layers reported them or as the
// local state holds them; with store redis, a quota Redis did not report
// is left out. ref is the request's refusal, if any.
func (d *decision) appendOwnItems(b, pb []byte, ref *refusal, tenant, quotas bool) ([]byte, []byte) {
	sep := func() {
		if len(b) > 0 {
			b, pb = append(b, ", "...), append(pb, ", "...)
		}
	}
	if tenant {
		sep()
		tokens, ok := d.tenantLeft, d.tenantHeld
		if !ok {
			tokens, ok = d.z.tenants.Tokens(d.fp, d.now)
		}
		b = d.appendKeyLeft(b, "tenant", layerTenant, d.lim.tenant, tokens, ok, ref.bucketWait(layerTenant))
		pb = appendBucketPolicy(pb, "tenant", d.lim.tenant)
	}
	for _, p := range quotaPeriods {
		lim := d.lim.quota.of(p)
		used, ok := d.idUsed[p], d.idKnown[p]
		if quotas && lim > 0 && (ok || !d.inRedis && !d.redisHolds()) {
			sep()
			if !ok {
				used = d.z.quota.Used(d.identityQuotaKey(), p, d.now)
			}
			b = appendQuotaLeft(b, p, lim, used, d.now)
			pb = appendQuotaPolicy(pb, p, lim)
		}
	}
	return b, pb
}

// describeCharged extends the pre-auth RateLimit fields of the response
// whose 2xx has just proven the caller's identity (or charged it as a
// forgotten one, see learn) to what its next calls spend: after the
// pre-auth bucket that charged this request come the identity's tenant
// bucket and its quotas, which count this call (see countProvingCall):
// a metered call, or an initialize, which pre-auth charges too.
// Fields that described them already (a forgotten identity's), that the
// next handler changed, or with store redis, whose counts this instance
// does not hold, are left as they are.
func (d *decision) describeCharged(hdr http.Header) {
	if d.describedOwn || d.cost <= 0 && d.policySet == nil || d.inRedis || d.redisHolds() {
		return // an unmetered request with no fields (preauth off) gets none
	}
	var arr, parr [160]byte
	b, pb := d.appendOwnItems(arr[:0], parr[:0], nil, !d.lim.tenantOff && d.lim.tenant.rate > 0, true)
	if len(pb) == 0 {
		return
	}
	if d.policySet == nil { // preauth off: no fields yet
		if len(hdr[hdrPolicy]) > 0 || len(hdr[hdrRateLimit]) > 0 {
			return
		}
		hdr[hdrPolicy], hdr[hdrRateLimit] = []string{string(pb)}, []string{string(b)}
		return
	}
	c := d.carried
	if c == nil || !leading(hdr[hdrPolicy], d.policySet) || !leading(hdr[hdrRateLimit], c.rateLimit[:]) {
		return
	}
	hdr[hdrPolicy] = append([]string{strings.Join(d.policySet, ", ") + ", " + string(pb)}, hdr[hdrPolicy][len(d.policySet):]...)
	hdr[hdrRateLimit] = append([]string{c.rateLimit[0] + ", " + string(b)}, hdr[hdrRateLimit][1:]...)
}

// leading reports whether vals are the leading values of have.
func leading(have, vals []string) bool {
	return slices.Equal(have[:min(len(vals), len(have))], vals)
}

// forgottenCharges reports whether an unproven identity's metered request
// is charged to the identity's tenant bucket and to its quotas, as a
// forgotten identity's is (see forgottenWithBucket and quotaItems): one
// that was proven, or still holds a bucket or a count. Where Redis holds
// the levels, it is what Redis reported charging: a forgotten identity's
// tenant bucket, and the quotas it counts (see redisItems).
func (d *decision) forgottenCharges() (tenant, quotas bool) {
	if d.proven || !d.hasID || d.cost <= 0 {
		return false, false
	}
	if d.inRedis || d.redisHolds() {
		tenant = d.tenantHeld && !d.lim.tenantOff && d.lim.tenant.rate > 0
		for _, p := range quotaPeriods {
			quotas = quotas || d.idKnown[p] && d.lim.quota.of(p) > 0
		}
		return tenant, quotas
	}
	tenant = !d.lim.tenantOff && d.lim.tenant.rate > 0 && d.forgottenWithBucket()
	for _, p := range quotaPeriods {
		if d.lim.quota.of(p) > 0 && (d.forgotten || d.z.quota.Used(d.identityQuotaKey(), p, d.now) > 0) {
			quotas = true
		}
	}
	return tenant, quotas
}

// secondsTo is ceilSeconds(next.Sub(now)) for a next later than now that
// falls on a whole second, as a period's reset does: now's fraction of a
// second is then what the ceiling adds back.
func secondsTo(next, now time.Time) int64 {
	return max(next.Unix()-now.Unix(), 1)
}

// appendKeyLeft appends the RateLimit item of layer l's bucket for the
// request's key, which holds tokens if held; refused is the wait of the
// bucket's refusal, if it refused. A key with no bucket has a full one,
// unless the layer refused the key for want of room: then it has nothing
// to spend until the refusal's wait, when room may appear.
func (d *decision) appendKeyLeft(b []byte, name string, l layer, lim bucketLimit, tokens float64, held bool, refused time.Duration) []byte {
	if held {
		return appendBucketLeft(b, name, lim, tokens, refused)
	}
	if d.untracked&(1<<l) == 0 {
		return appendBucketLeft(b, name, lim, float64(lim.burst), refused)
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";r=0;t=`...)
	return appendSFInt(b, ceilSeconds(capacityRefusal(l, d.roomWait).wait))
}

// setRateLimit sets RateLimit-Policy to policy and RateLimit to value, if
// any.
func (d *decision) setRateLimit(w http.ResponseWriter, policy []string, value []byte) {
	hdr := w.Header()
	hdr[hdrPolicy] = policy
	d.policySet = policy
	if len(value) == 0 {
		return
	}
	c := d.carry()
	c.rateLimit[0] = string(value)
	hdr[hdrRateLimit] = c.rateLimit[:]
}

// withdrawRateLimit removes the RateLimit-Policy and RateLimit values
// setRateLimit set for d from hdr, leaving any the backend added: an
// upstream 429 carries the backend's own. Ours were set before the
// backend answered, and reverse_proxy adds its values after them, so ours
// are the leading ones: a backend value that reads the same as ours (a
// second Caddy with the same policy) stays, and so does every backend
// value when d set none (an unmetered call).
func (d *decision) withdrawRateLimit(hdr http.Header) {
	dropLeading(hdr, hdrPolicy, d.policySet)
	if d.carried != nil && d.carried.rateLimit[0] != "" {
		dropLeading(hdr, hdrRateLimit, d.carried.rateLimit[:])
	}
}

// dropLeading removes vals from the values of key in hdr if they are its
// leading ones, and the key when nothing is left.
func dropLeading(hdr http.Header, key string, vals []string) {
	have := hdr[key]
	if len(vals) == 0 || !leading(have, vals) {
		return
	}
	if len(have) == len(vals) {
		delete(hdr, key)
	} else {
		hdr[key] = have[len(vals):]
	}
}

// knowUsed records n as the count of quota item q (as the deciding layer
// reported it), and, when q is one of the identity's own quotas, for the
// RateLimit header.
func (d *decision) knowUsed(q int, n int64) {
	d.items[q].Used = n
	if d.itemLayers[q] == layerQuota {
		p := d.items[q].Period
		d.idUsed[p], d.idKnown[p] = n, true
	}
}
