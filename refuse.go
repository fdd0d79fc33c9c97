package mcplimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// JSON-RPC codes of the body rules; refusals by a layer use error_code.
const (
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
)

// refusal describes why a request is not admitted.
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
}

func rateRefusal(l layer, lim bucketLimit, wait time.Duration) refusal {
	secs := ceilSeconds(wait)
	var who string
	switch l {
	case layerPreauth:
		who = "too many requests from this network address without an accepted credential exceeded its " + lim.unitWord() + " limit"
	case layerGroup:
		who = "this API key's organization exceeded its shared " + lim.unitWord() + " limit"
	case layerGlobal:
		who = "this server is at its total " + lim.unitWord() + " capacity"
	case layerAnonymous:
		who = "requests without credentials exceeded their shared " + lim.unitWord() + " limit"
	default:
		who = "this API key exceeded its " + lim.unitWord() + " limit"
	}
	return refusal{
		layer: l, status: http.StatusTooManyRequests, wait: wait,
		msg: fmt.Sprintf("Rate limited: %s (%s, burst %d). Retry in %ds; the same call will work then.", who, lim.text, lim.burst, secs),
	}
}

func quotaRefusal(l layer, it quota.Item, tool string, now time.Time) refusal {
	reset := it.Period.Next(now)
	period := "daily"
	if it.Period == quota.Month {
		period = "monthly"
	}
	var what string
	switch l {
	case layerGroupQuota:
		what = fmt.Sprintf("this API key's organization used its %s quota (%d)", period, it.Limit)
	case layerToolQuota:
		what = fmt.Sprintf("this API key used its %s quota for tool %q (%d calls)", period, tool, it.Limit)
	default:
		what = fmt.Sprintf("this API key used its %s quota (%d)", period, it.Limit)
	}
	return refusal{
		layer: l, status: http.StatusTooManyRequests, wait: reset.Sub(now), resetsAt: reset, tool: tool,
		msg: fmt.Sprintf("Quota exhausted: %s. Do not retry with this key until the quota resets at %s; report the exhausted quota to the user.",
			what, reset.UTC().Format(time.RFC3339)),
	}
}

func storeRefusal(tool string, wait time.Duration) refusal {
	return refusal{
		layer: layerStore, status: http.StatusServiceUnavailable, wait: wait, tool: tool,
		msg: fmt.Sprintf("Temporarily unavailable: the rate limiter cannot count calls to tool %q right now (its quota store is unreachable), and this tool is never left uncounted. This is not an exhausted quota. Retry in %ds.", tool, ceilSeconds(wait)),
	}
}

func concurrencyRefusal(max int, perIdentity bool) refusal {
	who := "on this server"
	if perIdentity {
		who = "for this API key"
	}
	return refusal{
		layer: layerConcurrency, status: http.StatusTooManyRequests, wait: time.Second,
		msg: fmt.Sprintf("Too many calls in flight %s (limit %d). Retry in 1s, once a running call has finished; the same call will work then.", who, max),
	}
}

func argRefusal(tool string, a argBound) refusal {
	return refusal{
		status: http.StatusBadRequest, code: codeInvalidParams, body: true, tool: tool, arg: &a,
		msg: fmt.Sprintf("Invalid params: argument %q of tool %q must be a number no greater than %s.", a.name, tool, formatFloat(a.max)),
	}
}

