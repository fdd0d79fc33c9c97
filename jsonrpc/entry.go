package jsonrpc

import "bytes"

// Entry is one message of a Request: the body itself, or one element of a
// batch. An element that is not an object is an Entry with no readings.
type Entry struct {
	r       *Request
	index   int32 // position in the body
	id      span  // raw value of the last id member
	methods span  // index range of r.methods
	tools   span  // index range of r.tools
	args    span  // index range of r.args
	object  bool
	hasID   bool
	exactID bool // id is the value of a member spelt "id"
	answer  bool // has a result or an error member
}

// Object reports whether the entry is a JSON object. Other batch elements
// (numbers, arrays, ...) are entries too, which cost nothing by method.
func (e *Entry) Object() bool { return e.object }

// ID returns the raw JSON bytes of the id member, nil when there is none.
// When id is duplicated the last one wins, as in encoding/json and
// JavaScript; keys match case-insensitively (or up to a NUL), but a member
// spelt exactly "id" wins over any other ("id":2,"Id":1 is 2), as every
// parser but encoding/json reads it, the SDKs' included. A string id keeps
// its quotes and escapes; "id":null returns []byte("null"). The bytes
// alias the body.
func (e *Entry) ID() []byte {
	if !e.hasID {
		return nil
	}
	return e.r.body[e.id.lo:e.id.hi:e.id.hi]
}

// Notification reports that the entry is a JSON-RPC notification: a
// method (a string reading) and no id member ("id":null counts as
// present). An entry without a method is no request at all, so it is no
// notification either: a server answers it with an error.
func (e *Entry) Notification() bool { return !e.hasID && e.methods.hi > e.methods.lo }

// Called reports whether the entry has a method reading: it is a
// JSON-RPC request or notification.
func (e *Entry) Called() bool { return e.methods.hi > e.methods.lo }

// Metered reports whether m charges the entry in any reading: it puts a
// call in flight.
func (e *Entry) Metered(m Meter) bool { return e.cost(m, nil) > 0 }

// message reports whether the entry is a JSON-RPC message: a request, a
// notification or a response.
func (e *Entry) message() bool { return e.Called() || e.Response() }

// Response reports whether the entry is a JSON-RPC response: an object
// with an id member ("id":null included), a result or an error member,
// and no method. An object with an id and neither is an invalid request.
func (e *Entry) Response() bool {
	return e.object && e.hasID && e.answer && e.methods.hi == e.methods.lo
}

// HasMethod reports whether any reading of the method member equals m,
// comparing decoded strings exactly (method names are case-sensitive).
func (e *Entry) HasMethod(m string) bool {
	for _, t := range e.r.methods[e.methods.lo:e.methods.hi] {
		if string(e.r.bytes(t)) == m {
			return true
		}
	}
	return false
}

// CallsTool reports whether some reading of the entry calls tool: a
// "tools/call" method reading with a params.name reading equal to tool.
func (e *Entry) CallsTool(tool []byte) bool {
	if !e.HasMethod(ToolsCall) {
		return false
	}
	for _, t := range e.r.tools[e.tools.lo:e.tools.hi] {
		if bytes.Equal(e.r.bytes(t), tool) {
			return true
		}
	}
	return false
}

// Methods calls fn for every distinct reading of the method member, once
// each, in order of appearance. The bytes alias the body or the Request:
// fn must neither modify nor keep them.
func (e *Entry) Methods(fn func(method []byte)) {
	e.r.distinct(e.r.methods[e.methods.lo:e.methods.hi], fn)
}

// Tools calls fn for every distinct params.name string over all readings
// of params, once each, in order of appearance. The bytes alias the body or
// the Request: fn must neither modify nor keep them.
func (e *Entry) Tools(fn func(name []byte)) {
	e.r.distinct(e.r.tools[e.tools.lo:e.tools.hi], fn)
}

// distinct calls fn for each distinct string of list. Short lists are
// deduplicated by comparison; long ones, which only attackers send, with a
// map so that the work stays linear.
func (r *Request) distinct(list []text, fn func([]byte)) {
	const short = 16
	if len(list) <= short {
	outer:
		for i, t := range list {
			b := r.bytes(t)
			for _, u := range list[:i] {
				if bytes.Equal(r.bytes(u), b) {
					continue outer
				}
			}
			fn(b)
		}
		return
	}
	seen := make(map[string]struct{})
	for _, t := range list {
		b := r.bytes(t)
		if _, dup := seen[string(b)]; !dup {
			seen[string(b)] = struct{}{}
			fn(b)
		}
	}
}
