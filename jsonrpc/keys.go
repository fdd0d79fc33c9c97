package jsonrpc

import "bytes"

// Member keys are matched like encoding/json matches struct fields: the
// decoded key equals the field name under strings.EqualFold. Exact and
// ASCII keys, which is all that legitimate clients send, take a fast path.
// A key with dashes or underscores that matches none is matched again
// without them (see equalFoldUnseparated), as encoding/json/v2 matches
// with MatchCaseInsensitiveNames: the keys that set the cost, at least.

// Keys that matter in messages and in params.
const (
	keyOther = iota
	keyMethod
	keyParams
	keyID       // spelt "id" exactly
	keyFoldedID // id under case folding or up to a NUL only
	keyName
	keyArguments
	keyAnswer // result or error: the message is a response
	keyProto  // __proto__, whose object's members count as the enclosing one's (see protoOpens)
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
				if string(k) == "id" {
					return keyID
				}
				if asciiKeyIs(k, "id") {
					return keyFoldedID
				}
			case 'r':
				if string(k) == "result" || asciiKeyIs(k, "result") {
					return keyAnswer
				}
			case 'e':
				if string(k) == "error" || asciiKeyIs(k, "error") {
					return keyAnswer
				}
			case 'j':
				if string(k) == "jsonrpc" { // in every message: spare it the walk below
					return keyOther
				}
			case '_' | 0x20:
				if string(k) == "__proto__" {
					return keyProto
				}
			}
		}
		return separatedKey(k, messageKeys)
	}
	return beforeNUL(decodeKey(k, flags, &r.scratch, r.s.single), decodedMessageKey)
}

// decodedMessageKey classifies the decoded key of a message member.
func decodedMessageKey(k []byte) int {
	switch {
	case equalFold(k, "method"):
		return keyMethod
	case equalFold(k, "params"):
		return keyParams
	case string(k) == "id":
		return keyID
	case equalFold(k, "id"):
		return keyFoldedID
	case equalFold(k, "result"), equalFold(k, "error"):
		return keyAnswer
	case string(k) == "__proto__":
		return keyProto
	}
	return separatedKey(k, messageKeys)
}

// beforeNUL classifies the decoded key k, and when that finds nothing and
// k holds a NUL, its part before the NUL, which is the key to C parsers
// (cJSON) and to code comparing it as a C string; an id found so is a
// folded one, as other parsers read the key on past the NUL.
func beforeNUL(k []byte, classify func([]byte) int) int {
	if c := classify(k); c != keyOther {
		return c
	}
	if j := bytes.IndexByte(k, 0); j >= 0 {
		if c := classify(k[:j]); c != keyID {
			return c
		}
		return keyFoldedID // not spelt "id" exactly: it goes on past the NUL
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
			case '_' | 0x20:
				switch string(k) {
				case "_meta": // in many calls: spare it the walk below
					return keyOther
				case "__proto__":
					return keyProto
				}
			}
		}
		return separatedKey(k, paramsKeys)
	}
	return beforeNUL(decodeKey(k, flags, &r.scratch, r.s.single), decodedParamsKey)
}

// decodedParamsKey classifies the decoded key of a params member.
func decodedParamsKey(k []byte) int {
	switch {
	case equalFold(k, "name"):
		return keyName
	case equalFold(k, "arguments"):
		return keyArguments
	case string(k) == "__proto__":
		return keyProto
	}
	return separatedKey(k, paramsKeys)
}

// namedKey is a key that matters and its class.
type namedKey struct {
	name string
	key  int
}

// The keys that matter for the cost, in messages and in params: only those
// are matched without separators. id, result and error keep encoding/json's
// matching, so that answers echo the id every common parser reads.
var (
	messageKeys = []namedKey{{"method", keyMethod}, {"params", keyParams}}
	paramsKeys  = []namedKey{{"name", keyName}, {"arguments", keyArguments}}
)

// separatedKey classifies k, which matched none of keys as it is, with its
// dashes and underscores left out (see equalFoldUnseparated).
func separatedKey(k []byte, keys []namedKey) int {
	if !hasSeparator(k) {
		return keyOther
	}
	for _, nk := range keys {
		if equalFoldUnseparated(k, nk.name) {
			return nk.key
		}
	}
	return keyOther
}

// asciiKeyIs reports whether the ASCII key k equals the lower-case ASCII
// letters lower under equalFold. Only ASCII letters fold to ASCII letters,
// so a byte-wise comparison suffices.
func asciiKeyIs(k []byte, lower string) bool {
	if len(k) != len(lower) {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// decodeKey returns the decoded raw key contents k, using scratch when k has
// escapes or an overlong UTF-8 sequence. Other invalid UTF-8 is left alone:
// equalFold reads each invalid byte as U+FFFD, which is what encoding/json
// replaces it with. An overlong sequence is decoded as Jackson decodes it
// (see overlongRune): read as U+FFFD, the key could match none of the
// ASCII names looked for, so Jackson's is the only reading that can. With
// json5, escapes are decoded as JSON5 reads them (see json5Escape): the
// names looked for have no x, v, 0 or line break, which Jackson and Ruby's
// json gem make of those escapes, so again only one reading can match.
func decodeKey(k []byte, flags uint8, scratch *[]byte, json5 bool) []byte {
	var mode uint8
	if flags&flagHigh != 0 && hasOverlong(k) {
		mode |= decodeOverlong
	}
	if flags&flagEscape == 0 && mode == 0 {
		return k
	}
	if json5 {
		mode |= decodeJSON5
	}
	*scratch = appendUnquoted((*scratch)[:0], k, mode)
	return *scratch
}
