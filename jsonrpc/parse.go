package jsonrpc

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// Parse inspects body. It never fails: a body that is not valid JSON makes
// Valid report false, and what could be scanned of it still counts in Cost.
//
// An invalid body may be read more ways than one scan can follow, so it is
// read again each such way (every reading's entries are in Scanned, and
// the reading that costs most is the cost):
//
//   - with its comments blanked out: /* */ and // comments, which Ruby's
//     json gem (the Ruby MCP SDK's parser) and Jackson with ALLOW_COMMENTS
//     read as whitespace, and # ones (Jackson's ALLOW_YAML_COMMENTS). A
//     line comment ends at \n for the json gem, and at \r too for Jackson
//     (and at U+2028 and U+2029 for JSON5), so when that makes a
//     difference it is read both ways;
//   - with '...' as strings, as Jackson with ALLOW_SINGLE_QUOTES and JSON5
//     read them (its comments blanked out minding those strings), and the
//     rest of JSON5 besides: its whitespace (see oddSpace), the \x, \v
//     and \0 escapes and line continuations in strings (read both as
//     JSON5 and as Jackson reads them, see json5Escape), and \u escapes
//     in unquoted keys. A body is read so when it has a quote or such
//     syntax outside its comments (see json5Syntax);
//   - as Hjson reads it (see hjsonJSON), when it does: members separated
//     by line breaks, keys and strings without quotes, multiline strings;
//     and, for a body holding a NUL (or U+0085 or U+FEFF), once more as
//     hjson-go reads it, to which a NUL ends the input;
//   - as a form, as Express's extended form parser reads it (see
//     formJSON), when it holds a field.
//
// The first reading is still needed: to a lenient reading of unquoted
// strings (kotlinx.serialization's) a//b holds no comment, and a quote is
// any other byte ({x:it's,...}).
//
// Parse keeps a reference to body, and IDs and strings handed out later
// alias it, until the next Reset (or PutRequest, or Parse). The caller must
// neither modify body nor release its buffer before then.
func (r *Request) Parse(body []byte) {
	r.Reset()
	r.blank = [2]Entry{{r: r}, {r: r, object: true}}
	if len(body) > maxBody {
		return // invalid
	}
	r.body = body
	if r.kind, r.valid = r.scan(body); r.valid {
		return
	}
	if long, ok := blankComments(r.copies[0][:0], body, false, false); ok {
		r.copies[0] = long
		r.read(long, false)
		if short, _ := blankComments(r.copies[1][:0], body, false, true); !bytes.Equal(short, long) {
			r.copies[1] = short
			r.read(short, false)
		}
	}
	if bytes.IndexByte(body, '\'') >= 0 || json5Syntax(body) {
		quoted := body
		if c, ok := blankComments(r.copies[2][:0], body, true, true); ok {
			r.copies[2], quoted = c, c
		}
		r.read(quoted, true)
	}
	text, ok := hjsonJSON(r.altText[0][:0], body, false)
	r.readAs(0, text, ok)
	if bytes.IndexByte(body, 0) >= 0 || bytes.Contains(body, nel) || bytes.Contains(body, bom) {
		text, ok = hjsonJSON(r.altText[1][:0], body, true) // hjson-go reads such bodies otherwise
		r.readAs(1, text, ok)
	}
	text, ok = formJSON(r.altText[2][:0], body)
	r.readAs(2, text, ok)
}

// nel and bom are U+0085 and U+FEFF in UTF-8: after true, false or null,
// hjson-go reads the first as whitespace and hjson-js the second.
var nel, bom = []byte("\u0085"), []byte("\uFEFF")

// readAs reads text, the JSON another parser reads the body as (see
// Parse), into r.alt[i], when ok says that parser reads it at all.
func (r *Request) readAs(i int, text []byte, ok bool) {
	if !ok {
		return
	}
	r.altText[i] = text
	if r.alt[i] == nil {
		r.alt[i] = new(Request)
	}
	r.alt[i].Parse(text)
	r.altCount += r.alt[i].count
}

// read scans b, a further reading of the body (see Parse), with '...' as
// strings when single.
func (r *Request) read(b []byte, single bool) {
	r.readings = append(r.readings, reading{b: b, single: single, entries: len(r.entries), args: len(r.args)})
	r.s.depth, r.s.single = 0, single
	r.scan(b)
	r.s.single = false
}

