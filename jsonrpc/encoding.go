package jsonrpc

// WideEncoding reports whether body is JSON text in UTF-16 or UTF-32 rather
// than UTF-8, detected as RFC 4627 section 3 describes and Python's json
// module does: a UTF-16 or UTF-32 byte order mark, or a NUL byte among the
// first two. Parse reads bodies as UTF-8 and would find no message in
// such a body, while a backend that detects the encoding reads every one.
// Valid UTF-8 JSON never starts like this, so nothing legitimate matches.
func WideEncoding(body []byte) bool {
	if len(body) < 2 {
		return false
	}
	switch {
	case body[0] == 0xFE && body[1] == 0xFF, body[0] == 0xFF && body[1] == 0xFE: // UTF-16 BOMs; UTF-32 LE's too
		return true
	case body[0] == 0 || body[1] == 0: // UTF-32 BE's BOM, and unmarked UTF-16 and UTF-32
		return true
	}
	return false
}
