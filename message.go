package mcplimit

import (
	"math"
	"strconv"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// appendMessage appends the refusal's message, written for an agent to
// act on: which limit, its figures, and the wait or the reset.
func (ref *refusal) appendMessage(b []byte) []byte {
	switch {
	case ref.msg != "" || ref.kind == kindText:
		return append(b, ref.msg...)
	case ref.kind == kindRate && ref.n > ref.lim.burst:
		b = append(b, "Rate limited: this request costs "...)
		b = appendCost(b, int64(ref.n))
		b = append(b, ", more than "...)
		b = appendRateOwner(b, ref.layer)
		b = append(b, ref.lim.unitWord()...)
		b = append(b, " limit"...)
		switch ref.layer {
		case layerPreauth:
			b = append(b, " for requests without an accepted credential"...)
		case layerAnonymous:
			b = append(b, " for requests without credentials"...)
		}
		b = append(b, " ("...)
		b = append(b, ref.lim.text...)
		b = append(b, ", burst "...)
		b = strconv.AppendInt(b, int64(ref.lim.burst), 10)
		b = append(b, ") admits at once; it will never be admitted as sent. Send fewer or cheaper calls per request, costing at most "...)
		b = strconv.AppendInt(b, ref.maxPerRequest(), 10)
		if ref.maxPerRequest() < int64(ref.lim.burst) {
			return append(b, " together (the most the other limits on this request admit)."...)
		}
		return append(b, " together."...)
	case ref.kind == kindCapacity:
		b = append(b, "Rate limited: this server already tracks as many "...)
		if ref.layer == layerPreauth {
			b = append(b, "network addresses"...)
		} else {
			b = append(b, "callers"...)
		}
		b = append(b, " as it may, and none of them can make room for this one yet. Retry in "...)
		b = strconv.AppendInt(b, ceilSeconds(ref.wait), 10)
		return append(b, "s or later."...)
	case ref.kind == kindRate:
		b = append(b, "Rate limited: "...)
		switch ref.layer {
		case layerPreauth:
			b = append(b, "requests from this network address without an accepted credential exceeded their "...)
		case layerGroup:
			b = append(b, "this caller's organization exceeded its shared "...)
		case layerGlobal:
			b = append(b, "this server is at its total "...)
		case layerAnonymous:
			b = append(b, "requests without credentials exceeded their shared "...)
		default:
			b = append(b, "this API key exceeded its "...)
		}
		b = append(b, ref.lim.unitWord()...)
		if ref.layer == layerGlobal {
			b = append(b, " capacity ("...)
		} else {
			b = append(b, " limit ("...)
		}
		b = append(b, ref.lim.text...)
		b = append(b, ", burst "...)
		b = strconv.AppendInt(b, int64(ref.lim.burst), 10)
		b = append(b, "). Retry in "...)
		b = strconv.AppendInt(b, ceilSeconds(ref.wait), 10)
		if c := ref.busy; c.max > 0 {
			// Too many calls are in flight as well: when one ends is
			// anyone's guess.
			b = append(b, "s or later, once one of the calls in flight"...)
			b = append(b, inFlightScope(c.perID)...)
			b = append(b, " has finished too (limit "...)
			b = strconv.AppendInt(b, int64(c.max), 10)
			return append(b, ")."...)
		}
		if ref.unread {
			return append(b, "s; a single call will work then (this request's body was not read, so a batch or a costlier tool call may need longer)."...)
		}
		return append(b, "s; the same call will work then."...)
	case ref.kind == kindQuota:
		return ref.appendQuotaMessage(b)
	case ref.kind == kindConcurrency && ref.n > ref.max: // a batch over the cap
		b = append(b, "Too many calls in flight: this request runs "...)
		b = strconv.AppendInt(b, int64(ref.n), 10)
		b = append(b, " calls at once, more than the limit of "...)
		b = strconv.AppendInt(b, int64(ref.max), 10)
		b = append(b, ref.concurrencyScope()...)
		b = append(b, "; it will never be admitted as sent. Send at most "...)
		b = appendCalls(b, ref.maxPerRequest())
		if ref.maxPerRequest() < int64(ref.max) {
			return append(b, " per request (the most the other limits on this request admit)."...)
		}
		return append(b, " per request."...)
	default: // kindConcurrency
		b = append(b, "Too many calls in flight"...)
		b = append(b, ref.concurrencyScope()...)
		b = append(b, " (limit "...)
		b = strconv.AppendInt(b, int64(ref.max), 10)
		return append(b, "). Retry once one of them has finished, in 1s or later."...)
	}
}

// appendQuotaMessage words a quota refusal: an exhausted quota, one with
// less left than the request costs, or one smaller than the request.
func (ref *refusal) appendQuotaMessage(b []byte) []byte {
	left, tool := ref.quotaLeft(), ref.layer == layerToolQuota
	switch {
	case ref.never():
		b = append(b, "Quota too small for this request: it "...)
		b = ref.appendQuotaCost(b)
		b = append(b, ", more than "...)
		b = ref.appendQuotaName(b, "whole ")
		b = append(b, "; it will never be admitted as sent. Send requests "...)
		b = ref.appendQuotaSize(b, ref.maxPerRequest())
		if ref.fits > 0 && ref.fits < ref.most && ref.maxPerRequest() == ref.fits {
			b = append(b, " (what is left now)"...)
		}
		return append(b, '.')
	case left > 0:
		b = append(b, "Quota nearly exhausted: this request "...)
		b = ref.appendQuotaCost(b)
		b = append(b, ", more than the "...)
		b = strconv.AppendInt(b, left, 10)
		b = append(b, " left of "...)
		b = ref.appendQuotaName(b, "")
		b = append(b, ". It will not be admitted as sent before the quota resets at "...)
		b = ref.resetsAt.UTC().AppendFormat(b, time.RFC3339)
		if ref.fits > 0 {
			b = append(b, "; requests "...)
			b = ref.appendQuotaSize(b, ref.fits)
			b = append(b, " fit the quotas now"...)
		}
		return append(b, '.')
	}
	b = append(b, "Quota exhausted: "...)
	if ref.layer == layerGroupQuota {
		b = append(b, "this caller's organization used its "...)
	} else {
		b = append(b, "this API key used its "...)
	}
	b = append(b, ref.periodWord()...)
	b = append(b, " quota"...)
	if tool {
		b = append(b, " for tool "...)
		b = strconv.AppendQuote(b, ref.tool)
	}
	b = ref.appendQuotaLimit(b)
	if tool {
		b = append(b, ". Do not call this tool with this key until the quota resets at "...)
		b = ref.resetsAt.UTC().AppendFormat(b, time.RFC3339)
		if c := ref.costOut; !c.resetsAt.IsZero() {
			b = append(b, "; "...)
			b = appendQuotaName(b, c.layer, c.period, c.limit, "")
			b = append(b, " is used up too, so no other tool works with this key before "...)
			b = c.resetsAt.UTC().AppendFormat(b, time.RFC3339)
			return append(b, "; report the exhausted quotas to the user."...)
		}
		return append(b, " (other tools still work); report the exhausted quota to the user."...)
	}
	if ref.layer == layerGroupQuota {
		b = append(b, ". Do not retry with this key, nor with another key of the organization, until the quota resets at "...)
	} else {
		b = append(b, ". Do not retry with this key until the quota resets at "...)
	}
	b = ref.resetsAt.UTC().AppendFormat(b, time.RFC3339)
	return append(b, "; report the exhausted quota to the user."...)
}

// periodWord is the quota refusal's period as an adjective.
func (ref *refusal) periodWord() string { return periodWord(ref.item.Period) }

// periodWord is a quota's period p as an adjective.
func periodWord(p quota.Period) string {
	if p == quota.Month {
		return "monthly"
	}
	return "daily"
}

// appendQuotaCost appends what the request asks of the refusing quota:
// "costs N", or for a tool's quota (which counts calls) "makes N calls to
// tool T".
func (ref *refusal) appendQuotaCost(b []byte) []byte {
	if ref.layer != layerToolQuota {
		b = append(b, "costs "...)
		return appendCost(b, ref.item.N)
	}
	b = append(b, "makes "...)
	b = appendCalls(b, ref.item.N)
	b = append(b, " to tool "...)
	return strconv.AppendQuote(b, ref.tool)
}

// appendRateOwner appends whose rate limit layer l's is, as a
// possessive before its unit: the API key's, the organization's, this
// network address's, the server's.
func appendRateOwner(b []byte, l layer) []byte {
	switch l {
	case layerPreauth:
		return append(b, "this network address's "...)
	case layerGroup:
		return append(b, "this caller's organization's shared "...)
	case layerGlobal:
		return append(b, "this server's total "...)
	case layerAnonymous:
		return append(b, "the shared "...)
	}
	return append(b, "this API key's "...)
}

// appendCalls appends n calls: "1 call", "2 calls".
func appendCalls(b []byte, n int64) []byte {
	b = strconv.AppendInt(b, n, 10)
	if n == 1 {
		return append(b, " call"...)
	}
	return append(b, " calls"...)
}

// appendCost appends a request's cost n. A batch's cost is a sum that
// saturates at math.MaxInt64 (jsonrpc.Request.Cost), so that figure
// reads "at least" it.
func appendCost(b []byte, n int64) []byte {
	if n == math.MaxInt64 {
		b = append(b, "at least "...)
	}
	return strconv.AppendInt(b, n, 10)
}

// appendQuotaName appends whose quota refused, e.g. "this API key's daily
// quota (5000)", with prefix before the period.
func (ref *refusal) appendQuotaName(b []byte, prefix string) []byte {
	return appendQuotaName(b, ref.layer, ref.item.Period, ref.item.Limit, prefix)
}

// appendQuotaName appends the name of layer l's quota of period p and
// limit, with prefix before the period.
func appendQuotaName(b []byte, l layer, p quota.Period, limit int64, prefix string) []byte {
	b = appendOwner(b, l)
	b = append(b, prefix...)
	b = append(b, periodWord(p)...)
	b = append(b, " quota"...)
	if l == layerToolQuota {
		b = append(b, " for that tool"...)
	}
	return appendQuotaLimit(b, l, limit)
}

// appendOwner appends whose quota of layer l it is, as a possessive:
// the organization's for a group quota, else the API key's.
func appendOwner(b []byte, l layer) []byte {
	if l == layerGroupQuota {
		return append(b, "this caller's organization's "...)
	}
	return append(b, "this API key's "...)
}

// appendQuotaLimit appends the quota's figure: " (5000)", or " (20
// calls)" for a tool's quota.
func (ref *refusal) appendQuotaLimit(b []byte) []byte {
	return appendQuotaLimit(b, ref.layer, ref.item.Limit)
}

// appendQuotaLimit appends the figure of layer l's quota of limit.
func appendQuotaLimit(b []byte, l layer, limit int64) []byte {
	b = append(b, " ("...)
	if l == layerToolQuota {
		b = appendCalls(b, limit)
	} else {
		b = strconv.AppendInt(b, limit, 10)
	}
	return append(b, ')')
}

// appendQuotaSize appends the size of a request that fits: "costing at
// most n", or "with at most n calls to that tool".
func (ref *refusal) appendQuotaSize(b []byte, n int64) []byte {
	if ref.layer == layerToolQuota {
		b = append(b, "with at most "...)
		b = appendCalls(b, n)
		return append(b, " to that tool"...)
	}
	b = append(b, "costing at most "...)
	return strconv.AppendInt(b, n, 10)
}

// quotaLeft is, for a quota refusal of a request that costs more than the
// quota has left (rather than of an exhausted quota), what it has left:
// the most a request may cost to pass it now. It is 0 otherwise.
func (ref *refusal) quotaLeft() int64 {
	if ref.kind != kindQuota || ref.item.Used >= ref.item.Limit {
		return 0
	}
	return ref.item.Limit - max(ref.item.Used, 0)
}

// concurrencyScope says whose in-flight calls a concurrency refusal counts.
func (ref *refusal) concurrencyScope() string { return inFlightScope(ref.perID) }

// inFlightScope says whose in-flight calls a cap counts: the identity's
// (perID) or the zone's.
func inFlightScope(perID bool) string {
	if perID {
		return " for this API key"
	}
	return " on this server"
}

// appendBatchNote appends what the other entries of a batch refused for
// one call's argument are told: which call is at fault (e), and why.
func (ref *refusal) appendBatchNote(b []byte, e *jsonrpc.Entry) []byte {
	if e.Notification() {
		b = append(b, "Not run: the batch was refused whole because its call sent as a notification (without an id) is invalid ("...)
	} else {
		b = append(b, "Not run: the batch was refused whole because its call with id "...)
		b = append(b, idOrNull(e.ID())...)
		b = append(b, " is invalid ("...)
	}
	b = append(b, ref.msg...)
	return append(b, ") Fix that call and send the batch again."...)
}

// appendToolBatchNote appends what the entries of a batch refused by a
// tool's quota, or by the store of a fail_closed tool, that do not call
// that tool are told.
func (ref *refusal) appendToolBatchNote(b []byte) []byte {
	b = append(b, "Not run: the batch was refused whole because its calls of tool "...)
	b = strconv.AppendQuote(b, ref.tool)
	if ref.layer == layerStore {
		b = append(b, " cannot be counted right now ("...)
		b = ref.appendMessage(b)
		return append(b, ") Send this call again without them, or the whole batch after the wait."...)
	}
	b = append(b, " are over that tool's quota ("...)
	b = ref.appendMessage(b)
	return append(b, ") Send this call again without them."...)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
