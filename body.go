package mcplimit

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// inspect reads and classifies the body of a request that carries one,
// and reports whether the request may go on; when it may not, its
// refusal is in d.ref. Requests without a body (SSE GET streams, DELETE),
// or with an empty one, cost nothing unless the meter is `*`. A POST
// always sends a message, so one without a body (Content-Length: 0) is
// read and parsed as an empty body, like a chunked empty one: invalid
// JSON, which costs 1.
func (h *Handler) inspect(d *decision, w http.ResponseWriter, r *http.Request) bool {
	pol := d.pol
	hasBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if !hasBody && (!d.post || r.Body == nil) {
		d.cost = d.requestCost()
		return true
	}
	// The header rules of headersAllowBody, written out: this is the path
	// of every metered call, and the call costs more than its checks.
	// Their refusals echo the ids of a small body that reads as JSON
	// whatever its headers say (one sent unencoded under a coding, say).
	if ce, encoded := bodyEncoding(r.Header["Content-Encoding"]); encoded {
		d.peekLingering(w, r)
		return d.refused(encodingRefusal(ce))
	}
	if cs, foreign := foreignCharset(r.Header["Content-Type"]); foreign {
		d.peekLingering(w, r)
		return d.refused(charsetRefusal(cs))
	}
	// The body is held in memory until it is all here, before any layer
	// after pre-auth can refuse: a caller trickling it must not hold that
	// memory for long. The deadline cannot cut the answer: net/http
	// clears it once the body has been read (HTTP/1) or has ended (HTTP/2).
	wait := bodyWait(pol.maxBody)
	setReadDeadline(w, d.now.Add(wait))
	buf, tooLarge, err := jsonrpc.ReadBody(r.Body, pol.maxBody)
	if err != nil || tooLarge {
		// Its refusal answers the id the body began with, if it came
		// whole: a client matches the error to its call (the Go SDK
		// ends its session on an answer with id null).
		b := buf.Bytes()
		d.cutID = jsonrpc.LeadingID(nil, b[:min(len(b), peekLimit)])
		buf.Release()
		if err == nil {
			// Too large: the rest is read after the refusal, bounded.
			d.startLinger(w, r)
			return d.refused(tooLargeRefusal(pol.maxBody))
		}
		// The deadline passes now on a body that failed: the server
		// stops reading, and answers without waiting for more of it
		// (net/http would otherwise drain up to 256 KiB of a chunked
		// one first).
		setReadDeadline(w, time.Now())
		if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(d.now) < wait-time.Second {
			// The server's shorter read_timeout ended it, not this wait.
			return d.refused(bodyRefusal(http.StatusRequestTimeout, "The request body did not arrive within the server's read timeout; send it at once."))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return d.refused(bodyRefusal(http.StatusRequestTimeout, "The request body did not arrive in time (bodies may take at most "+itoa(int64(wait/time.Second))+"s here); send it at once."))
		}
		limit := pol.maxBody
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			// A handler before this one (request_body) bounds it lower.
			limit, err = min(limit, mbe.Limit), nil
		}
		if err != nil {
			return d.refused(bodyRefusal(http.StatusBadRequest, "The request body could not be read."))
		}
		return d.refused(tooLargeRefusal(limit))
	}
	if int64(len(buf.Bytes())) < r.ContentLength {
		// HTTP/3 (quic-go) ends a body where its stream ends, short of
		// its Content-Length or not, and a handler before this one
		// (Caddy's {http.request.body} placeholder) may keep what arrived
		// of a body cut short: handed on with the length read, a message
		// cut in two would reach the backend as a whole one. net/http
		// refuses such a body over HTTP/1 and HTTP/2, and reverse_proxy
		// would too.
		buf.Release()
		return d.refused(bodyRefusal(http.StatusBadRequest, "The request body is shorter than its Content-Length header says; send the whole body."))
	}
	if jsonrpc.WideEncoding(buf.Bytes()) {
		buf.Release()
		return d.refused(wideRefusal())
	}
	d.body, d.bodyOwn = buf, true
	if len(buf.Bytes()) == 0 && !d.post {
		// A GET or DELETE whose framing left its length open (chunked,
		// or an HTTP/2 stream ended by an empty DATA frame) has no body
		// all the same, and costs what one without a body does.
		d.cost = d.requestCost()
		_ = r.Body.Close()
		return true
	}
	d.parse(buf.Bytes())
	// The cost is known before any rule refuses, so that a refusal
	// carries the RateLimit fields of what the request would have spent.
	d.cost = d.requestCost()
	tooLong := d.batchTooLong()
	if tooLong && !pol.dryRun {
		return d.refused(batchRefusal(pol.maxBatch))
	}
	// Only a JSON-RPC 2.0 request as the specification writes it is one a
	// 2xx answers: a lenient reading of a body that is not JSON is
	// charged, and so is a message without "jsonrpc":"2.0" or with a
	// member twice, but a backend may answer such a body with an error
	// before it checks the credential. Only an unproven identity's
	// answer proves (see learn), so only its body is read again, and only
	// when every entry is a message in some reading: one that is none
	// (`[0,0,…]`) is no request as the specification writes it either.
	if d.hasID && !d.proven && d.req.Valid() && d.req.Largest() == d.req.Len() {
		d.called = jsonrpc.WellFormedCall(buf.Bytes())
	}
	// max_batch and arg bounds are limits an operator tunes, so a dry run
	// only records them; the rules above keep the request readable.
	if tooLong {
		d.recordAsSent(batchRefusal(pol.maxBatch))
	}
	if !d.checkArgs() {
		if !pol.dryRun {
			return false
		}
		d.recordAsSent(d.ref)
	}
	_ = r.Body.Close()
	return true
}

