package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// formJSON appends to dst the body b as a form (application/x-www-form-
// urlencoded) reads as qs 6 reads it, written as JSON, and reports whether
// b holds a field at all. qs is the parser of Express's
// express.urlencoded({extended: true}) (body-parser's extended form
// parser), which builds nested objects from bracketed keys: an Express
// app that parses forms so for every route, with the TypeScript SDK
// handed req.body, runs
//
//	jsonrpc=2.0&id=1&method=tools/call&params[name]=photo&params[arguments][limit]=500
//
// as a call of photo when the request's Content-Type names
// application/json (the check of SDK releases that look for it as a
// substring, which a parameter such as
// `application/x-www-form-urlencoded; x="application/json"` passes), a
// body no JSON reading finds a call in. As qs reads it, the body is split at
// each &, %5B and %5D are brackets first, a field's key ends at its first
// "]=" (after the bracket) or else at its first "=", a field without
// "=" is an empty string, + is a space, and a %-escape that is not UTF-8
// leaves its field's key or value undecoded. A key is a name followed by
// [segments] (qs skips the text between them, and a key that starts with
// one has no name): each opens an object (see formReader.appendField for the
// arrays qs makes of some); a __proto__ segment ends its field's key
// with an empty object. Every other value is a string.
//
// Each field is written as a member of its own, so fields with one name
// are duplicate keys, as every JSON reading of the body already weighs
// them (qs merges them into one object or array): params[name] and
// params[arguments][limit] are one call's tool and argument, as they are
// of the one params object qs builds, and params[0] and params[1][limit]
// those of its params array.
//
// body-parser decodes the body with iconv-lite before qs reads it, which
// drops a leading UTF-8 BOM: the first field's key is read without it. A
// key with dots is also read as qs reads it with allowDots (see
// dotsAsBrackets), as a member of its own beside the first.
func formJSON(dst, b []byte) (out []byte, ok bool) {
	b = bytes.TrimPrefix(b, bom)
	// URLSearchParams (Hono's parseBody, through undici's formData) drops
	// a leading '?' as well; to qs it is part of the first key, which no
	// SDK reads.
	b = bytes.TrimPrefix(b, []byte{'?'})
	if bytes.IndexByte(b, '=') < 0 {
		return dst, false
	}
	var f formReader
	plain, dots := f.arrays(b)
	dst = append(jsonGrown(dst, b, 3), '{')
	var key, val, dotted []byte
	for field := range bytes.SplitSeq(b, []byte{'&'}) {
		k, v, hasValue := formField(field)
		key, val = formDecode(key[:0], k), val[:0]
		if hasValue {
			val = formDecode(val, v)
		}
		dst = f.appendField(dst, key, val, plain)
		if bytes.IndexByte(key, '.') >= 0 {
			// Koa's body parsers (co-body) set qs's allowDots, and
			// Hono's parseBody({dot: true}) nests at dots too: the
			// field is also the member they read.
			if dotted = dotsAsBrackets(dotted[:0], key); !bytes.Equal(dotted, key) {
				dst = f.appendField(dst, dotted, val, dots)
			}
		}
	}
	if len(dst) == 1 {
		return dst[:0], false
	}
	dst[len(dst)-1] = '}' // the last field's comma
	return dst, true
}

// dotsAsBrackets appends the decoded key as qs reads it with allowDots:
// each dot followed by text up to the next dot or '[' makes that text a
// segment (key.replace(/\.([^.[]+)/g, '[$1]')), so params.name is
// params[name] and params[arguments].limit is params[arguments][limit].
func dotsAsBrackets(dst, key []byte) []byte {
	dst = slices.Grow(dst, len(key)+len(key)/2) // a dot and a byte become 3
	for i := 0; i < len(key); i++ {
		end := i + 1
		for key[i] == '.' && end < len(key) && key[end] != '.' && key[end] != '[' {
			end++
		}
		if end == i+1 {
			dst = append(dst, key[i])
			continue
		}
		dst = append(dst, '[')
		dst = append(dst, key[i+1:end]...)
		dst = append(dst, ']')
		i = end - 1
	}
	return dst
}

// formField splits one field at the "=" qs ends its key at: the one
// after the first "]=" (with %5D read as a bracket), or else the first.
func formField(f []byte) (key, value []byte, hasValue bool) {
	eq := -1
	for i := range f {
		if n := closingAt(f, i); n > 0 && i+n < len(f) && f[i+n] == '=' {
			eq = i + n
			break
		}
	}
	if eq < 0 {
		eq = bytes.IndexByte(f, '=')
	}
	if eq < 0 {
		return f, nil, false
	}
	return f[:eq], f[eq+1:], true
}

