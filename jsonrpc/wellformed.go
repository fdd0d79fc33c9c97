package jsonrpc

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WellFormedCall reports whether body is a JSON-RPC 2.0 request or
// notification, or a batch of JSON-RPC 2.0 messages holding one, as the
// specification writes them: every message an object with "jsonrpc":"2.0";
// a request's method a string, its id (if any) a string or a number, its
// params (if any) an object or an array; a response's id and a result or
// an error; no member twice, in any case (Go's decoder matches member
// names case-insensitively, and parsers disagree on which of two wins); no
// other JSON value around it; UTF-8 throughout, with no lone surrogate
// escaped (Python's json and serde reject the one, serde the other, where
// Go's decoder reads both as U+FFFD); and every value one that common
// parsers read alike (strictValues). Anything else a backend may answer
// with a JSON-RPC error before it checks the credential, even with a 2xx.
func WellFormedCall(body []byte) bool {
	if !utf8.Valid(body) || !surrogatesPaired(body) || !strictValues(body) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		return false
	}
	top = bytes.TrimLeft(top, " \t\r\n")
	if len(top) > 0 && top[0] == '[' {
		var entries []json.RawMessage
		if json.Unmarshal(top, &entries) != nil {
			return false
		}
		called := false
		for _, e := range entries {
			switch wellFormed(e) {
			case notMessage:
				return false
			case call:
				called = true
			}
		}
		return called
	}
	return wellFormed(top) == call
}

// maxProvingDepth is the deepest nesting of a body that proves: serde's
// default limit, the lowest of common parsers' (Python's is about 1000,
// Go's 10000). serde_json counts down from 128 and fails at 0, so the
// 128th container is refused: 127 nest.
const maxProvingDepth = 127

// strictValues reports whether every value of body, one JSON value, is one
// that common parsers read alike: nested at most maxProvingDepth deep,
// every number within a float64's range (Go's decoder refuses 1e400,
// Python's reads it as infinity), and no object holding a member name
// twice under case folding (serde refuses a name twice, Go's decoder
// matches names case-insensitively, and parsers keep one or the other).
// It reads the bytes itself, a token at a time without allocating one, as
// encoding/json's Token would have at 130 bytes per byte of a body of
// small values; what is no JSON fails it, and WellFormedCall's decoding
// refuses any other syntax error.
func strictValues(body []byte) bool {
	var open []strictContainer
	name := false // the next string is a member's name
	for i := 0; i < len(body); {
		switch c := body[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ':':
			i++
		case c == ',':
			name = len(open) > 0 && open[len(open)-1].object
			i++
		case c == '{' || c == '[':
			if len(open) == maxProvingDepth {
				return false
			}
			if len(open) < cap(open) {
				open = open[:len(open)+1] // its names' storage reused
			} else {
				open = append(open, strictContainer{})
			}
			open[len(open)-1].reset(c == '{')
			name = c == '{'
			i++
		case c == '}' || c == ']':
			if len(open) == 0 {
				return false
			}
			open, name = open[:len(open)-1], false
			i++
		case c == '"':
			end, flags := stringEnd(body, i)
			if end == len(body) {
				return false
			}
			if name {
				if !open[len(open)-1].add(body[i:end+1], flags&flagEscape != 0) {
					return false
				}
				name = false
			}
			i = end + 1
		case c == '-' || '0' <= c && c <= '9':
			j := scanNumber(body, i)
			if j < 0 || math.IsInf(numberValue(body[i:j]), 0) {
				return false
			}
			i = j
		case c >= 'a' && c <= 'z': // true, false, null
			for i < len(body) && body[i] >= 'a' && body[i] <= 'z' {
				i++
			}
		default:
			return false
		}
	}
	return true
}

// strictContainer is an object or array strictValues is in: an object's
// folded member names, in a slice while they are few, then in a set.
type strictContainer struct {
	object bool
	names  []string
	set    map[string]bool
}

// reset makes c a new object, or array.
func (c *strictContainer) reset(object bool) {
	c.object, c.names = object, c.names[:0]
	clear(c.set)
}

