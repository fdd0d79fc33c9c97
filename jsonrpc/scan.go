package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects in a valid body; it
// equals the bound of encoding/json. Deeper bodies are invalid, but they are
// still scanned (and charged) to the end.
const MaxDepth = 10000

// The scanning functions take the body b and an index i, and return the
// index just past what they scanned, or -1 on a syntax error.

// String flags reported by scanString.
const (
	flagEscape  = 1 << iota // the string contains a backslash escape
	flagHigh                // the string may contain non-ASCII bytes
	flagLenient             // an escape JSON has not (\q) or a raw control byte: a soft error
)

// Word-at-a-time constants for scanString.
const (
	ones   = 0x0101010101010101
	highs  = 0x8080808080808080
	quotes = ones * '"'
	slashs = ones * '\\'
	spaces = ones * ' '
)

// skipWS returns the index of the first byte at or after i that is not JSON
// whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// comment returns the length of the opening of a comment at i: 2 for /*
// and //, 1 for #, which Jackson reads as a line comment with
// ALLOW_YAML_COMMENTS; 0 when no comment starts there.
func comment(b []byte, i int) int {
	switch {
	case b[i] == '#':
		return 1
	case i+1 < len(b) && b[i] == '/' && (b[i+1] == '*' || b[i+1] == '/'):
		return 2
	}
	return 0
}

// blankComments appends to dst a copy of b whose comments outside strings
// (/* to */, or to the end of b when unterminated; // and # to the end of
// the line) are spaces, and reports whether b had any; dst is unchanged
// when it had none. With single, '...' is a string too (see scanQuoted),
// and the whitespace JSON5 and Python's str.strip add to JSON's (see
// oddSpace) is blanked as well. A line ends at \n; with short, at \r,
// U+2028 and U+2029 as well (see lineEnd). The copy has b's length, so
// offsets into one are offsets into the other.
func blankComments(dst, b []byte, single, short bool) ([]byte, bool) {
	if !bytes.Contains(b, []byte("/*")) && !bytes.Contains(b, []byte("//")) && bytes.IndexByte(b, '#') < 0 &&
		(!single || !hasOddSpace(b)) {
		return dst, false
	}
	start := len(dst)
	found := false
	var quote byte // the open string's quote, 0 outside strings
	for i := 0; i < len(b); i++ {
		c := b[i]
		if quote != 0 {
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
			continue
		}
		if c == '"' || single && c == '\'' {
			quote = c
			continue
		}
		end := commentEnd(b, i, short)
		if end == i && single {
			end += oddSpace(b, i)
		}
		if end == i {
			continue
		}
		if !found {
			dst, found = append(dst, b...), true
		}
		for k := i; k < end; k++ {
			dst[start+k] = ' '
		}
		i = end - 1
	}
	return dst, found
}

// oddSpace returns the length of the whitespace at i that JSON has not but
// JSON5 or Python's str.strip (which backends call before parsing) skips:
// vertical tab, form feed, the separators 0x1C to 0x1F, and the non-ASCII
// spaces (NEL, no-break space, U+2028 and the like, which unicode.IsSpace
// lists) and U+FEFF; 0 when there is none.
func oddSpace(b []byte, i int) int {
	switch c := b[i]; {
	case c == '\v' || c == '\f' || 0x1C <= c && c <= 0x1F:
		return 1
	case c >= utf8.RuneSelf:
		if r, n := utf8.DecodeRune(b[i:]); unicode.IsSpace(r) || r == '\uFEFF' {
			return n
		}
	}
	return 0
}

// hasOddSpace reports whether b holds whitespace that oddSpace finds.
func hasOddSpace(b []byte) bool {
	for i := range b {
		if oddSpace(b, i) > 0 {
			return true
		}
	}
	return false
}

// commentEnd returns the end of the comment at i, as blankComments reads
// it, or i when none starts there.
func commentEnd(b []byte, i int, short bool) int {
	open := comment(b, i)
	switch {
	case open == 0:
		return i
	case open == 2 && b[i+1] == '*':
		if j := bytes.Index(b[i+2:], []byte("*/")); j >= 0 {
			return i + 2 + j + 2
		}
		return len(b)
	}
	end := lineEnd(b, i+open, short)
	if end < len(b) && b[end] == 0xE2 {
		end += 3 // U+2028 or U+2029, whitespace to JSON5, which ends the comment there
	}
	return end
}

