package jsonrpc

import (
	"math"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// hjsonJSON appends to dst the body b as Hjson reads it (hjson-js 3,
// whose grammar hjson-go 4 shares but for goNUL below), written as JSON, and
// reports whether Hjson reads b as an object or an array at all. Hjson is
// JSON for humans: members and elements may be separated by newlines
// instead of commas, keys need no quotes (any bytes but whitespace and
// ,:[]{}), a value that starts with none of "'{[ is a string up to the
// end of its line (unless the line holds only a number, true, false or
// null before a comma, a bracket or a comment), a string between three
// single quotes at each end may span lines, and #, // and /* */ start
// comments. The braces of the outermost object may be left out.
//
// With goNUL, b is read as hjson-go reads it instead, which differs from
// hjson-js in two places: a NUL byte outside a quoted string ends the
// input (so what follows it is ignored, and it ends a quoteless value),
// and true, false and null may be followed by the whitespace Go's
// strings.TrimSpace removes (U+0085, but not U+FEFF).
//
// A body in Hjson is not JSON, so a backend that parses with Hjson would
// run calls no JSON reading of the body finds; Parse reads this copy as
// well. The conversion is one pass without recursion; its output is
// valid JSON when ok is true.
func hjsonJSON(dst, b []byte, goNUL bool) (out []byte, ok bool) {
	h := hjson{b: b, out: jsonGrown(dst, b, 2), goNUL: goNUL}
	h.white()
	switch {
	case h.stop(h.i):
		return dst, false // an empty object: no message
	case b[h.i] == '{' || b[h.i] == '[':
		ok = h.values(false)
	default:
		ok = h.values(true)
	}
	if !ok {
		return dst, false
	}
	if h.white(); !h.stop(h.i) {
		return dst, false // trailing characters
	}
	return h.out, true
}

// hjson is the state of one conversion: the input b read up to i, the
// output so far, the containers open (true for an object), and whether
// it reads as hjson-go (see hjsonJSON).
type hjson struct {
	b     []byte
	i     int
	out   []byte
	stack []bool
	goNUL bool
}

// stop reports whether the input ends at i: past its end, or, as
// hjson-go reads it, at a NUL byte.
func (h *hjson) stop(i int) bool {
	return i >= len(h.b) || h.goNUL && h.b[i] == 0
}

// values converts the value at h.i and every value nested in it, without
// recursion. With rootless the value is an object whose braces are left
// out: it holds members up to the end of the input.
func (h *hjson) values(rootless bool) bool {
	b := h.b
	if rootless {
		h.out = append(h.out, '{')
		h.stack = append(h.stack, true)
		if !h.member() {
			return false
		}
	}
	for {
		// A value at h.i, after whitespace.
		if h.i < len(b) && (b[h.i] == '{' || b[h.i] == '[') {
			if len(h.stack) >= MaxDepth {
				return false
			}
			object := b[h.i] == '{'
			h.out = append(h.out, b[h.i])
			h.stack = append(h.stack, object)
			h.i++
			h.white()
			closing := byte(']')
			if object {
				closing = '}'
			}
			if h.i < len(b) && b[h.i] == closing {
				h.i++
				h.out = append(h.out, closing)
				h.stack = h.stack[:len(h.stack)-1]
			} else {
				if object && !h.member() {
					return false
				}
				continue
			}
		} else if !h.scalar() {
			return false
		}
		// After a value: a comma may follow, then the container's end
		// or its next member or element.
		for {
			n := len(h.stack)
			if n == 0 {
				return true
			}
			h.white()
			if h.i < len(b) && b[h.i] == ',' {
				h.i++
				h.white()
			}
			object := h.stack[n-1]
			closing := byte(']')
			if object {
				closing = '}'
			}
			if h.stop(h.i) {
				if rootless && n == 1 {
					h.out = append(h.out, '}')
					return true
				}
				return false // a container left open
			}
			if b[h.i] == closing && !(rootless && n == 1) {
				h.i++
				h.out = append(h.out, closing)
				h.stack = h.stack[:n-1]
				continue
			}
			h.out = append(h.out, ',')
			if object && !h.member() {
				return false
			}
			break
		}
	}
}

// member converts the key and colon of an object member at h.i and
// leaves h.i at its value, after whitespace.
func (h *hjson) member() bool {
	if !h.key() {
		return false
	}
	if h.white(); h.i >= len(h.b) || h.b[h.i] != ':' {
		return false
	}
	h.i++
	h.out = append(h.out, ':')
	h.white()
	return true
}

// key converts an object key: a quoted string, or the bytes up to the
// colon, which may be followed by whitespace but hold none.
func (h *hjson) key() bool {
	b := h.b
	if h.i >= len(b) {
		return false
	}
	if c := b[h.i]; c == '"' || c == '\'' {
		return h.quoted(false)
	}
	start, end := h.i, -1 // end: where whitespace began
	for ; h.i < len(b); h.i++ {
		switch c := b[h.i]; {
		case c == ':':
			if end < 0 {
				end = h.i
			}
			if end == start {
				return false // no name
			}
			h.out = appendJSONString(h.out, b[start:end])
			return true
		case c == 0 && h.goNUL:
			return false // the end of the input
		case c <= ' ':
			if end < 0 {
				end = h.i
			}
		case end >= 0 || hjsonPunctuator(c):
			return false // whitespace inside the name, or ,:[]{}
		}
	}
	return false
}

// scalar converts a value that opens no container: a quoted string, a
// multiline string, or a quoteless one, number or literal.
func (h *hjson) scalar() bool {
	if h.i < len(h.b) {
		if c := h.b[h.i]; c == '"' || c == '\'' {
			return h.quoted(true)
		}
	}
	return h.quoteless()
}

// quoted converts the string at h.i, quoted with " or ', resolving \'
// and keeping JSON's own escapes; a string may not span lines. With ml,
// three single quotes open a multiline string.
func (h *hjson) quoted(ml bool) bool {
	b := h.b
	q := b[h.i]
	h.i++
	if ml && q == '\'' && h.i+1 < len(b) && b[h.i] == '\'' && b[h.i+1] == '\'' {
		h.i += 2
		return h.multiline()
	}
	h.out = append(h.out, '"')
	for h.i < len(b) {
		c := b[h.i]
		switch {
		case c == q:
			h.i++
			h.out = append(h.out, '"')
			return true
		case c == '\n' || c == '\r':
			return false
		case c == '\\':
			if h.i+1 >= len(b) {
				return false
			}
			switch e := b[h.i+1]; e {
			case '\'':
				h.out = append(h.out, '\'')
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				h.out = append(h.out, '\\', e)
			case 'u':
				if !hex4At(b, h.i+2) {
					return false
				}
				h.out = append(h.out, b[h.i:h.i+6]...)
				h.i += 4
			default:
				return false
			}
			h.i += 2
			continue
		default:
			h.out = appendJSONByte(h.out, c)
		}
		h.i++
	}
	return false
}

// multiline converts the rest of a multiline string, after the three
// single quotes that open it: whitespace up to the end of the opening
// line is dropped, each line's indentation is dropped, and so is the line
// break before the closing quotes. Hjson drops at most as much
// indentation as the opening quotes had; dropping it all reads no name
// Hjson reads differently, since a name Hjson reads has no indentation
// left either.
func (h *hjson) multiline() bool {
	b := h.b
	h.out = append(h.out, '"')
	h.indent()
	if h.i < len(b) && b[h.i] == '\n' {
		h.i++
		h.indent()
	}
	newline := false // the contents end with a line break
	for quotes := 0; !h.stop(h.i); {
		c := b[h.i]
		if c == '\'' {
			h.i++
			if quotes++; quotes == 3 {
				if newline {
					h.out = h.out[:len(h.out)-2] // the line break before the closing quotes
				}
				h.out = append(h.out, '"')
				return true
			}
			continue
		}
		for ; quotes > 0; quotes-- {
			h.out = append(h.out, '\'')
			newline = false
		}
		h.i++
		switch c {
		case '\n':
			h.out = append(h.out, '\\', 'n')
			newline = true
			h.indent()
		case '\r':
		default:
			h.out = appendJSONByte(h.out, c)
			newline = false
		}
	}
	return false
}

// indent skips the whitespace at h.i up to a line break: a multiline
// string's indentation, or what follows its opening quotes.
func (h *hjson) indent() {
	for !h.stop(h.i) && h.b[h.i] <= ' ' && h.b[h.i] != '\n' {
		h.i++
	}
}

// quoteless converts a value without quotes. It runs to the end of the
// line and is a string, trimmed; but where a comma, a closing bracket or
// a comment ends a number, true, false or null, it is that value. Only the
// first such end can: past it, the value holds that comma, bracket or
// comment, which no number or literal does, so it is not read again (a
// long number followed by thousands of commas made each comma read it).
func (h *hjson) quoteless() bool {
	b := h.b
	start := h.i
	if h.i < len(b) && hjsonPunctuator(b[h.i]) {
		return false
	}
	ended := false // a comma, bracket or comment was met, and read past
	for {
		if h.i < len(b) {
			h.i++ // the first byte is the value's, whatever it is
		}
		eol := h.stop(h.i) || b[h.i] == '\n' || b[h.i] == '\r'
		if !eol && (ended || !hjsonValueEnd(b, h.i)) {
			continue
		}
		raw := b[start:h.i]
		if !ended {
			if lit := hjsonLiteral(raw, h.goNUL); lit != nil {
				h.out = append(h.out, lit...)
				return true
			}
			// A number may be followed by whitespace up to the space only.
			n := len(raw)
			for n > 0 && raw[n-1] <= ' ' {
				n--
			}
			if num, ok := hjsonNumber(raw[:n]); ok {
				h.out = append(h.out, num...)
				return true
			}
		}
		if eol {
			h.out = appendJSONString(h.out, trimSpace(raw))
			return true
		}
		ended = true
	}
}

// hjsonValueEnd reports whether a comma, a closing bracket or a comment
// starts at i, where a number or literal in a quoteless value ends.
func hjsonValueEnd(b []byte, i int) bool {
	switch b[i] {
	case ',', '}', ']', '#':
		return true
	case '/':
		return i+1 < len(b) && (b[i+1] == '/' || b[i+1] == '*')
	}
	return false
}

// hjsonLiteral returns true, false or null when raw, the start of a
// quoteless value, is one as hjson-js reads it: the literal, then only
// whitespace that JavaScript's trim removes (with goTrim, that Go's
// strings.TrimSpace removes, as hjson-go reads it); nil otherwise.
func hjsonLiteral(raw []byte, goTrim bool) []byte {
	if len(raw) == 0 || raw[0] != 't' && raw[0] != 'f' && raw[0] != 'n' {
		return nil
	}
	for len(raw) > 0 {
		if c := raw[len(raw)-1]; c == ' ' || '\t' <= c && c <= '\r' {
			raw = raw[:len(raw)-1]
			continue
		}
		r, n := utf8.DecodeLastRune(raw)
		space := unicode.IsSpace(r) && (goTrim || r != '\u0085') || !goTrim && r == '\uFEFF'
		if r < utf8.RuneSelf || !space {
			break
		}
		raw = raw[:len(raw)-n]
	}
	switch string(raw) {
	case "true", "false", "null":
		return raw
	}
	return nil
}

// hjsonNumber returns v as a JSON number when Hjson reads it as a number:
// JSON's syntax, but a fraction may have no digits ("1.", which is 1 to
// JavaScript) and a leading zero may not be followed by digits, and its
// value within a double's range (hjson-js and hjson-go read 1e400 as a
// quoteless string, which runs to the end of its line). The JSON form
// gets a 0 after such a point.
func hjsonNumber(v []byte) (num []byte, ok bool) {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	digits := i
	for i < len(v) && '0' <= v[i] && v[i] <= '9' {
		i++
	}
	if i == digits || v[digits] == '0' && i-digits > 1 {
		return nil, false
	}
	point := -1
	if i < len(v) && v[i] == '.' {
		point = i
		for i++; i < len(v) && '0' <= v[i] && v[i] <= '9'; i++ {
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		exp := i
		for i < len(v) && '0' <= v[i] && v[i] <= '9' {
			i++
		}
		if i == exp {
			return nil, false
		}
	}
	if i != len(v) {
		return nil, false
	}
	if f, _ := strconv.ParseFloat(string(v), 64); math.IsInf(f, 0) {
		return nil, false
	}
	if point >= 0 && (point+1 == len(v) || v[point+1] < '0' || v[point+1] > '9') {
		num = make([]byte, 0, len(v)+1)
		num = append(num, v[:point+1]...)
		num = append(num, '0')
		return append(num, v[point+1:]...), true
	}
	return v, true
}

// hjsonPunctuator reports whether c is one of ,:[]{}, which no quoteless
// key or value may start with.
func hjsonPunctuator(c byte) bool {
	switch c {
	case ',', ':', '[', ']', '{', '}':
		return true
	}
	return false
}

// white skips whitespace (every byte up to the space) and comments.
func (h *hjson) white() {
	b := h.b
	for !h.stop(h.i) {
		switch c := b[h.i]; {
		case c <= ' ':
			h.i++
		case c == '#' || c == '/' && h.i+1 < len(b) && b[h.i+1] == '/':
			for !h.stop(h.i) && b[h.i] != '\n' {
				h.i++
			}
		case c == '/' && h.i+1 < len(b) && b[h.i+1] == '*':
			h.i += 2
			for !h.stop(h.i) && !(b[h.i] == '*' && h.i+1 < len(b) && b[h.i+1] == '/') {
				h.i++
			}
			if h.i < len(b) && b[h.i] == '*' {
				h.i += 2
			}
		default:
			return
		}
	}
}

// trimSpace trims v of the whitespace JavaScript's and Python's trim
// remove (and any other byte up to the space, which no name holds).
func trimSpace(v []byte) []byte {
	for len(v) > 0 {
		if v[0] <= ' ' {
			v = v[1:]
		} else if n := oddSpace(v, 0); n > 0 {
			v = v[n:]
		} else {
			break
		}
	}
	for len(v) > 0 {
		if v[len(v)-1] <= ' ' {
			v = v[:len(v)-1]
			continue
		}
		n := 0
		for j := max(len(v)-4, 0); j < len(v); j++ {
			if m := oddSpace(v, j); m > 0 && j+m == len(v) {
				n = m
				break
			}
		}
		if n == 0 {
			break
		}
		v = v[:len(v)-n]
	}
	return v
}

// jsonGrown returns dst with room for b written as JSON by a reading:
// scale times b's length, for the syntax the reading adds around its
// tokens, and five more bytes for each byte appendJSONByte may write as an
// escape, so that the output of a body of control bytes, six times as
// long, is allocated once instead of growing by a quarter at a time (five
// times as many bytes allocated, and copied).
func jsonGrown(dst, b []byte, scale int) []byte {
	n := 0
	for _, c := range b {
		if c < ' ' || c == '"' || c == '\\' {
			n++
		}
	}
	return slices.Grow(dst, scale*len(b)+5*n)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for _, c := range s {
		dst = appendJSONByte(dst, c)
	}
	return append(dst, '"')
}

// appendJSONByte appends the byte c of a string's contents as JSON writes
// it inside quotes.
func appendJSONByte(dst []byte, c byte) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(dst, '\\', c)
	case c < ' ':
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
	}
	return append(dst, c)
}
