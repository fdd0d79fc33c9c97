package jsonrpc

// LeadingID appends to dst the id of the request whose beginning b holds:
// the start of a body that was cut short (too large, or too slow to
// arrive), read as JSON. It appends the id when b opens a single message
// (not a batch), its id member, as Parse reads it, came whole before the
// cut, followed by a byte that ends it, and no result or error member
// came before the cut (a response's id is the other side's, never to be
// answered); otherwise dst is returned as it is. A refusal of the body
// then answers with the request's id, which a client can match to its
// call.
func LeadingID(dst, b []byte) []byte {
	r := GetRequest()
	defer PutRequest(r)
	r.body = b
	if kind, _ := r.scan(b); kind != kindObject || len(r.entries) == 0 {
		return dst
	}
	if e := &r.entries[0]; e.hasID && !e.answer && e.index == 0 && int(e.id.hi) < len(b) {
		dst = append(dst, b[e.id.lo:e.id.hi]...)
	}
	return dst
}