// scan reads b, the body or its copy with comments blanked out (whose
// readings are byte ranges of the body as well: none holds a blanked
// byte), adding its entries to r. It returns the kind of the first value
// and whether b is valid JSON.
func (r *Request) scan(b []byte) (kind uint8, valid bool) {
	i := 0
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		i = 3
	}
	if i = skipWS(b, i); i == len(b) {
		return kindNone, false // empty: invalid
	}
	kind, i = r.topValue(b, i)
	// More values after the first: invalid, but a streaming decoder may
	// read them all, so they are charged too.
	for i >= 0 {
		if i = skipWS(b, i); i == len(b) {
			break
		}
		r.s.soft = true
		_, i = r.topValue(b, i)
	}
	return kind, i >= 0 && !r.s.soft
}

// topValue parses one top-level value at i and returns its kind.
func (r *Request) topValue(b []byte, i int) (kind uint8, end int) {
	switch b[i] {
	case '{':
		return kindObject, r.message(b, i)
	case '[':
		return kindArray, r.parseBatch(b, i)
	}
	return kindOther, r.s.skipValue(b, i)
}

// message parses the object at i as a new entry.
func (r *Request) message(b []byte, i int) int {
	r.beginEntry(true)
	i = r.parseMessage(b, i)
	r.endEntry()
	return i
}

// parseBatch parses the array at i; each element is an entry.
func (r *Request) parseBatch(b []byte, i int) int {
	s := &r.s
	s.enter()
	if i = skipWS(b, i+1); i < len(b) && b[i] == ']' {
		s.depth--
		return i + 1
	}
	for {
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '{':
			i = r.message(b, i)
		case '[':
			i = r.wrappedMessage(b, i)
		case ',': // a missing element (see skipValue): an entry, null
			s.soft = true
			r.beginEntry(false)
		case ']': // after a trailing comma (see skipValue)
			s.soft = true
			s.depth--
			return i + 1
		default:
			r.beginEntry(false)
			i = s.skipValue(b, i)
		}
		if i = r.next(b, i, ']'); i <= 0 {
			return ^i
		}
	}
}

// wrappedMessage scans the array at i, an element of a batch. Jackson
// with UNWRAP_SINGLE_VALUE_ARRAYS, reading a batch as a list of messages,
// reads [{...}] as the message inside (one level deep), so its first
// element, an object, is parsed as the entry's message.
func (r *Request) wrappedMessage(b []byte, i int) int {
	end := r.s.skipValue(b, i)
	// Read as far as the body goes, as an entry's object is.
	if j := unwrapped(b, i); j < len(b) && b[j] == '{' {
		r.message(b, j)
	} else {
		r.beginEntry(false)
	}
	return end
}

// next scans the separator after a member or element at i. If another
// member or element follows, it returns its index (after whitespace).
// Otherwise it returns ^end, where end is the index after the closing
// byte, or ^-1 on error; so a result <= 0 means stop and return ^result.
func (r *Request) next(b []byte, i int, closing byte) int {
	if i < 0 {
		return ^-1
	}
	if i = skipWS(b, i); i >= len(b) {
		return ^-1
	}
	switch b[i] {
	case ',':
		return skipWS(b, i+1)
	case closing:
		r.s.depth--
		return ^(i + 1)
	}
	if r.s.missingComma(b[i]) {
		return i
	}
	return ^-1
}

// member scans the key and colon of an object member at i and returns the
// key's raw contents, its scanString flags and the index of the value
// (after whitespace), or -1. An unquoted key (see bare) is a soft error.
func (s *scanner) member(b []byte, i int) (k []byte, flags uint8, value int) {
	if i >= len(b) {
		return nil, 0, -1
	}
	var end int
	quoted := b[i] == '"' || s.single && b[i] == '\''
	if quoted {
		if s.single {
			end, flags = scanQuoted(b, i)
		} else {
			end, flags = scanString(b, i)
		}
		if end < 0 {
			return nil, 0, -1
		}
		s.lenientString(flags)
		k = b[i+1 : end-1]
	} else {
		var escaped bool
		if end, escaped = keyEnd(b, i, s.single); end == i {
			return nil, 0, -1
		}
		s.soft = true
		k, flags = b[i:end], flagHigh // may be non-ASCII: the folding path
		if escaped {
			flags |= flagEscape
		}
	}
	if i = skipWS(b, end); i >= len(b) || b[i] != ':' {
		if i = s.noColon(b, i, quoted); i < 0 {
			return nil, 0, -1
		}
	} else if i = skipWS(b, i+1); i >= len(b) {
		return nil, 0, -1
	}
	return k, flags, i
}

// trailingComma returns the end of the object whose member at i, after a
// comma, could not be read: just past it when b[i] closes it (a trailing
// comma, see skipValue), else -1.
func (s *scanner) trailingComma(b []byte, i int) int {
	if i < len(b) && b[i] == '}' {
		s.soft = true
		s.depth--
		return i + 1
	}
	return -1
}