// headersAllowBody reports whether r's headers let its body be read as
// JSON-RPC; when they do not, the refusal is in d.ref.
func (d *decision) headersAllowBody(r *http.Request) bool {
	if ce, encoded := bodyEncoding(r.Header["Content-Encoding"]); encoded {
		return d.refused(encodingRefusal(ce))
	}
	if cs, foreign := foreignCharset(r.Header["Content-Type"]); foreign {
		return d.refused(charsetRefusal(cs))
	}
	return true
}

// encodingRefusal refuses a body sent with a content coding: a backend
// would decode a message the limiter never read.
func encodingRefusal(coding string) refusal {
	return bodyRefusal(http.StatusUnsupportedMediaType, "Request bodies with Content-Encoding "+coding+" are not accepted here; send the JSON-RPC body unencoded.")
}

// charsetRefusal refuses a body in a charset other than UTF-8: a backend
// that decodes by charset (the TypeScript SDK does) would read a
// different message than the one classified here.
func charsetRefusal(charset string) refusal {
	return bodyRefusal(http.StatusUnsupportedMediaType, "Request bodies must be UTF-8 JSON; charset "+charset+" is not accepted here.")
}

// tooLargeRefusal refuses a body over limit bytes, which was not read
// whole: nothing could say what it costs.
func tooLargeRefusal(limit int64) refusal {
	return bodyRefusal(http.StatusRequestEntityTooLarge, "Request body too large: the limit is "+itoa(limit)+" bytes.")
}

// wideRefusal refuses a body in UTF-16 or UTF-32: a backend that detects
// the encoding (Python's json does) would run every message of a body
// that reads as nothing in UTF-8.
func wideRefusal() refusal {
	return bodyRefusal(http.StatusUnsupportedMediaType, "Request bodies must be UTF-8 JSON; this one is UTF-16 or UTF-32.")
}

// refusedAsSent reports whether a request that pre-auth refuses for its
// wait is one that no wait lets pass, as far as its headers show: its
// content coding or charset, or a declared length over max_body. When it
// is, that refusal is in d.ref, to be given instead of the wait: after
// it, the same call would meet only that refusal. Only a refusal for the
// headers reads anything: a small body, for its ids, as inspect's does.
func (d *decision) refusedAsSent(w http.ResponseWriter, r *http.Request) bool {
	hasBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if !hasBody && (!d.post || r.Body == nil) {
		return false
	}
	if !d.headersAllowBody(r) {
		d.peekIDs(w, r)
		return true
	}
	if r.ContentLength > d.pol.maxBody {
		setReadDeadline(w, time.Now()) // not drained either
		d.ref = tooLargeRefusal(d.pol.maxBody)
		return true
	}
	return false
}

// peekRefusedAsSent is refusedAsSent for the body peekIDs read: its
// length, its encoding, and the rules inspect applies to what it holds
// (max_batch, arg bounds).
func (d *decision) peekRefusedAsSent() bool {
	if d.body == nil || d.req == nil {
		return false
	}
	b := d.body.Bytes()
	switch {
	case int64(len(b)) > d.pol.maxBody:
		d.ref = tooLargeRefusal(d.pol.maxBody)
	case jsonrpc.WideEncoding(b):
		d.ref = wideRefusal()
	case d.batchTooLong():
		d.ref = batchRefusal(d.pol.maxBatch)
	case !d.checkArgs():
	default:
		return false
	}
	return true
}

// batchTooLong reports whether some reading of d's parsed body holds more
// entries than max_batch. No reading holds more messages than the entries
// scanned: most bodies are spared counting them.
func (d *decision) batchTooLong() bool {
	return d.req.Scanned() > d.pol.maxBatch && d.req.Largest() > d.pol.maxBatch
}