// json5Syntax reports whether b, outside its comments, has syntax that
// only the single reading reads (see Request.Parse): an escape in a
// string that JSON5 reads otherwise (see json5Escape), a backslash outside
// strings (an escape in an unquoted key), or whitespace oddSpace finds.
func json5Syntax(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					if _, n := json5Escape(b[i:]); n > 0 {
						return true
					}
					i++
				}
			}
		case c == '\\':
			return true
		case comment(b, i) > 0:
			i = commentEnd(b, i, true) - 1
		case oddSpace(b, i) > 0:
			return true
		}
	}
	return false
}

// lineEnd returns the index of the end of the line that holds b[i]: of
// its \n, or with short of its first \n, \r, U+2028 or U+2029 (where
// Jackson and JSON5 end a line comment); len(b) when it has none.
func lineEnd(b []byte, i int, short bool) int {
	if !short {
		if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
			return i + j
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case '\n', '\r':
			return i
		case 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
				return i
			}
		}
	}
	return len(b)
}

// scanString scans the string whose opening quote is at i. Its raw contents
// are b[i+1:end-1]. flagEscape is exact; flagHigh may be set spuriously, so
// it only promises that a string without it is ASCII.
func scanString(b []byte, i int) (end int, flags uint8) {
	i++
	var seen uint64 // OR of the words scanned, for flagHigh
	for {
		// Eight bytes at a time until one is a quote, a backslash or a
		// control byte: m gets the high bit of each byte whose
		// subtraction borrows, and bytes >= 0x80 never borrow.
		for i <= len(b)-8 {
			x := binary.LittleEndian.Uint64(b[i:])
			seen |= x
			special := ((x ^ quotes) - ones) | ((x ^ slashs) - ones) | (x - spaces)
			if m := special &^ x & highs; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return -1, flags
		}
		switch c := b[i]; {
		case c == '"':
			if seen&highs != 0 {
				flags |= flagHigh
			}
			return i + 1, flags
		case c == '\\':
			flags |= flagEscape
			if i+1 >= len(b) {
				return -1, flags
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// cJSON and gjson read on past a \u without four hex
				// digits: a soft error, read as the \q below.
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					flags |= flagLenient
					i += 2
					break
				}
				i += 6
			default:
				// Ruby's json gem (before 2.10) drops the backslash of
				// an unknown escape: a soft error, read its way.
				if b[i+1] < ' ' {
					return -1, flags
				}
				flags |= flagLenient
				i += 2
			}
		case c < ' ':
			// kotlinx.serialization (the Kotlin SDK) takes a raw control
			// byte in a string as any other: a soft error, read on.
			flags |= flagLenient
			i++
		default: // in the last 7 bytes
			if c >= 0x80 {
				flags |= flagHigh
			}
			i++
		}
	}
}

// scanQuoted scans the string whose opening quote, " or ', is at i, in the
// reading that takes '...' for strings, as Jackson does with
// ALLOW_SINGLE_QUOTES and JSON5 too: escapes as in JSON, \' among them, a
// backslash before a line break (JSON5's line continuation, see
// json5Escape), and any other byte as itself up to the closing quote. Its
// raw contents are b[i+1:end-1]; the flags are scanString's, with
// flagLenient, as it is no JSON.
func scanQuoted(b []byte, i int) (end int, flags uint8) {
	quote := b[i]
	flags = flagLenient
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == quote:
			return i + 1, flags
		case c == '\\':
			flags |= flagEscape
			if i+1 >= len(b) || b[i+1] < ' ' && b[i+1] != '\n' && b[i+1] != '\r' {
				return -1, flags
			}
			if b[i+1] == 'u' && hex4At(b, i+2) {
				i += 4
			}
			i++
		case c >= 0x80:
			flags |= flagHigh
		}
	}
	return -1, flags
}

