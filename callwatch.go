package mcplimit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// maxWatchedEvent bounds the bytes of one SSE line or event a callWatch
// holds. A larger one is skipped: an answer in it is not seen, and its
// call is in flight until the response ends.
const maxWatchedEvent = 1 << 20

// callWatch frees a request's concurrency slots as the backend answers the
// calls in it on an SSE response, each call's as its answer is written,
// rather than when the stream ends. A call is in flight until its answer
// is written: a client reads the answer and sends its next call at once,
// while the backend closes the stream a moment later (or holds it open for
// more messages, or for a batch's slower calls), and a per-identity cap of
// 1 would refuse that next call.
type callWatch struct {
	// awaiting counts the answers still to come: 0 when not watching (or
	// all came).
	awaiting int
	line     []byte // a line split across writes, so far
	// overLine says the line being read went over maxWatchedEvent: the
	// rest of it is skipped. spoiled says the same of the current event,
	// which then answers nothing.
	overLine, spoiled bool
	// afterCR says the last line ended with a CR, so an LF right after
	// it (perhaps in the next write) ends nothing more. A new watch may
	// start with it set: an LF it skips then is a blank line before any
	// data, which ends no event either.
	afterCR bool
	data    []byte // the current event's data lines, joined by "\n"
	// named says the current event has a type other than "message":
	// clients (the official SDKs) skip such an event, so what it holds
	// answers nothing.
	named bool
	// The keys of the ids of the POST's requests (appendIDKey; null for
	// an entry without one), back to back in ids and ending at idEnds,
	// made before the body goes on (its buffer is reused once sent);
	// metered marks the calls that hold a slot, answered those answered.
	ids      []byte
	idEnds   []int
	metered  []bool
	answered []bool
	// dupIDs says two requests' ids share a key: an answer cannot tell
	// which of them it ends, so no slot goes before every answer is in.
	dupIDs bool
	key    []byte // the key of the answer being matched
	// calls counts the metered calls answered since takeCalls last ran.
	calls int
}

// expect records the requests of req, whose answers a watch started later
// waits for, and which of them m meters.
func (w *callWatch) expect(req *jsonrpc.Request, m jsonrpc.Meter) {
	w.ids, w.idEnds, w.metered = w.ids[:0], w.idEnds[:0], w.metered[:0]
	for i := range req.Len() {
		if e := req.Entry(i); !e.Notification() {
			w.ids = appendIDKey(w.ids, idOrNull(e.ID()))
			w.idEnds = append(w.idEnds, len(w.ids))
			w.metered = append(w.metered, e.Metered(m))
		}
	}
	w.dupIDs = w.idsRepeat()
}

// answerable returns how many of the requests expect recorded are
// metered calls, whose slots their answers end.
func (w *callWatch) answerable() int {
	n := 0
	for _, m := range w.metered {
		if m {
			n++
		}
	}
	return n
}

// idsRepeat reports whether two of the keys expect recorded are equal.
func (w *callWatch) idsRepeat() bool {
	n := len(w.idEnds)
	if n > 32 {
		seen := make(map[string]bool, n)
		for k := range n {
			id := string(w.idKey(k))
			if seen[id] {
				return true
			}
			seen[id] = true
		}
		return false
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if bytes.Equal(w.idKey(i), w.idKey(j)) {
				return true
			}
		}
	}
	return false
}

// idKey returns the key of the k-th request's id.
func (w *callWatch) idKey(k int) []byte {
	lo := 0
	if k > 0 {
		lo = w.idEnds[k-1]
	}
	return w.ids[lo:w.idEnds[k]]
}

// listenMethod opens a listen stream in a POST (SEP-2575, revision
// 2026-07-28): its answer is a stream held open for the session's
// notifications, as a GET's is in earlier revisions.
const listenMethod = "subscriptions/listen"