// parseMessage parses the object at i into the last record. The members
// of a __proto__ object in it are read as its own (see protoOpens).
func (r *Request) parseMessage(b []byte, i int) int {
	s := &r.s
	s.enter()
	if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		s.depth--
		return i + 1
	}
	protos := 0 // __proto__ objects open
	for {
		k, flags, v := s.member(b, i)
		if v < 0 {
			if i = r.protoClosed(b, s.trailingComma(b, i), &protos); i <= 0 {
				return ^i
			}
			continue
		}
		switch key := r.messageKey(k, flags); key {
		case keyMethod:
			r.methods, i = r.appendText(r.methods, b, v, false)
		case keyParams:
			switch b[v] {
			case '{':
				i = r.parseParams(b, v)
			case '[':
				// Read as far as the body goes, as a params object
				// is: a truncated call costs its tool.
				i = s.skipValue(b, v)
				r.arrayParams(b, v)
			default:
				i = s.skipValue(b, v)
			}
		case keyID, keyFoldedID:
			if i = s.skipValue(b, v); i >= 0 && protos == 0 { // an own id shadows the prototype's
				e := &r.entries[len(r.entries)-1]
				if key == keyID || !e.exactID {
					e.id, e.exactID = span{int32(v), int32(i)}, key == keyID
				}
				e.hasID = true
			}
		case keyAnswer:
			i = s.skipValue(b, v)
			r.entries[len(r.entries)-1].answer = r.entries[len(r.entries)-1].answer || protos == 0
		case keyProto:
			if r.protoOpens(b, v) {
				protos, i = protos+1, skipWS(b, v+1)
				continue
			}
			i = s.skipValue(b, v)
		default:
			i = s.skipValue(b, v)
		}
		if i = r.next(b, i, '}'); i <= 0 {
			if i = r.protoClosed(b, ^i, &protos); i <= 0 {
				return ^i
			}
		}
	}
}

// protoOpens reports whether the value at i of a __proto__ member is an
// object with members, and if so enters it. Parsers that build objects by
// assignment (hjson, VS Code's jsonc-parser) make such an object the
// prototype of the one around it, whose lookups then find its members, and
// the TypeScript SDK copies those into the message it runs: they are read
// as members of the object around it.
func (r *Request) protoOpens(b []byte, i int) bool {
	if b[i] != '{' {
		return false
	}
	if j := skipWS(b, i+1); j >= len(b) || b[j] == '}' {
		return false
	}
	r.s.enter()
	return true
}

// protoClosed takes the end (or -1) of an object that closed in
// parseMessage or parseParams, with protos __proto__ objects open. When
// it was one of those, the object around it goes on: the result is the
// index of its next member, or ^end when it closes too (<= 0, as next's).
func (r *Request) protoClosed(b []byte, end int, protos *int) int {
	for end >= 0 && *protos > 0 {
		*protos--
		i := r.next(b, end, '}')
		if i > 0 {
			return i
		}
		end = ^i
	}
	return ^end
}

// parseParams parses the params object at i.
func (r *Request) parseParams(b []byte, i int) int {
	s := &r.s
	s.enter()
	if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		s.depth--
		return i + 1
	}
	protos := 0 // __proto__ objects open (see protoOpens)
	for {
		k, flags, v := s.member(b, i)
		if v < 0 {
			if i = r.protoClosed(b, s.trailingComma(b, i), &protos); i <= 0 {
				return ^i
			}
			continue
		}
		switch r.paramsKey(k, flags) {
		case keyName:
			r.tools, i = r.appendText(r.tools, b, v, true)
		case keyArguments:
			if i = s.skipValue(b, v); i >= 0 {
				if j := unwrapped(b, v); b[j] == '{' {
					r.args = append(r.args, span{int32(j), int32(i)})
				}
			}
		case keyProto:
			if r.protoOpens(b, v) {
				protos, i = protos+1, skipWS(b, v+1)
				continue
			}
			i = s.skipValue(b, v)
		default:
			i = s.skipValue(b, v)
		}
		if i = r.next(b, i, '}'); i <= 0 {
			if i = r.protoClosed(b, ^i, &protos); i <= 0 {
				return ^i
			}
		}
	}
}