func bodyRefusal(status int, msg string) refusal {
	return refusal{status: status, code: codeInvalidRequest, body: true, msg: msg}
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

// drainSampler logs the refusals that sampling left unrepresented.
func (z *zone) drainSampler() {
	for k, n := range z.sampler.drain(time.Now()) {
		msg := "refused"
		fields := []zap.Field{zap.String("zone", z.name), zap.String("layer", k.layer.String()), zap.Uint64("represents_count", n)}
		if k.dry {
			msg = "would refuse (dry run)"
			fields = append(fields, zap.Bool("dry_run", true))
		}
		z.logger.Load().Info(msg, fields...)
	}
}

var refusalBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeRefusal answers a refused request: status, Retry-After,
// Cache-Control: no-store and a JSON-RPC answer per request entry.
func (h *Handler) writeRefusal(w http.ResponseWriter, d *decision, ref refusal) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	status := ref.status
	mode := d.pol.refuseWith
	if !ref.body {
		hdr.Set("Retry-After", strconv.FormatInt(ceilSeconds(ref.wait), 10))
		h.writeRateLimitHeaders(w, d)
		if mode != refuseStatus && !d.legacy {
			status = http.StatusOK
		}
	} else {
		mode = refuseStatus
	}
	buf := refusalBufs.Get().(*bytes.Buffer)
	buf.Reset()
	h.refusalBody(buf, d, ref, mode)
	if buf.Len() == 0 {
		// Notifications get no JSON-RPC answer; the status still refuses.
		status = ref.status
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	refusalBufs.Put(buf)
}

// refusalBody writes one answer per request entry that has an id: an
// object for a single message, an array for a batch, nothing when every
// entry is a notification.
func (h *Handler) refusalBody(buf *bytes.Buffer, d *decision, ref refusal, mode refuseMode) {
	req := d.req
	if req == nil || !req.Valid() || req.Len() == 0 {
		h.answer(buf, d, ref, []byte("null"), false, mode)
		return
	}
	if !req.Batch() {
		e := req.Entry(0)
		if !e.Notification() {
			h.answer(buf, d, ref, idOrNull(e.ID()), e.HasMethod("tools/call"), mode)
		}
		return
	}
	n := 0
	for i := 0; i < req.Len(); i++ {
		e := req.Entry(i)
		if e.Notification() {
			continue
		}
		if n == 0 {
			buf.WriteByte('[')
		} else {
			buf.WriteByte(',')
		}
		n++
		h.answer(buf, d, ref, idOrNull(e.ID()), e.HasMethod("tools/call"), mode)
	}
	if n > 0 {
		buf.WriteByte(']')
	}
}

func idOrNull(id []byte) []byte {
	if len(id) == 0 {
		return []byte("null")
	}
	return id
}

// answer writes one JSON-RPC response: an error, or for a refused
// tools/call under `refuse_with tool_result` an isError tool result.
func (h *Handler) answer(buf *bytes.Buffer, d *decision, ref refusal, id []byte, toolCall bool, mode refuseMode) {
	msg, _ := json.Marshal(ref.msg)
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
	buf.WriteString(`,"error":{"code":`)
	buf.WriteString(strconv.Itoa(code))
	buf.WriteString(`,"message":`)
	buf.Write(msg)
	switch {
	case ref.arg != nil:
		argName, _ := json.Marshal(ref.arg.name)
		tool, _ := json.Marshal(ref.tool)
		buf.WriteString(`,"data":{"argument":`)
		buf.Write(argName)
		buf.WriteString(`,"max":`)
		buf.WriteString(formatFloat(ref.arg.max))
		buf.WriteString(`,"tool":`)
		buf.Write(tool)
		buf.WriteByte('}')
	case !ref.body:
		buf.WriteString(`,"data":{"limit":"`)
		buf.WriteString(ref.layer.String())
		buf.WriteString(`","code":"`)
		buf.WriteString(layerCodes[ref.layer])
		buf.WriteString(`","retryAfterSeconds":`)
		buf.WriteString(strconv.FormatInt(ceilSeconds(ref.wait), 10))
		if !ref.resetsAt.IsZero() {
			buf.WriteString(`,"resetsAt":"`)
			buf.WriteString(ref.resetsAt.UTC().Format(time.RFC3339))
			buf.WriteByte('"')
		}
		if ref.tool != "" {
			tool, _ := json.Marshal(ref.tool)
			buf.WriteString(`,"tool":`)
			buf.Write(tool)
		}
		buf.WriteByte('}')
	}
	buf.WriteString(`}}`)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