// listenOnly reports whether every message of req is a listen request, in
// every reading of its method: such a POST is a listen stream.
func listenOnly(req *jsonrpc.Request) bool {
	if req.Len() == 0 {
		return false
	}
	for i := range req.Len() {
		e := req.Entry(i)
		if !e.Called() || e.Notification() {
			return false
		}
		listen := true
		e.Methods(func(m []byte) { listen = listen && string(m) == listenMethod })
		if !listen {
			return false
		}
	}
	return true
}

// callsNothing reports whether req holds JSON-RPC messages none of which
// puts a call in flight: responses (a client's answers to the server's
// requests) and notifications, but those that read, in any reading, as a
// method m meters (tools/call sent without an id, which a backend that
// runs notifications runs). A backend answers such a POST at once, and it
// must pass while the sender's calls hold every slot: a call waiting on
// the client's answer (roots/list, sampling, elicitation) would hold its
// slot until it timed out, and a cancellation would never reach the
// backend.
func callsNothing(req *jsonrpc.Request, m jsonrpc.Meter) bool {
	if req == nil || req.Len() == 0 {
		return false
	}
	for i := range req.Len() {
		e := req.Entry(i)
		if e.Response() {
			continue
		}
		if !e.Notification() {
			return false
		}
		call := false
		e.Methods(func(b []byte) { call = call || string(b) == jsonrpc.ToolsCall || slices.Contains(m.Methods, string(b)) })
		if call {
			return false
		}
	}
	return true
}

// start watches the answer to d when d holds concurrency slots and the
// answer is an SSE stream, whatever its status: a stream that holds the
// answers has answered, even with an error status. An encoded stream (an
// encode handler after this one compresses it) is not read: its slots go
// when it ends. So do the slots of a POST that holds more than its
// requests' answers can end: a metered notification (a tools/call without
// an id, which a backend that runs notifications runs) holds a slot no
// answer names, and its call may run after every answer is written.
func (w *callWatch) start(d *decision, h http.Header) {
	w.awaiting = 0
	if !d.concAll && !d.concID || len(w.idEnds) == 0 || !isEventStream(h.Get("Content-Type")) {
		return
	}
	if d.concN > w.answerable() {
		return
	}
	if _, encoded := bodyEncoding(h["Content-Encoding"]); encoded {
		return
	}
	w.begin()
}

// begin waits for an answer to every request expect recorded.
func (w *callWatch) begin() {
	w.awaiting, w.calls = len(w.idEnds), 0
	w.line, w.data, w.named, w.overLine, w.spoiled = w.line[:0], w.data[:0], false, false, false
	w.answered = append(w.answered[:0], make([]bool, len(w.idEnds))...)
}

// feed reads what was written to the client and reports whether it
// completed the last awaited answer; it does so at most once. Lines end
// with CRLF, LF or CR, as SSE allows.
func (w *callWatch) feed(b []byte) bool {
	for w.awaiting > 0 && len(b) > 0 {
		if w.afterCR {
			w.afterCR = false
			if b[0] == '\n' {
				b = b[1:]
				continue
			}
		}
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			if !w.overLine {
				w.line = w.holdLine(w.line, b)
			}
			return false
		}
		line := b[:i]
		if len(w.line) > 0 && !w.overLine {
			w.line = w.holdLine(w.line, line)
			line = w.line
		}
		w.afterCR = b[i] == '\r'
		b = b[i+1:]
		if w.overLine {
			w.overLine = false // its end: the line is skipped whole
		} else {
			w.takeLine(line)
		}
		w.line = w.line[:0]
		if w.awaiting == 0 {
			return true
		}
	}
	return false
}

// holdLine appends p to the line held, or skips the line (and spoils its
// event) when that would exceed maxWatchedEvent.
func (w *callWatch) holdLine(buf, p []byte) []byte {
	if len(buf)+len(p) > maxWatchedEvent {
		w.overLine, w.spoiled = true, true
		return buf[:0]
	}
	return append(buf, p...)
}

