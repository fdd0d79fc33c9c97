package mcplimit

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// maxExactDigits is the most digits of an integer id whose value a
// float64 holds exactly, whatever they are.
const maxExactDigits = 15

// appendIDKey appends to dst the key a JSON-RPC id is matched by: its
// value, not its spelling, since a backend answers with the id it decoded,
// encoded its own way ("\u00e9" for "é", 1.0 for 1e0): a string's text
// (invalid UTF-8 as U+FFFD, as a decoder reads it), a number's value as a
// float64 (as JavaScript holds it; -0 is 0), anything else as is. Ids a
// backend could not tell apart share a key; so may ids it could (two
// integers past 2^53), and a request whose ids share one frees its slots
// only when every answer is in (callWatch.dupIDs), so a shared key never
// frees a slot early.
func appendIDKey(dst, id []byte) []byte {
	if len(id) == 0 {
		return append(dst, 'r')
	}
	switch c := id[0]; {
	case c == '"':
		if bytes.IndexByte(id, '\\') < 0 && utf8.Valid(id) {
			return append(append(dst, 's'), id[1:len(id)-1]...)
		}
		var s string
		if json.Unmarshal(id, &s) == nil {
			return append(append(dst, 's'), s...)
		}
	case c == '-' || '0' <= c && c <= '9':
		if plainInteger(id) {
			return append(append(dst, 'n'), id...)
		}
		f, err := strconv.ParseFloat(string(id), 64)
		if err == nil || math.IsInf(f, 0) { // past the range: ±Inf, one key
			if f == math.Trunc(f) && math.Abs(f) < 1e15 {
				return strconv.AppendInt(append(dst, 'n'), int64(f), 10)
			}
			return strconv.AppendFloat(append(dst, 'f'), f, 'g', -1, 64)
		}
	}
	return append(append(dst, 'r'), id...)
}

// plainInteger reports whether id is an integer of at most maxExactDigits
// digits spelled as strconv.AppendInt spells its value: no leading zero,
// no "-0".
func plainInteger(id []byte) bool {
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > maxExactDigits || digits[0] == '0' && (len(digits) > 1 || len(id) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
