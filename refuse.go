package mcplimit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// JSON-RPC codes of the body rules; refusals by a layer use error_code.
const (
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
)

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

// never reports that the refused request can never pass as sent.
func (ref *refusal) never() bool {
	switch ref.kind {
	case kindRate:
		return ref.n > ref.lim.burst
	case kindConcurrency:
		return ref.n > ref.max
	case kindQuota:
		return ref.item.N > ref.item.Limit
	}
	return false
}

// maxPerRequest is the most a request may cost (in tokens, in calls for
// concurrency and a tool's quota) to pass the layer that refused it as
// never admissible; for a quota, what fits now over every quota, or when
// that is not known or nothing does, the most that ever may.
func (ref *refusal) maxPerRequest() int64 {
	switch ref.kind {
	case kindConcurrency:
		return int64(ref.max)
	case kindQuota:
		switch {
		case ref.fits > 0:
			return ref.fits
		case ref.most > 0:
			return ref.most
		}
		return ref.item.Limit
	}
	return int64(ref.lim.burst)
}

// outlasts reports whether ref holds a request back longer than o, in the
// whole seconds of Retry-After. When several layers refuse, the one that
// outlasts the others is given: the same call must work after the wait a
// refusal names, and a request that can never pass as sent must not be
// told to retry in 1s while a quota is exhausted. On equal waits, a
// refusal that says the request never passes as sent is the one given:
// it says what to change.
func (ref *refusal) outlasts(o *refusal) bool {
	mine, theirs := ceilSeconds(ref.wait), ceilSeconds(o.wait)
	switch {
	case mine != theirs:
		return mine > theirs
	case ref.never() != o.never():
		return ref.never()
	}
	// A month's quota resets with the day's on its last day: it is the one
	// to report.
	return ref.kind == kindQuota && o.kind == kindQuota && ref.item.Period > o.item.Period
}

