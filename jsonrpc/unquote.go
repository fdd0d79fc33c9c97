package jsonrpc

import (
	"unicode/utf16"
	"unicode/utf8"
)

// appendUnquoted appends the decoded form of the raw contents s of a string
// that scanString accepted, exactly as encoding/json decodes it: escapes are
// resolved, a \u surrogate pair becomes one rune, and a lone surrogate or a
// byte of invalid UTF-8 becomes U+FFFD. An escape JSON has not (\q) reads as
// the byte after the backslash, as Ruby's json gem read it before 2.10.
//
// The mode adds readings: with decodeOverlong, an overlong UTF-8 sequence
// (see overlongRune) becomes the rune it encodes instead, as Jackson reads
// it; with decodeJSON5, the escapes JSON5 adds to JSON (see json5Escape)
// read as JSON5 reads them; with decodeSubparts, each maximal subpart of
// invalid UTF-8 (see subpartLen) becomes one U+FFFD, as JavaScript's
// TextDecoder (which the TypeScript SDK reads bodies with) and Python's
// errors="replace" decode it.
func appendUnquoted(dst, s []byte, mode uint8) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if mode&decodeJSON5 != 0 {
				if r, n := json5Escape(s[i:]); n > 0 {
					if r >= 0 {
						dst = utf8.AppendRune(dst, r)
					}
					i += n
					continue
				}
			}
			switch s[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				if !hex4At(s, i+2) {
					dst = append(dst, 'u') // as an escape JSON has not, below
					break
				}
				r := hex4(s[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+2 <= len(s) && s[i] == '\\' && s[i+1] == 'u' && hex4At(s, i+2) {
						r2 = hex4(s[i+2:])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/', or one JSON has not, which reads as its byte
				if s[i+1] >= utf8.RuneSelf {
					i++ // the backslash goes; the rune after it is read as any
					continue
				}
				dst = append(dst, s[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				if mode&decodeOverlong != 0 {
					if r, n = overlongRune(s[i:]); n > 0 {
						dst = utf8.AppendRune(dst, r)
						i += n
						continue
					}
					n = 1
				}
				if mode&decodeSubparts != 0 {
					n = subpartLen(s[i:])
				}
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
		}
	}
	return dst
}

// Modes of appendUnquoted.
const (
	decodeOverlong = 1 << iota // overlong UTF-8 as Jackson reads it
	decodeJSON5                // JSON5's escapes
	decodeSubparts             // one U+FFFD per maximal subpart of invalid UTF-8
)

// subpartLen returns the length of the maximal subpart at the start of s,
// where utf8.DecodeRune found no valid rune: the longest start of a
// well-formed sequence that s begins with, at least 1 byte (Unicode's
// recommended practice for U+FFFD substitution, which the WHATWG Encoding
// Standard requires). Go replaces each of its bytes instead.
func subpartLen(s []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	need := 0
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	}
	n := 1
	for n <= need && n < len(s) && s[n] >= lo && s[n] <= hi {
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// hasSubpart reports whether s holds a maximal subpart of invalid UTF-8
// longer than a byte: where decodeSubparts reads s otherwise than Go.
func hasSubpart(s []byte) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			n = subpartLen(s[i:])
			if n > 1 {
				return true
			}
		}
		i += n
	}
	return false
}

// json5Escape decodes the escape at the start of s (a backslash) if it is
// one JSON5 reads and JSON has not: \xHH is the rune U+00HH, \v a vertical
// tab, \0 NUL, and a backslash before a line break (\n, \r, \r\n, U+2028
// or U+2029) continues the string on the next line, reading as nothing
// (r < 0). n is the escape's length, 0 for any other escape.
func json5Escape(s []byte) (r rune, n int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case 'x':
		if len(s) >= 4 && isHex(s[2]) && isHex(s[3]) {
			return hexDigit(s[2])<<4 | hexDigit(s[3]), 4
		}
	case 'v':
		return '\v', 2
	case '0':
		return 0, 2
	case '\n':
		return -1, 2
	case '\r':
		if len(s) >= 3 && s[2] == '\n' {
			return -1, 3
		}
		return -1, 2
	case 0xE2:
		if len(s) >= 4 && s[2] == 0x80 && (s[3] == 0xA8 || s[3] == 0xA9) {
			return -1, 4
		}
	}
	return 0, 0
}

// hasJSON5Escape reports whether the raw string contents s hold an escape
// that JSON5 reads otherwise than Jackson and Ruby's json gem (see
// json5Escape).
func hasJSON5Escape(s []byte) bool {
	for i := 0; i < len(s)-1; i++ {
		if s[i] == '\\' {
			if _, n := json5Escape(s[i:]); n > 0 {
				return true
			}
			i++
		}
	}
	return false
}

// hex4 decodes four hex digits that scanString validated.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r = r<<4 | hexDigit(c)
	}
	return r
}

// hexDigit decodes a hex digit that isHex accepted.
func hexDigit(c byte) rune {
	switch {
	case c <= '9':
		c -= '0'
	case c >= 'a':
		c -= 'a' - 10
	default:
		c -= 'A' - 10
	}
	return rune(c)
}

// overlongRune decodes the overlong UTF-8 sequence at the start of s (one
// longer than its rune needs, which UTF-8 forbids) and returns its rune and
// length, or n = 0 when s starts with none. Go reads such a sequence as
// invalid bytes, but Jackson, reading a body as bytes (the default of
// Spring's @RequestBody), decodes it: "tools\xC0\xAFcall" is tools/call.
func overlongRune(s []byte) (r rune, n int) {
	switch {
	case len(s) >= 2 && (s[0] == 0xC0 || s[0] == 0xC1) && continuation(s[1]):
		return rune(s[0]&0x1F)<<6 | rune(s[1]&0x3F), 2
	case len(s) >= 3 && s[0] == 0xE0 && s[1] < 0xA0 && continuation(s[1]) && continuation(s[2]):
		return rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	case len(s) >= 4 && s[0] == 0xF0 && s[1] < 0x90 && continuation(s[1]) && continuation(s[2]) && continuation(s[3]):
		return rune(s[1]&0x3F)<<12 | rune(s[2]&0x3F)<<6 | rune(s[3]&0x3F), 4
	}
	return 0, 0
}

// continuation reports whether c is a UTF-8 continuation byte.
func continuation(c byte) bool { return c&0xC0 == 0x80 }

// hasOverlong reports whether s holds an overlong UTF-8 sequence.
func hasOverlong(s []byte) bool {
	for i := range s {
		if s[i] >= 0xC0 {
			if _, n := overlongRune(s[i:]); n > 0 {
				return true
			}
		}
	}
	return false
}