// hex4At reports whether b holds four hex digits at i.
func hex4At(b []byte, i int) bool {
	return i+4 <= len(b) && isHex(b[i]) && isHex(b[i+1]) && isHex(b[i+2]) && isHex(b[i+3])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanNumber scans a number per RFC 8259 at i.
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// literal scans lit at i.
func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanner holds the state of one scan beyond the current index. Scanning
// never recurses; skipValue keeps its own stack.
type scanner struct {
	depth int      // open containers outside skipValue
	stack []uint64 // skipValue's open containers, one bit each: 1 = object
	soft  bool     // not strict JSON, but scanning went on
	// single makes '...' a string (see scanQuoted), and a JSON5
	// identifier with escapes a key (see keyEnd): set for the reading of an invalid
	// body as Jackson with ALLOW_SINGLE_QUOTES and JSON5 read it (see
	// Request.Parse).
	single bool
}

// quoted scans the string whose opening quote is at i: a JSON string, or
// in the single reading one in " or ' (see scanQuoted).
func (s *scanner) quoted(b []byte, i int) (end int, flags uint8) {
	if s.single {
		return scanQuoted(b, i)
	}
	return scanString(b, i)
}

// keyEnd returns the end of the unquoted key at i (i itself when b[i]
// cannot start one) and whether it holds escapes: bare bytes, and with
// json5 \uXXXX escapes too, which JSON5 allows in identifiers.
func keyEnd(b []byte, i int, json5 bool) (end int, escaped bool) {
	for {
		i = bareEnd(b, i)
		if !json5 || i+2 > len(b) || b[i] != '\\' || b[i+1] != 'u' || !hex4At(b, i+2) {
			return i, escaped
		}
		i, escaped = i+6, true
	}
}

// enter opens a container outside skipValue: a batch, a message or its
// params, so at most three deep; skipValue bounds the depth below them.
func (s *scanner) enter() {
	s.depth++
}

// lenientString makes a string JSON has not (flagLenient) a soft error.
func (s *scanner) lenientString(flags uint8) {
	if flags&flagLenient != 0 {
		s.soft = true
	}
}

// bare reports whether c may be part of an unquoted string, which lenient
// parsers read as a string (kotlinx.serialization's isLenient, which the
// Kotlin MCP SDK sets): any byte but a control byte, a space, a quote, a
// backslash and the structural bytes ,:{}[].
func bare(c byte) bool { return bareBytes[c] }

// bareBytes is bare as a table.
var bareBytes = func() (t [256]bool) {
	for c := '!'; c < 256; c++ {
		t[c] = !strings.ContainsRune(`"\\,:{}[]`, c)
	}
	return t
}()

// bareEnd returns the end of the unquoted string at i (i itself when b[i]
// cannot start one).
func bareEnd(b []byte, i int) int {
	for i < len(b) && bare(b[i]) {
		i++
	}
	return i
}

// scalar scans the string, number or literal at i; c is b[i]. NaN,
// Infinity and -Infinity, which Python accepts, are soft errors, and so
// is an unquoted string (see unquoted).
func (s *scanner) scalar(b []byte, i int, c byte) int {
	var end int
	switch c {
	case '"':
		end, flags := s.quoted(b, i)
		s.lenientString(flags)
		return end
	case '\'':
		if s.single {
			end, flags := s.quoted(b, i)
			s.lenientString(flags)
			return end
		}
		end = -1 // an unquoted string, below
	case 't':
		end = literal(b, i, "true")
	case 'f':
		end = literal(b, i, "false")
	case 'n':
		end = literal(b, i, "null")
	case 'N':
		s.soft = true
		end = literal(b, i, "NaN")
	case 'I':
		s.soft = true
		end = literal(b, i, "Infinity")
	case '-':
		if i+1 < len(b) && b[i+1] == 'I' {
			s.soft = true
			end = literal(b, i, "-Infinity")
			break
		}
		end = scanNumber(b, i)
	default:
		end = scanNumber(b, i)
	}
	if end < 0 || end < len(b) && bare(b[end]) {
		if e := s.unquoted(b, i); e > i {
			return e
		}
	}
	return end
}

// unquoted returns the end of the unquoted string at i, which lenient
// parsers accept (see bare), or i when b[i] cannot start one. It is called
// where strict scanning of a number or literal failed or stopped inside
// one, and is a soft error.
func (s *scanner) unquoted(b []byte, i int) int {
	e := bareEnd(b, i)
	if e > i {
		s.soft = true
	}
	return e
}

// jsonScalar reports whether v is a JSON number or literal.
func jsonScalar(v []byte) bool {
	switch string(v) {
	case "true", "false", "null":
		return true
	}
	return len(v) > 0 && scanNumber(v, 0) == len(v)
}

// noColon returns the index of the value of a member whose key, ending
// before i, is not followed by a colon, or -1. After a quoted key it is a
// soft error: gjson, which backends use to pick a member out of a body
// without parsing it, reads "method" "tools/call" as a member.
func (s *scanner) noColon(b []byte, i int, quoted bool) int {
	if !quoted || i >= len(b) || b[i] == ',' || b[i] == '}' || b[i] == ']' {
		return -1
	}
	s.soft = true
	return i
}

// missingComma reports whether c, found where a comma or a closing
// bracket should be, starts another member (a quoted key) or element (an
// object or an array) instead: a missing comma, a soft error, which gjson
// reads past as it does a missing colon.
func (s *scanner) missingComma(c byte) bool {
	if c != '"' && c != '{' && c != '[' {
		return false
	}
	s.soft = true
	return true
}

// setKind records whether the container at skipValue level n is an object.
func (s *scanner) setKind(n int, object bool) {
	w := n >> 6
	for len(s.stack) <= w {
		s.stack = append(s.stack, 0)
	}
	bit := uint64(1) << (n & 63)
	if object {
		s.stack[w] |= bit
	} else {
		s.stack[w] &^= bit
	}
}

// kind reports whether the container at skipValue level n is an object.
func (s *scanner) kind(n int) bool {
	return s.stack[n>>6]&(1<<(n&63)) != 0
}

// skipValue scans and validates one value of any depth at i (after
// whitespace), without recursion.
func (s *scanner) skipValue(b []byte, i int) int {
	n := 0           // containers opened here and not yet closed
	inObj := false   // whether the innermost of them is an object
	needKey := false // whether an object key comes before the next value
	for {
		// i is after whitespace, at a key or a value.
		if i >= len(b) {
			return -1
		}
		if needKey && b[i] != '}' { // a '}' here follows a comma: see below
			k0 := i
			if b[i] == '"' || s.single && b[i] == '\'' {
				var flags uint8
				if s.single {
					i, flags = scanQuoted(b, i)
				} else {
					i, flags = scanString(b, i)
				}
				s.lenientString(flags)
			} else if e, _ := keyEnd(b, i, s.single); e > i {
				s.soft, i = true, e
			} else {
				return -1
			}
			if i < 0 {
				return -1
			}
			if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
				if i = s.noColon(b, i, b[k0] == '"' || s.single && b[k0] == '\''); i < 0 {
					return -1
				}
			} else if i = skipWS(b, i+1); i >= len(b) {
				return -1
			}
		}
		switch c := b[i]; c {
		case '"':
			var flags uint8
			if s.single {
				i, flags = scanQuoted(b, i)
			} else {
				i, flags = scanString(b, i)
			}
			if i < 0 {
				return -1
			}
			s.lenientString(flags)
		case '{', '[':
			inObj = c == '{'
			s.setKind(n, inObj)
			n++
			if s.depth+n > MaxDepth {
				s.soft = true
			}
			if i = skipWS(b, i+1); i >= len(b) {
				return -1
			}
			if b[i] != c+2 { // not empty: '}' is '{'+2, ']' is '['+2
				needKey = inObj
				continue
			}
			i++
			n--
			if n > 0 {
				inObj = s.kind(n - 1)
			}
		case '}', ']', ',':
			// Where a key or a value should be: after a comma, a
			// trailing one, or in an array a missing element (null),
			// which Jackson reads with ALLOW_TRAILING_COMMA and
			// ALLOW_MISSING_VALUES (JSON5 the first). The loop below
			// reads on from here.
			if n == 0 || (c == '}') != inObj || c == ',' && inObj {
				return -1
			}
			s.soft = true
		default:
			if i = s.scalar(b, i, c); i < 0 {
				return -1
			}
		}
		// A value ended: close containers until one continues.
		for {
			if n == 0 {
				return i
			}
			if i = skipWS(b, i); i >= len(b) {
				return -1
			}
			c := b[i]
			if c == ',' {
				i = skipWS(b, i+1)
				needKey = inObj
				break
			}
			if inObj && c != '}' || !inObj && c != ']' {
				if !s.missingComma(c) {
					return -1
				}
				needKey = inObj
				break
			}
			i++
			n--
			if n > 0 {
				inObj = s.kind(n - 1)
			}
		}
	}
}
