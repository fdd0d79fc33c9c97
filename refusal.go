package mcplimit

import (
	"fmt"
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// codeInvalidParams is the JSON-RPC code of an argument over its bound;
// every other refusal, the body rules' included, uses error_code.
const codeInvalidParams = -32602

// refusal describes why a request is not admitted. Messages of the
// refusals a flood produces (rate, quota, concurrency) are written
// straight into the answer by appendMessage; msg holds any other text.
type refusal struct {
	layer    layer
	status   int
	code     int // JSON-RPC code; 0 means the zone's error_code
	body     bool
	wait     time.Duration
	resetsAt time.Time
	msg      string
	tool     string
	arg      *argBound
	argEntry int // with arg: the index of the batch entry at fault

	kind  refusalKind
	lim   bucketLimit // kindRate
	n     int         // kindRate: the request's cost
	item  quota.Item  // kindQuota
	fits  int64       // kindQuota: the least its unit's quotas have left, -1 unknown
	most  int64       // kindQuota: the least its unit's quotas allow, -1 unknown
	max   int         // kindConcurrency
	perID bool        // kindConcurrency
	cap   int64       // never passing: less than its own bound fits the request's other limits; 0 none
	// busy is a concurrency cap also full for the request when another
	// layer's refusal is given (its cap and perID): the wait named is
	// then no promise, as no one knows when a call in flight ends.
	busy busyCap
	// unread says the request's body was not read (see decision.unread):
	// the wait is for one call, and only such a call is promised it.
	unread bool
	// costOut, on a used-up tool quota's refusal, is a quota counting
	// cost (the identity's or the organization's) used up as well, which
	// refuses the key's other tools too (see decision.usedUpRefusal).
	costOut usedUpQuota
}

// usedUpQuota names a used-up quota counting cost for refusal.costOut:
// its layer (layerQuota or layerGroupQuota), period, limit and reset; the
// zero value (no reset) names none.
type usedUpQuota struct {
	layer    layer
	period   quota.Period
	limit    int64
	resetsAt time.Time
}

// busyCap is a concurrency cap that refused too, for refusal.busy.
type busyCap struct {
	max   int // 0: none
	perID bool
}

// refusalKind selects how appendMessage words a refusal.
type refusalKind uint8

const (
	kindText refusalKind = iota
	kindRate
	kindQuota
	kindConcurrency
	kindCapacity
)

// rateRefusal is the refusal of layer l's bucket for a request of cost n
// that must wait wait.
func rateRefusal(l layer, lim bucketLimit, wait time.Duration, n int) refusal {
	return refusal{layer: l, status: http.StatusTooManyRequests, wait: wait, kind: kindRate, lim: lim, n: n}
}

// capacityRefusal refuses a new key of layer l's buckets, whose set holds
// as many as it may and none can make room before wait.
func capacityRefusal(l layer, wait time.Duration) refusal {
	if wait >= rate.InfDuration/2 {
		// No bucket examined tells when room appears (their shards were
		// empty, after max_known was lowered): the sweep, every second,
		// may make some.
		wait = time.Second
	}
	return refusal{layer: l, status: http.StatusTooManyRequests, wait: max(wait, time.Second), kind: kindCapacity}
}

// quotaRefusal is the refusal of quota item it, whose Used is the count
// it found; decision.fitNow adds what fits now.
func quotaRefusal(l layer, it quota.Item, tool string, now time.Time) refusal {
	reset := it.Period.Next(now)
	return refusal{
		layer: l, status: http.StatusTooManyRequests, wait: reset.Sub(now), resetsAt: reset, tool: tool,
		kind: kindQuota, item: it, fits: -1, most: -1,
	}
}

func concurrencyRefusal(max int, perIdentity bool, calls int) refusal {
	return refusal{
		layer: layerConcurrency, status: http.StatusTooManyRequests, wait: time.Second,
		kind: kindConcurrency, max: max, perID: perIdentity, n: calls,
	}
}

// never reports that the refused request can never pass as sent. A
// used-up quota is not said to be too small, whatever the request's size:
// no request passes it before the reset.
func (ref *refusal) never() bool {
	switch ref.kind {
	case kindRate:
		return ref.n > ref.lim.burst
	case kindConcurrency:
		return ref.n > ref.max
	case kindQuota:
		return ref.item.N > ref.item.Limit && ref.item.Used < ref.item.Limit
	}
	return false
}

// maxPerRequest is the most a request may cost (in tokens, in calls for
// concurrency and a tool's quota) to pass the layer that refused it as
// never admissible; for a quota, what fits now over every quota, or when
// that is not known or nothing does, the most that ever may.
func (ref *refusal) maxPerRequest() int64 {
	var n int64
	switch ref.kind {
	case kindConcurrency:
		n = int64(ref.max)
	case kindQuota:
		switch {
		case ref.fits > 0:
			n = ref.fits
		case ref.most > 0:
			n = ref.most
		default:
			n = ref.item.Limit
		}
	default:
		n = int64(ref.lim.burst)
	}
	if ref.cap > 0 && ref.cap < n {
		return ref.cap
	}
	return n
}

// countsCalls reports a refusal whose figures count calls, not cost: a
// concurrency cap's, a tool quota's.
func (ref *refusal) countsCalls() bool {
	return ref.kind == kindConcurrency || ref.kind == kindQuota && ref.layer == layerToolQuota
}

// bound lowers what ref, a refusal saying the request never passes as
// sent, names as the most a request may hold to a smaller bound o holds.
// As every call costs at least 1, a bound on cost bounds calls too, but
// one on calls (a concurrency cap, a tool quota) bounds no cost.
func (ref *refusal) bound(o *refusal) {
	if !ref.never() || o.usedUp() || o.countsCalls() && !ref.countsCalls() {
		return
	}
	var bound int64
	switch {
	case o.never():
		bound = o.maxPerRequest()
	case o.kind == kindQuota:
		bound = o.fits
	}
	if bound > 0 && bound < ref.maxPerRequest() {
		ref.cap = bound
	}
}

// shortenToCap makes the wait of ref, a bucket's refusal saying the
// request never passes as sent, the wait for the size another layer's
// bound lowered it to: the bucket holds that many tokens sooner than its
// whole burst, which its wait was for. Like every bucket's refusal, it
// keeps a wait of at least 1ns, which its RateLimit t reads as the
// Retry-After (1s), not as the bucket's time to full.
func (ref *refusal) shortenToCap() {
	if ref.kind != kindRate || !ref.never() || ref.cap <= 0 || ref.cap >= int64(ref.lim.burst) || ref.lim.rate <= 0 {
		return
	}
	short := time.Duration(float64(int64(ref.lim.burst)-ref.cap) / float64(ref.lim.rate) * float64(time.Second))
	ref.wait = max(ref.wait-short, time.Nanosecond)
}

// lengthen makes the wait of ref, a refusal saying the request never
// passes as sent, at least what o needs for a request of the size ref
// names: a wait is taken at its length for the whole request, which a
// smaller one needs no longer than, unless every call of the request
// costs 1.
func (ref *refusal) lengthen(o *refusal) {
	if !ref.never() || o.usedUp() {
		return
	}
	wait := o.wait
	switch {
	case o.never(): // its wait is for a request of its bound, no smaller than ref's
	case o.kind == kindQuota:
		return // not used up: it passes what fits it now
	case o.kind == kindRate && (ref.kind != kindConcurrency || o.n == ref.n) && o.lim.rate > 0:
		// A request of maxPerRequest lacks fewer tokens than this one.
		wait -= time.Duration(float64(int64(o.n)-ref.maxPerRequest()) / float64(o.lim.rate) * float64(time.Second))
	}
	ref.wait = max(ref.wait, wait)
}

// usedUp reports a quota refusal that no request of its unit passes
// before the reset, whatever its size.
func (ref *refusal) usedUp() bool {
	return ref.kind == kindQuota && ref.item.Used >= ref.item.Limit
}

// outlasts reports whether ref is the refusal to give rather than o. When
// several layers refuse, the one that holds the request back longest (in
// the whole seconds of Retry-After) is given: the same call must work
// after the wait a refusal names. So a refusal saying the request never
// passes as sent is given ahead of any that only asks it to wait (after
// that wait, the same call would still be refused), except a used-up
// quota: no request passes it before the reset, a smaller one included,
// so it must not be told to retry in 1s. On equal waits, the refusal that
// says the request never passes as sent is given: it says what to change.
func (ref *refusal) outlasts(o *refusal) bool {
	mine, theirs := ceilSeconds(ref.wait), ceilSeconds(o.wait)
	switch {
	case ref.never() != o.never() && !ref.usedUp() && !o.usedUp():
		return ref.never()
	case mine != theirs:
		return mine > theirs
	case ref.never() != o.never():
		return ref.never()
	}
	// A month's quota resets with the day's on its last day: it is the one
	// to report.
	return ref.kind == kindQuota && o.kind == kindQuota && ref.item.Period > o.item.Period
}

// longestOf returns the refusal to give of refs, several layers' refusals
// of one request: the first that no later one outlasts, with what every
// other says folded in when it says the request never passes as sent:
// the request of the size it names must pass the other layers too, and
// after its Retry-After. So their bounds come first (bound), then its own
// wait for that size (shortenToCap) and theirs (lengthen). A bucket's
// refusal given over a full concurrency cap's notes the cap (busy): its
// wait is then no promise. Folding them two by two would lose one that a
// refusal given up later had not taken in: a tenant bucket's wait behind
// a quota refusal that a concurrency cap then outlasts.
func longestOf(refs []refusal) refusal {
	best := 0
	for i := 1; i < len(refs); i++ {
		if refs[i].outlasts(&refs[best]) {
			best = i
		}
	}
	r := refs[best]
	for i := range refs {
		if i != best {
			r.bound(&refs[i])
		}
	}
	r.shortenToCap()
	for i := range refs {
		if i != best {
			r.lengthen(&refs[i])
			if refs[i].kind == kindConcurrency && !refs[i].never() && r.kind == kindRate {
				r.busy = busyCap{max: refs[i].max, perID: refs[i].perID}
			}
		}
	}
	return r
}

func storeRefusal(tool string, wait time.Duration) refusal {
	return refusal{
		layer: layerStore, status: http.StatusServiceUnavailable, wait: wait, tool: tool,
		msg: fmt.Sprintf("Temporarily unavailable: the rate limiter cannot count calls to tool %q right now (its quota store is unreachable), and this tool is never left uncounted. This is not an exhausted quota. Retry in %ds.", tool, ceilSeconds(wait)),
	}
}

func argRefusal(tool string, a argBound) refusal {
	return refusal{
		layer: layerRequest, status: http.StatusBadRequest, code: codeInvalidParams, body: true, tool: tool, arg: &a,
		msg: fmt.Sprintf("Invalid params: argument %q of tool %q must be a number no greater than %s.", a.name, tool, formatFloat(a.max)),
	}
}

func bodyRefusal(status int, msg string) refusal {
	return refusal{layer: layerRequest, status: status, body: true, msg: msg}
}

// batchRefusal refuses a batch of more than max entries.
func batchRefusal(max int) refusal {
	return bodyRefusal(http.StatusBadRequest, "Batch too large: at most "+itoa(int64(max))+" entries per request.")
}
