package jsonrpc

import "unicode/utf8"

// Parse inspects body. It never fails: a body that is not valid JSON makes
// Valid report false, and what could be scanned of it still counts in Cost.
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
	b := body
	i := 0
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		i = 3
	}
	if i = skipWS(b, i); i == len(b) {
		return // empty: invalid
	}
	r.kind, i = r.topValue(b, i)
	// More values after the first: invalid, but a streaming decoder may
	// read them all, so they are charged too.
	for i >= 0 {
		if i = skipWS(b, i); i == len(b) {
			break
		}
		r.s.soft = true
		_, i = r.topValue(b, i)
	}
	r.valid = i >= 0 && !r.s.soft
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

// beginEntry counts a new entry and, for an object, opens its record,
// whose readings start at the current ends of the reading lists.
func (r *Request) beginEntry(object bool) {
	idx := r.count
	r.count++
	w := idx >> 6
	for len(r.objBits) <= w {
		r.objBits = append(r.objBits, 0)
	}
	if !object {
		return
	}
	r.objects++
	r.objBits[w] |= 1 << (idx & 63)
	r.entries = append(r.entries, Entry{
		r:       r,
		object:  true,
		index:   int32(idx),
		methods: span{lo: int32(len(r.methods))},
		tools:   span{lo: int32(len(r.tools))},
		args:    span{lo: int32(len(r.args))},
	})
}

// endEntry closes the record opened last: its readings end at the current
// ends of the lists. A record without readings or id is dropped; Entry
// returns a shared blank one instead.
func (r *Request) endEntry() {
	e := &r.entries[len(r.entries)-1]
	e.methods.hi, e.tools.hi, e.args.hi = int32(len(r.methods)), int32(len(r.tools)), int32(len(r.args))
	if !e.hasID && e.methods.lo == e.methods.hi && e.tools.lo == e.tools.hi && e.args.lo == e.args.hi {
		*e = Entry{}
		r.entries = r.entries[:len(r.entries)-1]
	}
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
		if b[i] == '{' {
			i = r.message(b, i)
		} else {
			r.beginEntry(false)
			i = s.skipValue(b, i)
		}
		if i = r.next(b, i, ']'); i <= 0 {
			return ^i
		}
	}
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
	return ^-1
}

// member scans the key and colon of an object member at i and returns the
// key's raw contents, its scanString flags and the index of the value
// (after whitespace), or -1.
func member(b []byte, i int) (k []byte, flags uint8, value int) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, -1
	}
	end, flags := scanString(b, i)
	if end < 0 {
		return nil, 0, -1
	}
	k = b[i+1 : end-1]
	if i = skipWS(b, end); i >= len(b) || b[i] != ':' {
		return nil, 0, -1
	}
	if i = skipWS(b, i+1); i >= len(b) {
		return nil, 0, -1
	}
	return k, flags, i
}

// Keys that matter in messages and in params.
const (
	keyOther = iota
	keyMethod
	keyParams
	keyID
	keyName
	keyArguments
)

// messageKey classifies a member key of a message.
func (r *Request) messageKey(k []byte, flags uint8) int {
	if flags == 0 {
		if len(k) > 0 {
			switch k[0] | 0x20 {
			case 'm':
				if string(k) == "method" || asciiKeyIs(k, "method") {
					return keyMethod
				}
			case 'p':
				if string(k) == "params" || asciiKeyIs(k, "params") {
					return keyParams
				}
			case 'i':
				if string(k) == "id" || asciiKeyIs(k, "id") {
					return keyID
				}
			}
		}
		return keyOther
	}
	k = decodeKey(k, flags, &r.scratch)
	switch {
	case equalFold(k, "method"):
		return keyMethod
	case equalFold(k, "params"):
		return keyParams
	case equalFold(k, "id"):
		return keyID
	}
	return keyOther
}

// paramsKey classifies a member key of params.
func (r *Request) paramsKey(k []byte, flags uint8) int {
	if flags == 0 {
		if len(k) > 0 {
			switch k[0] | 0x20 {
			case 'n':
				if string(k) == "name" || asciiKeyIs(k, "name") {
					return keyName
				}
			case 'a':
				if string(k) == "arguments" || asciiKeyIs(k, "arguments") {
					return keyArguments
				}
			}
		}
		return keyOther
	}
	k = decodeKey(k, flags, &r.scratch)
	switch {
	case equalFold(k, "name"):
		return keyName
	case equalFold(k, "arguments"):
		return keyArguments
	}
	return keyOther
}

// parseMessage parses the object at i into the last record.
func (r *Request) parseMessage(b []byte, i int) int {
	s := &r.s
	s.enter()
	if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		s.depth--
		return i + 1
	}
	for {
		k, flags, v := member(b, i)
		if v < 0 {
			return -1
		}
		switch r.messageKey(k, flags) {
		case keyMethod:
			if b[v] == '"' {
				r.methods, i = r.appendText(r.methods, b, v)
			} else {
				i = s.skipValue(b, v)
			}
		case keyParams:
			if b[v] == '{' {
				i = r.parseParams(b, v)
			} else {
				i = s.skipValue(b, v)
			}
		case keyID:
			if i = s.skipValue(b, v); i >= 0 {
				e := &r.entries[len(r.entries)-1]
				e.id = span{int32(v), int32(i)}
				e.hasID = true
			}
		default:
			i = s.skipValue(b, v)
		}
		if i = r.next(b, i, '}'); i <= 0 {
			return ^i
		}
	}
}

// parseParams parses the params object at i.
func (r *Request) parseParams(b []byte, i int) int {
	s := &r.s
	s.enter()
	if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		s.depth--
		return i + 1
	}
	for {
		k, flags, v := member(b, i)
		if v < 0 {
			return -1
		}
		switch r.paramsKey(k, flags) {
		case keyName:
			if b[v] == '"' {
				r.tools, i = r.appendText(r.tools, b, v)
			} else {
				i = s.skipValue(b, v)
			}
		case keyArguments:
			if i = s.skipValue(b, v); i >= 0 && b[v] == '{' {
				r.args = append(r.args, span{int32(v), int32(i)})
			}
		default:
			i = s.skipValue(b, v)
		}
		if i = r.next(b, i, '}'); i <= 0 {
			return ^i
		}
	}
}

// appendText scans the string at i and appends it to list as a reading,
// decoded into the arena if it has escapes or invalid UTF-8.
func (r *Request) appendText(list []text, b []byte, i int) ([]text, int) {
	end, flags := scanString(b, i)
	if end < 0 {
		return list, -1
	}
	raw := b[i+1 : end-1]
	if flags&flagEscape != 0 || flags&flagHigh != 0 && !utf8.Valid(raw) {
		lo := len(r.arena)
		r.arena = appendUnquoted(r.arena, raw)
		return append(list, text{lo, len(r.arena), true}), end
	}
	return append(list, text{i + 1, end - 1, false}), end
}
