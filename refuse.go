package mcplimit

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

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
	hdrClose   = []string{"close"}
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
	// The policies that charged the request say where they stand, a body
	// rule's refusal included once the cost is known (an arg bound,
	// max_batch): nothing was taken from them but pre-auth's token.
	h.writeRateLimitHeaders(w, d, &ref)
	if !ref.body {
		// A legacy HTTP+SSE POST's 2xx body is never read, and a GET
		// (an SSE stream) reads no JSON: both are refused by status, with
		// the JSON-RPC error, whatever refuse_with says. So is a body
		// that was not read (too large or too slow for a pre-auth
		// refusal), is not valid JSON-RPC (Len is 0), or whose every
		// answer has an id JSON-RPC does not allow: its answers' ids are
		// null, which an SDK cannot match to its request and, in a 200,
		// takes as a broken session.
		if mode != refuseStatus && d.post && acceptsEventStream(d.header["Accept"]) && d.req != nil && matchable(d.req) {
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
	if d.linger {
		// Sent before the handler ends (lingerOn): with its length, the
		// client reads the answer whole while its body is still read,
		// and the connection ends with it (startLinger).
		hdr["Content-Length"] = []string{strconv.Itoa(sc.out.Len())}
		hdr["Connection"] = hdrClose
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
	if req == nil || req.Len() == 0 { // invalid, empty, or read in part
		h.answer(buf, d, ref, msg, idOrNull(d.cutID), false, mode)
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
	// A tool's quota, or a fail_closed tool's store, refuses the batch
	// for its calls of that tool only, unless a quota counting cost is
	// used up too, which refuses every call.
	toolQuota := (ref.layer == layerToolQuota || ref.layer == layerStore) && ref.tool != "" && ref.costOut.resetsAt.IsZero()
	switch {
	case ref.arg != nil:
		others = appendJSONString(nil, ref.appendBatchNote(nil, req.Entry(ref.argEntry)))
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
		m, r := msg, ref
		switch {
		case ref.arg != nil && i != ref.argEntry:
			// Another call at fault is told its own fault, not that
			// it was not run: sent again as told, it would be refused.
			if own, bad := d.argFault(e); bad {
				r, m = &own, appendJSONString(nil, own.appendMessage(nil))
			} else {
				m = others
			}
		case toolQuota && !e.CallsTool([]byte(ref.tool)):
			m = others
		}
		h.answer(buf, d, r, m, idOrNull(e.ID()), e.HasMethod("tools/call"), mode)
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
	if req == nil || !req.Batch() {
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

// matchable reports whether some entry of req gets an answer whose id a
// client can match to its request: one that is not null.
func matchable(req *jsonrpc.Request) bool {
	for i := 0; i < req.Len(); i++ {
		if e := req.Entry(i); !e.Notification() && !e.Response() && idOrNull(e.ID())[0] != 'n' {
			return true
		}
	}
	return false
}

// idOrNull is the id to echo: the request's, or null when it has none or
// one JSON-RPC does not allow (an object, an array, a boolean), which
// makes the entry an invalid request. A string id holding invalid UTF-8
// is echoed with each such byte as U+FFFD, as encoding/json reads it (and
// a backend answering in JSON writes it back): an answer is UTF-8.
func idOrNull(id []byte) []byte {
	if len(id) == 0 {
		return nullID
	}
	switch c := id[0]; {
	case c == '"':
		if !utf8.Valid(id) {
			return validUTF8(id)
		}
		return id
	case c == '-', '0' <= c && c <= '9', c == 'n':
		return id
	}
	return nullID
}

// validUTF8 returns a copy of b with each byte of invalid UTF-8 in it
// replaced by U+FFFD.
func validUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// answer writes one JSON-RPC response carrying msg (already JSON): an
// error, or for a refused tools/call under `refuse_with tool_result` an
// isError tool result.
func (h *Handler) answer(buf *bytes.Buffer, d *decision, ref *refusal, msg, id []byte, toolCall bool, mode refuseMode) {
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	// A result answers a request a client can match, so an entry whose
	// id is null (one JSON-RPC does not allow) gets the error instead.
	if mode == refuseToolResult && toolCall && id[0] != 'n' {
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