// add records the member name raw (a JSON string, quotes included, with
// escapes when escaped) and reports whether no earlier member's name
// folds the same way.
func (c *strictContainer) add(raw []byte, escaped bool) bool {
	var name string
	if !escaped {
		name = string(raw[1 : len(raw)-1])
	} else if json.Unmarshal(raw, &name) != nil {
		return false
	}
	folded := foldName(name)
	if len(c.names) < 16 {
		if slices.Contains(c.names, folded) {
			return false
		}
		c.names = append(c.names, folded)
		return true
	}
	if c.set == nil {
		c.set = map[string]bool{}
	}
	if len(c.set) == 0 {
		for _, n := range c.names {
			c.set[n] = true
		}
	}
	if c.set[folded] {
		return false
	}
	c.set[folded] = true
	return true
}

// surrogatesPaired reports whether every \u escape of a UTF-16 surrogate
// in body, which is JSON, is a high one followed by a low one. Outside
// strings JSON has no backslash, and within them an escaped backslash is
// skipped whole, so every escape is found without tracking strings.
func surrogatesPaired(body []byte) bool {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if i+1 >= len(body) || body[i+1] != 'u' {
			i++ // the escaped character: a backslash is no escape's start
			continue
		}
		r := escapedUnit(body[i:])
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if low := escapedUnit(body[min(i+6, len(body)):]); low < 0xDC00 || low >= 0xE000 {
				return false
			}
			i += 11
		case r >= 0xDC00 && r < 0xE000:
			return false
		default:
			i += 5
		}
	}
	return true
}

// escapedUnit returns the UTF-16 unit of the \u escape b starts with, or
// -1 when b does not start with one.
func escapedUnit(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// messageKind is what wellFormed finds a value to be.
type messageKind int

const (
	notMessage messageKind = iota
	call                   // a request or a notification
	answer                 // a response
)

// foldedMembers maps the members JSON-RPC 2.0 gives a meaning, folded
// (foldName), to their names.
var foldedMembers = func() map[string]string {
	m := map[string]string{}
	for _, name := range []string{"jsonrpc", "method", "params", "id", "result", "error"} {
		m[foldName(name)] = name
	}
	return m
}()

// foldName maps name to one spelling of every name equal to it under
// simple Unicode case folding (strings.EqualFold, as encoding/json
// matches members): each rune becomes the least of its fold orbit. Two
// names are equal under folding exactly when their foldName are equal.
func foldName(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// wellFormed reads one message of a JSON-RPC body (see WellFormedCall).
func wellFormed(raw json.RawMessage) messageKind {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return notMessage
	}
	seen := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return notMessage
		}
		name := t.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return notMessage
		}
		// Never twice: strictValues ruled it out. A name that is a
		// member's in another case ("Method") is one in some readings.
		if m, ok := foldedMembers[foldName(name)]; ok && m != name {
			return notMessage
		}
		seen[name] = v
	}
	member := func(name string) (json.RawMessage, bool) {
		v, ok := seen[name]
		return v, ok
	}
	var version string
	if v, _ := member("jsonrpc"); json.Unmarshal(v, &version) != nil || version != "2.0" {
		return notMessage
	}
	id, hasID := member("id")
	if hasID && !(isString(id) || isNumber(id)) {
		return notMessage
	}
	_, result := member("result")
	_, failed := member("error")
	if method, ok := member("method"); ok {
		// With a result or an error, it reads as a response too.
		params, hasParams := member("params")
		if !isString(method) || result || failed || hasParams && !(isKind(params, '{') || isKind(params, '[')) {
			return notMessage
		}
		return call
	}
	if hasID && result != failed {
		if e, _ := member("error"); failed && !errorObject(e) {
			return notMessage
		}
		return answer
	}
	return notMessage
}

// errorObject reports whether v is a JSON-RPC error object: an object
// with an integer code and a string message.
func errorObject(v json.RawMessage) bool {
	var e map[string]json.RawMessage
	if json.Unmarshal(v, &e) != nil || e == nil {
		return false
	}
	code, message := e["code"], e["message"]
	return isNumber(code) && !bytes.ContainsAny(code, ".eE") && isString(message)
}

func isKind(v json.RawMessage, first byte) bool { return len(v) > 0 && v[0] == first }

func isString(v json.RawMessage) bool { return isKind(v, '"') }

func isNumber(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}