// closingAt returns the length of the closing bracket at b[i] as qs
// reads it before decoding: ']' (1) or %5D in either case (3); 0 if there
// is none.
func closingAt(b []byte, i int) int {
	switch {
	case b[i] == ']':
		return 1
	case escapeAt(b, i) && b[i+1] == '5' && b[i+2]|0x20 == 'd':
		return 3
	}
	return 0
}

// escapeAt reports whether a %-escape with two hex digits starts at b[i].
func escapeAt(b []byte, i int) bool {
	return b[i] == '%' && i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2])
}

// formDecode appends s decoded as qs decodes a key or a value: + as a
// space, then %-escapes as JavaScript's decodeURIComponent reads them.
// Where that throws (a % without two hex digits, or a run of escapes that
// is not UTF-8), qs keeps the text with only its + replaced, and its %5B
// and %5D, which it replaced before anything else.
func formDecode(dst, s []byte) []byte {
	dst = slices.Grow(dst, len(s)) // at most as long: grown once, not by doubling
	start := len(dst)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			dst = append(dst, ' ')
		case escapeAt(s, i):
			run := len(dst)
			for ; i < len(s) && escapeAt(s, i); i += 3 {
				dst = append(dst, byte(hexDigit(s[i+1])<<4|hexDigit(s[i+2])))
			}
			i--
			if !utf8.Valid(dst[run:]) {
				return formUndecoded(dst[:start], s)
			}
		case c == '%':
			return formUndecoded(dst[:start], s)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// formUndecoded appends s with + as a space and only %5B and %5D decoded.
func formUndecoded(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			dst = append(dst, ' ')
		case escapeAt(s, i) && s[i+1] == '5' && s[i+2]|0x20 == 'b':
			dst = append(dst, '[')
			i += 2
		case closingAt(s, i) == 3:
			dst = append(dst, ']')
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// formPlaces is how many segments of a key place an array's element where
// qs does: params given by position (params[1][limit]), and one more.
const formPlaces = 2

// formReader holds what reading a form reuses field after field: the
// segments of the key at hand.
type formReader struct{ segs [][]byte }

// appendField appends the decoded field key=val as a member of the
// top-level object, followed by a comma: the key's name, then an object
// for each of its segments, or an array for [] and a numeric index (see
// formIndex), as qs makes: params[0]=search is params given by position.
// The index's element is at its position among the indexes the form's
// fields give that array (arrays), since qs drops an array's holes:
// params[5][name]=big alone is params[0][name]=big. Past formPlaces
// segments, an element is first in its array, wherever qs puts it: no
// cost or argument bound reads an array that deep, and placing each
// would write up to 20 nulls per segment, 33 deep, for every field. A
// field with an empty key, or with a __proto__ name, adds nothing, as qs
// drops them; one with a __proto__ segment is an empty object where that
// segment starts.
func (f *formReader) appendField(dst, key, val []byte, arrays formIndexes) []byte {
	name, segs, empty, ok := f.path(key)
	if !ok {
		return dst
	}
	dst = appendJSONString(dst, name)
	dst = append(dst, ':')
	var w formArrayWalk
	w.start(name)
	for i, s := range segs {
		if n, ok := formIndex(s); ok {
			dst = append(dst, '[')
			for range arrays.position(w.array(), n) { // 0 past formPlaces: none recorded (index)
				dst = append(dst, "null,"...)
			}
		} else {
			dst = append(dst, '{')
			dst = appendJSONString(dst, s)
			dst = append(dst, ':')
		}
		if i < formPlaces {
			w.part(s)
		}
	}
	if empty {
		dst = append(dst, "{}"...)
	} else {
		dst = appendJSONString(dst, val)
	}
	for i := len(segs) - 1; i >= 0; i-- {
		if _, ok := formIndex(segs[i]); ok {
			dst = append(dst, ']')
		} else {
			dst = append(dst, '}')
		}
	}
	return append(dst, ',')
}

// path returns the name and segments of the decoded key as qs builds
// its value, and whether qs keeps the field at all. A key with an empty
// name takes its first segment as the name ([] as 0: a top-level array
// merges into the object by index); one named __proto__ is dropped. A
// __proto__ segment ends the segments: qs drops it and what follows it
// but keeps the object it was to be set in, empty (Hono sets it there as
// a member), which empty reports: either way the member before it is an
// object.
func (f *formReader) path(key []byte) (name []byte, segs [][]byte, empty, ok bool) {
	name, f.segs = formSegments(key, f.segs[:0])
	segs = f.segs
	if len(name) == 0 {
		if len(segs) == 0 {
			return nil, nil, false, false
		}
		name, segs = segs[0], segs[1:]
		if len(name) == 0 {
			name = []byte{'0'}
		}
	}
	if string(name) == "__proto__" {
		return nil, nil, false, false
	}
	for i, s := range segs {
		if string(s) == "__proto__" {
			return name, segs[:i], true, true
		}
	}
	return name, segs, false, true
}

// formIndexes holds, for each array the fields of a form make (named by
// formArrayWalk), the set of indexes they give it, bit n for index n
// (formIndex: at most 20).
type formIndexes map[uint64]uint32

// arrays returns the indexes the fields of the form b give each of its
// arrays, as qs reads the keys, and as it reads them with allowDots.
func (f *formReader) arrays(b []byte) (plain, dots formIndexes) {
	plain, dots = formIndexes{}, formIndexes{}
	var key, dotted []byte
	for field := range bytes.SplitSeq(b, []byte{'&'}) {
		k, _, _ := formField(field)
		key = formDecode(key[:0], k)
		dotted = dotsAsBrackets(dotted[:0], key)
		f.index(plain, key)
		f.index(dots, dotted)
	}
	return plain, dots
}

// index records in ix the indexes the decoded key gives its arrays, in its
// first formPlaces segments.
func (f *formReader) index(ix formIndexes, key []byte) {
	name, segs, _, ok := f.path(key)
	if !ok {
		return
	}
	var w formArrayWalk
	w.start(name)
	for _, s := range segs[:min(len(segs), formPlaces)] {
		if n, ok := formIndex(s); ok {
			ix[w.array()] |= 1 << n
		}
		w.part(s)
	}
}

// position returns where the element of index n of the array named
// array ends up once qs has dropped the holes: the number of smaller
// indexes the form gives that array.
func (ix formIndexes) position(array uint64, n int) int {
	return bits.OnesCount32(ix[array] & (1<<n - 1))
}

// formArraySeed seeds the hashes that name a form's arrays. It is secret,
// so that no body can give two of its arrays one name.
var formArraySeed = maphash.MakeSeed()

// formArrayWalk names the arrays along one key's path: after its name and
// the segments before an index, array names the array that index is of.
// Each part is hashed after its length, so two paths share a name only by
// a collision of the secret-seeded 64-bit hash, and a walk costs the
// key's length however deep it nests.
type formArrayWalk struct{ h maphash.Hash }

// start begins the walk of a key named name.
func (w *formArrayWalk) start(name []byte) {
	w.h.SetSeed(formArraySeed)
	w.part(name)
}

// part adds the next part of the key's path.
func (w *formArrayWalk) part(p []byte) {
	var n [binary.MaxVarintLen64]byte
	_, _ = w.h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
	_, _ = w.h.Write(p)
}

// array names the array an index after the parts so far is of.
func (w *formArrayWalk) array() uint64 {
	return w.h.Sum64()
}

// formIndex reports whether qs reads the segment s as an array index, and
// which: [] appends (here, to an array of its own: each field is a member
// of its own), and an index written in decimal without a leading zero is
// one up to qs's arrayLimit, 20 (a larger one is an object's key).
func formIndex(s []byte) (int, bool) {
	switch {
	case len(s) == 0:
		return 0, true
	case len(s) > 2 || len(s) == 2 && s[0] == '0':
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 20
}

// formDepth is how many segments of a key qs reads before it takes the
// rest of the key as one more: body-parser's depth (qs's own is 5; what a
// call's cost reads is at most 3 deep, and a deeper path is an object
// either way). Unbounded, a key of a million brackets would make a
// million nested arrays out of one field.
const formDepth = 32

// formSegments splits a decoded key as qs does: its name is the text
// before its first segment, a '[' whose next bracket is a ']', and its
// segments are the contents of each such bracket pair, the text between
// them skipped, up to formDepth of them; the rest of the key, from the
// next such pair on, is one segment more. They are appended to segs.
func formSegments(key []byte, segs [][]byte) (name []byte, _ [][]byte) {
	name = key
	for i := 0; ; {
		open := bytes.IndexByte(key[i:], '[')
		if open < 0 {
			return name, segs
		}
		open += i
		next := bytes.IndexAny(key[open+1:], "[]")
		if next < 0 {
			return name, segs
		}
		next += open + 1
		if key[next] == '[' {
			i = next // this '[' may open the segment
			continue
		}
		if len(segs) == formDepth {
			return name, append(segs, key[open:])
		}
		if len(segs) == 0 {
			name = key[:open]
		}
		segs = append(segs, key[open+1:next])
		i = next + 1
	}
}