// recordAsSent records in dry run a refusal of the request as sent, which
// enforcement gives before any layer after pre-auth takes: the pre-auth
// token paid for the reading is kept, as it would have been, and the rest
// is given back in admit.
func (d *decision) recordAsSent(ref refusal) {
	d.h.record(d, ref, true)
	d.nres = 0
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
	d.peekIDsWithin(w, r, peekWait)
}

// peekLingering is peekIDs for a body refused for its headers once
// pre-auth has let it in, whose rest is then read after the refusal (see
// startLinger). Over HTTP/1 it waits for the body as long as the linger
// would read it, not peekWait: Caddy's body reader fails every read after
// one that timed out, so a peek cut short would leave the linger nothing
// to read, and a client still writing its body before it reads the
// answer would meet the connection's reset instead of its 415.
func (d *decision) peekLingering(w http.ResponseWriter, r *http.Request) {
	wait := peekWait
	if r.ProtoMajor == 1 {
		wait = lingerWait
	}
	d.peekIDsWithin(w, r, wait)
	d.startLinger(w, r)
}

// peekIDsWithin is peekIDs waiting at most wait for the body.
func (d *decision) peekIDsWithin(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	d.unread = true // until it is read below
	if r.ContentLength > peekLimit {
		// Not read, and not waited for either: net/http would otherwise
		// drain up to 256 KiB of it before sending the refusal.
		setReadDeadline(w, time.Now())
		return
	}
	if !setReadDeadline(w, time.Now().Add(wait)) {
		return
	}
	buf, tooLarge, err := jsonrpc.ReadBody(r.Body, peekLimit)
	if err != nil || tooLarge {
		// The deadline passes now, so the server does not wait for the
		// rest of this body either (a chunked one, whose length net/http
		// cannot know, it would drain up to 256 KiB of).
		setReadDeadline(w, time.Now())
		d.cutID = jsonrpc.LeadingID(nil, buf.Bytes())
		buf.Release()
		return
	}
	setReadDeadline(w, time.Time{})
	d.body, d.bodyOwn, d.unread = buf, true, false
	d.parse(buf.Bytes())
}

// checkArgs applies `arg <name> max <n>` bounds to every tools/call entry,
// before any token is spent, and reports whether they hold; when they do
// not, the refusal is in d.ref. One bad call refuses the whole batch.
func (d *decision) checkArgs() bool {
	if len(d.pol.tools) == 0 {
		return true
	}
	// Scanned, not Len: an invalid body (NaN, a second value after the
	// first) is still run by lenient or streaming parsers.
	for i := 0; i < d.req.Scanned(); i++ {
		if ref, bad := d.argFault(d.req.Entry(i)); bad {
			ref.argEntry = i
			return d.refused(ref)
		}
	}
	return true
}

// argFault returns the refusal of entry e for an argument over its
// tool's bound, and whether it has one.
func (d *decision) argFault(e *jsonrpc.Entry) (ref refusal, bad bool) {
	if !e.HasMethod("tools/call") {
		return ref, false
	}
	e.Tools(func(name []byte) {
		tp := d.pol.tools[string(name)]
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
	return ref, bad
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
// plain or extended as RFC 2231 writes it (charset*=utf-8'en'utf-16, whose
// value follows the second quote, %-encoded; continued, charset*0=).
// Parsers disagree on quoted strings and duplicate parameters (the
// TypeScript SDK's read the last charset, or the one after a quoted
// ";charset=utf-8"), so any foreign one, in either reading, counts.
func foreignCharset(cts []string) (string, bool) {
	for _, ct := range cts {
		lower := strings.ToLower(ct)
		for rest := lower; ; {
			i := strings.Index(rest, "charset")
			if i < 0 {
				break
			}
			rest = rest[i+len("charset"):]
			raw, ok := strings.CutPrefix(strings.TrimLeft(rest, " \t*0123456789"), "=")
			if !ok {
				continue
			}
			raw = strings.TrimLeft(raw, " \t")
			if v := charsetToken(strings.TrimLeft(raw, "\"'")); !utf8Charset(v) {
				return v, true
			}
			if _, ext, ok := strings.Cut(raw, "'"); ok {
				if _, ext, ok = strings.Cut(ext, "'"); ok {
					if v := percentDecode(charsetToken(ext), false); v != "" && !utf8Charset(v) {
						return v, true
					}
				}
			}
		}
	}
	return "", false
}

// charsetToken is the charset value v starts with.
func charsetToken(v string) string {
	if end := strings.IndexAny(v, "\"'; \t,"); end >= 0 {
		return v[:end]
	}
	return v
}

// utf8Charset reports whether the lower-case charset v is UTF-8.
func utf8Charset(v string) bool { return v == "utf-8" || v == "utf8" }