// appendMessage appends the refusal's message, written for an agent to
// act on: which limit, its figures, and the wait or the reset.
func (ref *refusal) appendMessage(b []byte) []byte {
	switch {
	case ref.msg != "" || ref.kind == kindText:
		return append(b, ref.msg...)
	case ref.kind == kindRate && ref.n > ref.lim.burst:
		b = append(b, "Rate limited: this request costs "...)
		b = strconv.AppendInt(b, int64(ref.n), 10)
		b = append(b, ", more than the "...)
		b = append(b, ref.lim.unitWord()...)
		b = append(b, " limit ("...)
		b = append(b, ref.lim.text...)
		b = append(b, ", burst "...)
		b = strconv.AppendInt(b, int64(ref.lim.burst), 10)
		b = append(b, ") admits at once; it will never be admitted as sent. Send fewer or cheaper calls per request, costing at most "...)
		b = strconv.AppendInt(b, int64(ref.lim.burst), 10)
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
			b = append(b, "this API key's organization exceeded its shared "...)
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
		b = strconv.AppendInt(b, int64(ref.max), 10)
		return append(b, " calls per request."...)
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
		if ref.fits > 0 && ref.fits < ref.most {
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
		b = append(b, "this API key's organization used its "...)
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
		return append(b, " (other tools still work); report the exhausted quota to the user."...)
	}
	b = append(b, ". Do not retry with this key until the quota resets at "...)
	b = ref.resetsAt.UTC().AppendFormat(b, time.RFC3339)
	return append(b, "; report the exhausted quota to the user."...)
}

// periodWord is the quota refusal's period as an adjective.
func (ref *refusal) periodWord() string {
	if ref.item.Period == quota.Month {
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
		return strconv.AppendInt(b, ref.item.N, 10)
	}
	b = append(b, "makes "...)
	b = strconv.AppendInt(b, ref.item.N, 10)
	b = append(b, " calls to tool "...)
	return strconv.AppendQuote(b, ref.tool)
}

// appendQuotaName appends whose quota refused, e.g. "this API key's daily
// quota (5000)", with prefix before the period.
func (ref *refusal) appendQuotaName(b []byte, prefix string) []byte {
	if ref.layer == layerGroupQuota {
		b = append(b, "this API key's organization's "...)
	} else {
		b = append(b, "this API key's "...)
	}
	b = append(b, prefix...)
	b = append(b, ref.periodWord()...)
	b = append(b, " quota"...)
	if ref.layer == layerToolQuota {
		b = append(b, " for that tool"...)
	}
	return ref.appendQuotaLimit(b)
}

// appendQuotaLimit appends the quota's figure: " (5000)", or " (20
// calls)" for a tool's quota.
func (ref *refusal) appendQuotaLimit(b []byte) []byte {
	b = append(b, " ("...)
	b = strconv.AppendInt(b, ref.item.Limit, 10)
	switch {
	case ref.layer != layerToolQuota:
	case ref.item.Limit == 1:
		b = append(b, " call"...)
	default:
		b = append(b, " calls"...)
	}
	return append(b, ')')
}

// appendQuotaSize appends the size of a request that fits: "costing at
// most n", or "with at most n calls to that tool".
func (ref *refusal) appendQuotaSize(b []byte, n int64) []byte {
	if ref.layer == layerToolQuota {
		b = append(b, "with at most "...)
		b = strconv.AppendInt(b, n, 10)
		if n == 1 {
			return append(b, " call to that tool"...)
		}
		return append(b, " calls to that tool"...)
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
func (ref *refusal) concurrencyScope() string {
	if ref.perID {
		return " for this API key"
	}
	return " on this server"
}

func storeRefusal(tool string, wait time.Duration) refusal {
	return refusal{
		layer: layerStore, status: http.StatusServiceUnavailable, wait: wait, tool: tool,
		msg: fmt.Sprintf("Temporarily unavailable: the rate limiter cannot count calls to tool %q right now (its quota store is unreachable), and this tool is never left uncounted. This is not an exhausted quota. Retry in %ds.", tool, ceilSeconds(wait)),
	}
}

// appendBatchNote appends what the other entries of a batch refused for
// one call's argument are told: which call is at fault, and why.
func (ref *refusal) appendBatchNote(b, id []byte) []byte {
	b = append(b, "Not run: the batch was refused whole because its call with id "...)
	b = append(b, id...)
	b = append(b, " is invalid ("...)
	b = append(b, ref.msg...)
	return append(b, ") Fix that call and send the batch again."...)
}

// appendToolBatchNote appends what the entries of a batch refused by a
// tool's quota that do not call that tool are told.
func (ref *refusal) appendToolBatchNote(b []byte) []byte {
	b = append(b, "Not run: the batch was refused whole because its calls of tool "...)
	b = strconv.AppendQuote(b, ref.tool)
	b = append(b, " are over that tool's quota ("...)
	b = ref.appendMessage(b)
	return append(b, ") Send this call again without them."...)
}

// callsTool reports whether entry e calls tool under some reading of it.
func callsTool(e *jsonrpc.Entry, tool string) bool {
	found := false
	if e.HasMethod("tools/call") {
		e.Tools(func(name []byte) { found = found || string(name) == tool })
	}
	return found
}

func argRefusal(tool string, a argBound) refusal {
	return refusal{
		layer: layerRequest, status: http.StatusBadRequest, code: codeInvalidParams, body: true, tool: tool, arg: &a,
		msg: fmt.Sprintf("Invalid params: argument %q of tool %q must be a number no greater than %s.", a.name, tool, formatFloat(a.max)),
	}
}

func bodyRefusal(status int, msg string) refusal {
	return refusal{layer: layerRequest, status: status, code: codeInvalidRequest, body: true, msg: msg}
}

// batchRefusal refuses a batch of more than max entries.
func batchRefusal(max int) refusal {
	return bodyRefusal(http.StatusBadRequest, "Batch too large: at most "+itoa(int64(max))+" entries per request.")
}

// record counts a refusal and logs it, sampled once a flood passes the
// threshold.
func (h *Handler) record(d *decision, ref refusal, dry bool) {
	d.z.metrics.refused(ref.layer, dry)
	n := d.z.sampler.record(sampleKey{layer: ref.layer, dry: dry}, d.now)
	if n == 0 {
		return
	}
	fields := []zap.Field{
		zap.String("zone", d.z.name),
		zap.String("layer", ref.layer.String()),
		zap.Int64("retry_after", ceilSeconds(ref.wait)),
		zap.Int64("cost", d.cost),
		zap.Uint64("represents_count", n),
	}
	if d.hasID {
		fields = append(fields, zap.String("fingerprint", fingerprintHex(d.fp)))
	}
	if d.lim.tier != "" {
		fields = append(fields, zap.String("tier", d.lim.tier))
	}
	if dry {
		fields = append(fields, zap.Bool("dry_run", true))
		h.logger.Info("would refuse (dry run)", fields...)
		return
	}
	h.logger.Info("refused", fields...)
}

// drainSampler logs the refusals that sampling left unrepresented in
// windows that have ended, or in all of them when the zone stops.
func (z *zone) drainSampler(stopping bool) {
	for k, n := range z.sampler.drain(time.Now(), stopping) {
		msg := "refused"
		fields := []zap.Field{zap.String("zone", z.name), zap.String("layer", k.layer.String()), zap.Uint64("represents_count", n)}
		if k.dry {
			msg = "would refuse (dry run)"
			fields = append(fields, zap.Bool("dry_run", true))
		}
		z.logger.Load().Info(msg, fields...)
	}
}

// refusalScratch is a pooled answer buffer plus room for the message and
// its JSON encoding.
type refusalScratch struct {
	out bytes.Buffer
	msg []byte
	js  []byte
}

var refusalBufs = sync.Pool{New: func() any { return new(refusalScratch) }}

// Header values shared by every refusal; net/http never modifies them.
var (
	hdrJSON    = []string{"application/json"}
	hdrNoStore = []string{"no-store"}
)

// retryAfterText holds the Retry-After values of the first hour, so the
// common refusal formats nothing.
var retryAfterText = func() (t [3601][]string) {
	for i := range t {
		t[i] = []string{strconv.Itoa(i)}
	}
	return t
}()

func retryAfterValue(secs int64) []string {
	if secs < int64(len(retryAfterText)) {
		return retryAfterText[secs]
	}
	return []string{strconv.FormatInt(secs, 10)}
}

// writeRefusal answers a refused request: status, Retry-After,
// Cache-Control: no-store and a JSON-RPC answer per request entry.
func (h *Handler) writeRefusal(w http.ResponseWriter, d *decision, ref refusal) {
	markRefusal(w)
	hdr := w.Header()
	hdr["Content-Type"] = hdrJSON
	hdr["Cache-Control"] = hdrNoStore
	status := ref.status
	mode := d.pol.refuseWith
	// Every refusal carries Retry-After (SPEC): a body rule's is 1, the
	// least, since only a changed request passes, as its message says.
	hdr["Retry-After"] = retryAfterValue(ceilSeconds(ref.wait))
	if !ref.body {
		h.writeRateLimitHeaders(w, d)
		// A legacy HTTP+SSE POST's 2xx body is never read, and a GET
		// (an SSE stream) reads no JSON: both are refused by status, with
		// the JSON-RPC error, whatever refuse_with says. So is a body
		// that was not read (too large or too slow for a pre-auth
		// refusal): its answer's id is null, which an SDK cannot match to
		// its request and, in a 200, takes as a broken session.
		if mode != refuseStatus && d.post && acceptsEventStream(d.header["Accept"]) && d.req != nil && d.req.Valid() && d.req.Len() > 0 {
			status = http.StatusOK
		} else {
			mode = refuseStatus
		}
	} else {
		mode = refuseStatus
	}
	oneForAll := d.tooManyToEcho()
	if oneForAll {
		status, mode = ref.status, refuseStatus // its answer's id is null, as above
	}
	sc := refusalBufs.Get().(*refusalScratch)
	sc.out.Reset()
	sc.msg = ref.appendMessage(sc.msg[:0])
	sc.js = appendJSONString(sc.js[:0], sc.msg)
	h.refusalBody(&sc.out, d, &ref, sc.js, mode, oneForAll)
	if sc.out.Len() == 0 {
		// Notifications get no JSON-RPC answer; the status still refuses.
		status = ref.status
	}
	w.WriteHeader(status)
	_, _ = w.Write(sc.out.Bytes())
	refusalBufs.Put(sc)
}

// refusalBody writes one answer per request entry that has an id: an
// object for a single message, an array for a batch, nothing when every
// entry is a notification or a response (a client's answer to a server
// request, which JSON-RPC never answers). oneForAll (tooManyToEcho)
// answers a batch with one error whose id is null instead.
func (h *Handler) refusalBody(buf *bytes.Buffer, d *decision, ref *refusal, msg []byte, mode refuseMode, oneForAll bool) {
	req := d.req
	if req == nil || !req.Valid() || req.Len() == 0 {
		h.answer(buf, d, ref, msg, nullID, false, mode)
		return
	}
	if !req.Batch() {
		e := req.Entry(0)
		if !e.Notification() && !e.Response() {
			h.answer(buf, d, ref, msg, idOrNull(e.ID()), e.HasMethod("tools/call"), mode)
		}
		return
	}
	if oneForAll {
		h.answer(buf, d, ref, msg, nullID, false, mode)
		return
	}
	others := msg // what the entries not at fault are told
	toolQuota := ref.layer == layerToolQuota && ref.tool != ""
	switch {
	case ref.arg != nil:
		others = appendJSONString(nil, ref.appendBatchNote(nil, idOrNull(req.Entry(ref.argEntry).ID())))
	case toolQuota:
		others = appendJSONString(nil, ref.appendToolBatchNote(nil))
	}
	n := 0
	for i := 0; i < req.Len(); i++ {
		e := req.Entry(i)
		if e.Notification() || e.Response() {
			continue
		}
		if n == 0 {
			buf.WriteByte('[')
		} else {
			buf.WriteByte(',')
		}
		n++
		m := msg
		if ref.arg != nil && i != ref.argEntry || toolQuota && !callsTool(e, ref.tool) {
			m = others
		}
		h.answer(buf, d, ref, m, idOrNull(e.ID()), e.HasMethod("tools/call"), mode)
	}
	if n > 0 {
		buf.WriteByte(']')
	}
}

// tooManyToEcho reports whether d's request is a batch with more entries
// to answer (those with an id) than a refusal answers one by one: more
// than max_batch and more than minEchoedEntries. One answer per entry of
// a batch far larger than any the handler runs would let a 64 KiB body of
// `[1,1,…]` draw 10 MB of errors, so such a batch gets one error.
func (d *decision) tooManyToEcho() bool {
	req := d.req
	if req == nil || !req.Valid() || !req.Batch() {
		return false
	}
	limit, n := max(d.pol.maxBatch, minEchoedEntries), 0
	for i := 0; i < req.Len(); i++ {
		if e := req.Entry(i); !e.Notification() && !e.Response() {
			if n++; n > limit {
				return true
			}
		}
	}
	return false
}

// minEchoedEntries is how many entries of a batch a refusal answers one
// by one at least, whatever max_batch: an answer stays an array of one
// error per entry for any batch a client plausibly sends, and is bounded
// (~40 KB) for one built to draw a huge answer.
const minEchoedEntries = 128

var nullID = []byte("null")

// idOrNull is the id to echo: the request's, or null when it has none or
// one JSON-RPC does not allow (an object, an array, a boolean), which
// makes the entry an invalid request.
func idOrNull(id []byte) []byte {
	if len(id) == 0 {
		return nullID
	}
	switch c := id[0]; {
	case c == '"', c == '-', '0' <= c && c <= '9', c == 'n':
		return id
	}
	return nullID
}

// answer writes one JSON-RPC response carrying msg (already JSON): an
// error, or for a refused tools/call under `refuse_with tool_result` an
// isError tool result.
func (h *Handler) answer(buf *bytes.Buffer, d *decision, ref *refusal, msg, id []byte, toolCall bool, mode refuseMode) {
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	if mode == refuseToolResult && toolCall {
		buf.WriteString(`,"result":{"isError":true,"content":[{"type":"text","text":`)
		buf.Write(msg)
		buf.WriteString(`}]}}`)
		return
	}
	code := ref.code
	if code == 0 {
		code = d.pol.errorCode
	}
	var num [24]byte
	buf.WriteString(`,"error":{"code":`)
	buf.Write(strconv.AppendInt(num[:0], int64(code), 10))
	buf.WriteString(`,"message":`)
	buf.Write(msg)
	switch {
	case ref.arg != nil:
		buf.WriteString(`,"data":{"argument":`)
		buf.Write(appendJSONString(nil, []byte(ref.arg.name)))
		buf.WriteString(`,"max":`)
		buf.WriteString(formatFloat(ref.arg.max))
		buf.WriteString(`,"tool":`)
		buf.Write(appendJSONString(nil, []byte(ref.tool)))
		buf.WriteByte('}')
	case !ref.body:
		buf.WriteString(`,"data":{"limit":"`)
		buf.WriteString(ref.layer.String())
		buf.WriteString(`","code":"`)
		buf.WriteString(layerCodes[ref.layer])
		buf.WriteString(`","retryAfterSeconds":`)
		buf.Write(strconv.AppendInt(num[:0], ceilSeconds(ref.wait), 10))
		if !ref.resetsAt.IsZero() {
			buf.WriteString(`,"resetsAt":"`)
			buf.Write(ref.resetsAt.UTC().AppendFormat(num[:0], time.RFC3339))
			buf.WriteByte('"')
		}
		if ref.tool != "" {
			buf.WriteString(`,"tool":`)
			buf.Write(appendJSONString(num[:0], []byte(ref.tool)))
		}
		if ref.never() || ref.kind == kindQuota && ref.fits > 0 {
			// Retrying the same request is pointless (until a reset):
			// say what passes.
			buf.WriteString(`,"maxPerRequest":`)
			buf.Write(strconv.AppendInt(num[:0], ref.maxPerRequest(), 10))
		}
		buf.WriteByte('}')
	}
	buf.WriteString(`}}`)
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does. Runs of bytes that need no escaping are
// appended whole.
func appendJSONString(b, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && jsonWordSafe(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if c == '"' || c == '\\' {
				b = append(b, '\\', c)
			} else {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		invalid := r == utf8.RuneError && size == 1
		if !invalid && r != '\u2028' && r != '\u2029' {
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		if invalid {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonWordSafe reports whether all eight bytes of x are jsonSafe, so that
// appendJSONString skips them at once. A byte's high bit is set in m when
// the byte equals one of the escaped characters (its XOR with it is zero,
// and subtracting one borrows) or is below 0x20; a borrow reaching higher
// bytes only ever follows such a byte. Bytes of 0x80 and up are not safe
// here: the rune path decides them.
func jsonWordSafe(x uint64) bool {
	m := ((x ^ (ones * '"')) - ones) | ((x ^ (ones * '\\')) - ones) | ((x ^ (ones * '<')) - ones) |
		((x ^ (ones * '>')) - ones) | ((x ^ (ones * '&')) - ones) | (x - ones*0x20)
	return (m|x)&highs == 0
}

// jsonSafe marks the ASCII bytes appendJSONString copies as they are:
// everything but control bytes, '"', '\\' and the HTML-sensitive '<', '>'
// and '&'.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
