package jsonrpc

import (
	"bytes"
	"math"
	"strconv"
)

// Arg returns the verdict on params.arguments.<name> over all readings: every
// params object, every arguments object in it and every member of those
// whose key equals name under strings.EqualFold (as encoding/json matches
// struct fields), also with dashes and underscores ignored on both sides
// (as encoding/json/v2 matches with MatchCaseInsensitiveNames: li_mit and
// topk are limit and top_k there), with İ and ı read as i (see
// equalFoldArg), or up to a NUL in the key (as C parsers read it).
//
//   - present is false when no reading has the key or every one is null;
//     then max is 0 and numeric is true.
//   - numeric is false when some non-null reading is not a JSON number
//     (a string such as "100", a bool, an object or an array).
//   - max is the highest numeric reading, +Inf for a number that overflows
//     float64, and 0 when no reading is numeric.
//
// Arg rescans the arguments objects on each call; for ordinary numbers it
// does not allocate.
func (e *Entry) Arg(name string) (max float64, numeric bool, present bool) {
	r := e.r
	v := argVerdict{max: math.Inf(-1), numeric: true}
	for k, a := range r.args[e.args.lo:e.args.hi] {
		src, single := r.body, false
		for _, rd := range r.readings {
			if int(e.args.lo)+k >= rd.args {
				src, single = rd.b, rd.single
			}
		}
		r.argIn(src[:a.hi], int(a.lo), name, single, &v)
	}
	if !v.numbers {
		v.max = 0
	}
	return v.max, v.numeric, v.present
}

// argVerdict accumulates Arg's result.
type argVerdict struct {
	max     float64 // highest number
	numbers bool    // some reading is a number
	numeric bool    // no non-null reading is anything else
	present bool    // some reading is not null
}

// argIn folds the readings of key name in the arguments object at lo in b
// (the body or a copy of it, up to the object's end) into the verdict.
// Parse scanned the object (with single-quoted strings when single), and
// the walk reads its tokens as the scanner does; it still never reads past
// b nor stalls, should a lenient reading leave them ambiguous.
func (r *Request) argIn(b []byte, lo int, name string, single bool, v *argVerdict) {
	i := lo + 1 // after '{'
	protos := 0 // __proto__ objects open, whose members are the arguments' (see Request.protoOpens)
	for {
		start := i
		if i = skipWS(b, i); i >= len(b) {
			return
		}
		switch b[i] {
		case '}':
			if protos == 0 {
				return
			}
			protos, i = protos-1, i+1
			continue
		case ',':
			if i = skipWS(b, i+1); i >= len(b) {
				return
			}
			if b[i] == '}' { // a trailing comma
				continue
			}
		}
		var raw []byte
		var flags uint8
		if b[i] == '"' || single && b[i] == '\'' {
			var end int
			end, flags = stringEnd(b, i)
			raw, i = b[i+1:end], end+1
		} else { // unquoted (see keyEnd)
			end, escaped := keyEnd(b, i, single)
			raw, i = b[i:end], end
			if escaped {
				flags = flagEscape
			}
		}
		if i = skipWS(b, i); i < len(b) && b[i] == ':' { // or missing (see scanner.noColon)
			i = skipWS(b, i+1)
		}
		if i >= len(b) {
			return
		}
		if b[i] == '{' && string(decodeKey(raw, flags, &r.scratch, false)) == "__proto__" {
			protos, i = protos+1, i+1
			continue
		}
		end := valueEnd(b, i, single)
		if r.keyIs(raw, flags, name, false) ||
			single && flags&flagEscape != 0 && hasJSON5Escape(raw) && r.keyIs(raw, flags, name, true) {
			v.add(b[i:end])
		}
		if i = end; i <= start {
			return // nothing read: no token the scanner took starts here
		}
	}
}

// keyIs reports whether the raw key contents, decoded as JSON5 reads them
// when json5 (see decodeKey), equal name under strings.EqualFold, with
// dashes and underscores ignored or İ and ı read as i (see equalFoldArg),
// or up to a NUL.
func (r *Request) keyIs(raw []byte, flags uint8, name string, json5 bool) bool {
	key := decodeKey(raw, flags, &r.scratch, json5)
	if equalFold(key, name) || equalFoldArg(key, name) {
		return true
	}
	// C parsers (cJSON) read a string up to its first NUL.
	if j := bytes.IndexByte(key, 0); j >= 0 && equalFoldArg(key[:j], name) {
		return true
	}
	// JavaScript and Python read a cut-off UTF-8 sequence as one U+FFFD.
	if flags&flagHigh != 0 && hasSubpart(raw) {
		r.scratch = appendUnquoted(r.scratch[:0], raw, decodeSubparts)
		return equalFold(r.scratch, name) || equalFoldArg(r.scratch, name)
	}
	return false
}

// add folds one raw value into the verdict. A missing value
// ({"limit":}, which scanning reads past as a trailing comma's gap) is no
// reading, as null is none.
func (v *argVerdict) add(raw []byte) {
	if len(raw) == 0 {
		return
	}
	if string(raw) == "null" {
		return
	}
	c := raw[0]
	v.present = true
	if c != '-' && (c < '0' || c > '9') || len(raw) > 1 && raw[1] == 'I' { // not a number, or -Infinity
		v.numeric = false
		return
	}
	if scanNumber(raw, 0) != len(raw) { // an unquoted string such as 5e or 1_000
		v.numeric = false
		return
	}
	f := integerCeiling(raw, numberValue(raw)) // ±Inf past the largest double
	if len(raw) > 800 {
		// Go's reading too, that of a backend written in Go: it differs
		// for a number this long, and is the larger of the two when
		// the number is negative.
		g, _ := strconv.ParseFloat(string(raw), 64)
		f = max(f, g)
	}
	if !v.numbers || f > v.max {
		v.max = f
	}
	v.numbers = true
}

// stringEnd returns the index of the closing quote of the string whose
// opening quote (" or ') is at i, or len(b) when it has none, and its
// scanString flags.
func stringEnd(b []byte, i int) (end int, flags uint8) {
	quote := b[i]
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == quote:
			return i, flags
		case c == '\\':
			flags |= flagEscape
			i++
		case c >= 0x80:
			flags |= flagHigh
		}
	}
	return len(b), flags
}

// valueEnd returns the index just past the value at i, in which '...' is
// a string when single, and at most len(b). A scalar ends where the
// scanner ends it: at the first byte no unquoted string holds (see bare).
func valueEnd(b []byte, i int, single bool) int {
	switch c := b[i]; {
	case c == '"' || single && c == '\'':
		end, _ := stringEnd(b, i)
		return min(end+1, len(b))
	case c == '{' || c == '[':
		depth := 0
		for ; i < len(b); i++ {
			switch c := b[i]; c {
			case '"', '\'':
				if c == '"' || single {
					i, _ = stringEnd(b, i)
				}
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	return bareEnd(b, i)
}