// arrayParams reads the params array at i, scanned already (to its end,
// or as far as the body goes). Jackson with UNWRAP_SINGLE_VALUE_ARRAYS
// reads [{...}] as the object inside. A JSON-RPC dispatcher that passes
// params by position (JSON-RPC 2.0 allows an array) reads ["name", {...}]
// as a tools/call's name and arguments, and Jackson reads arguments given
// as [{...}] so too.
func (r *Request) arrayParams(b []byte, i int) {
	j := unwrapped(b, i)
	switch {
	case j >= len(b) || b[j] == ']':
		return
	case b[j] == '{':
		r.parseParams(b, j)
		return
	}
	var end int
	if r.tools, end = r.appendText(r.tools, b, j, true); end < 0 {
		return
	}
	k := skipWS(b, end)
	if k >= len(b) || b[k] != ',' {
		return
	}
	if k = skipWS(b, k+1); k < len(b) {
		k = unwrapped(b, k)
	}
	if k < len(b) && b[k] == '{' {
		if end = r.s.skipValue(b, k); end >= 0 {
			r.args = append(r.args, span{int32(k), int32(end)})
		}
	}
}

// appendText scans the value at i and appends it to list as a reading
// when it is a string, decoded into the arena if it has escapes or invalid
// UTF-8 (twice when it has an overlong sequence: as Go and as Jackson read
// it), or an unquoted string, which lenient parsers read as one. With
// scalars, a number or a boolean is a reading too, as its text: Jackson
// (the Java SDK) reads "name":7 as the tool "7". An array's first element
// is read so too: Jackson with UNWRAP_SINGLE_VALUE_ARRAYS reads ["x"] as
// "x" (and refuses more elements, which are no reading either way).
func (r *Request) appendText(list []text, b []byte, i int, scalars bool) ([]text, int) {
	if c := b[i]; c != '"' && (c != '\'' || !r.s.single) {
		end := r.s.skipValue(b, i)
		if c == '[' && end > i {
			// Jackson with UNWRAP_SINGLE_VALUE_ARRAYS reads ["x"] as "x",
			// and JavaScript's String() [["x"]] as "x" too (a lookup
			// such as tools[params.name] converts its key so).
			j := unwrapped(b, i)
			for b[j] == '[' {
				j = unwrapped(b, j)
			}
			if b[j] != '{' && b[j] != ']' {
				list, _ = r.appendText(list, b, j, scalars)
			}
		} else if c != '{' && end > i && (!jsonScalar(b[i:end]) || scalars && c != 'n') {
			list = append(list, text{i, end, false})
		}
		return list, end
	}
	var end int
	var flags uint8
	if r.s.single {
		end, flags = scanQuoted(b, i)
	} else {
		end, flags = scanString(b, i)
	}
	if end < 0 {
		return list, -1
	}
	r.s.lenientString(flags)
	raw := b[i+1 : end-1]
	if flags&flagEscape != 0 || flags&flagHigh != 0 && !utf8.Valid(raw) {
		list = r.appendDecoded(list, raw, 0)
		if flags&flagHigh != 0 && hasOverlong(raw) { // Jackson's reading
			list = r.appendDecoded(list, raw, decodeOverlong)
		}
		if flags&flagHigh != 0 && hasSubpart(raw) { // JavaScript's and Python's
			list = r.appendDecoded(list, raw, decodeSubparts)
		}
		if r.s.single && flags&flagEscape != 0 && hasJSON5Escape(raw) { // JSON5's
			list = r.appendDecoded(list, raw, decodeJSON5)
		}
		return list, end
	}
	list = append(list, text{i + 1, end - 1, false})
	if flags&flagLenient != 0 { // a raw control byte: a NUL, perhaps
		list = appendBeforeNUL(list, raw, i+1, false)
	}
	return list, end
}

// appendDecoded appends to list the reading of the raw string contents
// decoded in the given mode (see appendUnquoted) into the arena.
func (r *Request) appendDecoded(list []text, raw []byte, mode uint8) []text {
	lo := len(r.arena)
	// At most three bytes for each of raw's (an invalid byte is U+FFFD):
	// grown once, not by a quarter at a time.
	r.arena = appendUnquoted(slices.Grow(r.arena, 3*len(raw)), raw, mode)
	list = append(list, text{lo, len(r.arena), true})
	return appendBeforeNUL(list, r.arena[lo:], lo, true)
}

// appendBeforeNUL appends to list, when the string s (at lo in the body or
// the arena) holds a NUL, its part before the NUL: the string as C parsers
// (cJSON) and code comparing it as a C string read it.
func appendBeforeNUL(list []text, s []byte, lo int, decoded bool) []text {
	if j := bytes.IndexByte(s, 0); j >= 0 {
		list = append(list, text{lo, lo + j, decoded})
	}
	return list
}

// unwrapped returns the index of the first element of the scanned array
// at i (its closing bracket when it is empty), or i when b[i] opens no
// array: where Jackson with UNWRAP_SINGLE_VALUE_ARRAYS reads the value.
func unwrapped(b []byte, i int) int {
	if b[i] != '[' {
		return i
	}
	return skipWS(b, i+1)
}