// takeLine reads one line of the SSE stream: data lines make up the event,
// an event line names its type, and a blank line ends it. Other fields
// are irrelevant here.
func (w *callWatch) takeLine(line []byte) {
	if len(line) == 0 {
		if !w.named && !w.spoiled {
			w.dispatch()
		}
		w.data, w.named, w.spoiled = w.data[:0], false, false
		return
	}
	if v, ok := sseField(line, "event"); ok {
		w.named = len(v) > 0 && string(v) != "message"
		return
	}
	v, ok := sseField(line, "data")
	if !ok || w.spoiled {
		return
	}
	if len(w.data)+1+len(v) > maxWatchedEvent {
		w.data, w.spoiled = w.data[:0], true
		return
	}
	if len(w.data) > 0 {
		w.data = append(w.data, '\n')
	}
	w.data = append(w.data, v...)
}

// sseField returns the value of line when it is the SSE field name: what
// follows the colon, less one leading space.
func sseField(line []byte, name string) ([]byte, bool) {
	v, ok := bytes.CutPrefix(line, []byte(name))
	if !ok || len(v) > 0 && v[0] != ':' {
		return nil, false
	}
	if len(v) > 0 {
		v = bytes.TrimPrefix(v[1:], []byte{' '})
	}
	return v, true
}

// dispatch counts the JSON-RPC responses in the event just ended: those
// every client reads as one (responseIDs).
func (w *callWatch) dispatch() {
	if len(w.data) == 0 || w.awaiting <= 0 {
		return
	}
	for _, id := range responseIDs(w.data) {
		if k := w.answer(id); k >= 0 {
			w.awaiting--
			if w.metered[k] && !w.dupIDs {
				w.calls++
			}
		}
	}
}

// takeCalls returns the metered calls answered since it last ran.
func (w *callWatch) takeCalls() int {
	n := w.calls
	w.calls = 0
	return n
}

// responseIDs returns the ids of the messages in data (one, or a batch's)
// that every client reads as a response, the official SDKs included: an
// object with "jsonrpc":"2.0", an "id", a "result" or an "error" and no
// "method", those keys spelled so (JavaScript matches keys exactly; Go's
// encoding/json, whatever their case, so "ID" would answer for Go and not
// for JavaScript), the last of duplicates winning, as both read them.
// Data that is not JSON holds none.
func responseIDs(data []byte) []json.RawMessage {
	var msgs []json.RawMessage
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if json.Unmarshal(data, &msgs) != nil {
			return nil
		}
	} else {
		msgs = []json.RawMessage{data}
	}
	var ids []json.RawMessage
	for _, msg := range msgs {
		var m map[string]json.RawMessage
		var version string
		if json.Unmarshal(msg, &m) != nil || json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" {
			continue
		}
		_, method := m["method"]
		_, result := m["result"]
		_, failed := m["error"]
		if id, ok := m["id"]; ok && !method && (result || failed) {
			ids = append(ids, id)
		}
	}
	return ids
}

// answer marks the first unanswered request whose id has id's key (null
// for an entry without one) and returns its index, -1 when there is none:
// a response to an id the POST did not carry ends nothing.
func (w *callWatch) answer(id []byte) int {
	w.key = appendIDKey(w.key[:0], id)
	lo := 0
	for k, hi := range w.idEnds {
		if !w.answered[k] && bytes.Equal(w.ids[lo:hi], w.key) {
			w.answered[k] = true
			return k
		}
		lo = hi
	}
	return -1
}

// isEventStream reports whether a Content-Type value names an SSE stream.
func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// keepWatchBuffer bounds the buffers a pooled decision keeps.
const keepWatchBuffer = 64 << 10

// reuse returns an idle watch that keeps w's buffers when they are small.
func (w *callWatch) reuse() callWatch {
	if cap(w.line) > keepWatchBuffer || cap(w.data) > keepWatchBuffer || cap(w.ids) > keepWatchBuffer || cap(w.key) > keepWatchBuffer {
		return callWatch{}
	}
	return callWatch{line: w.line[:0], data: w.data[:0], ids: w.ids[:0], idEnds: w.idEnds[:0], metered: w.metered[:0], answered: w.answered[:0], key: w.key[:0]}
}
