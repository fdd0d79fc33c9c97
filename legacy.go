package mcplimit

import (
	"iter"
	"strconv"
	"strings"
)

// acceptsEventStream tells a Streamable HTTP POST (whose Accept lists
// text/event-stream) from a legacy HTTP+SSE one (whose 2xx body is never
// read) by the request's Accept values. A range with q=0 is one the
// client refuses, so it is not listed.
func acceptsEventStream(accept []string) bool {
	for _, v := range accept {
		for r := range unquotedFields(v, ',') {
			mt, params, _ := strings.Cut(r, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") && !refusedRange(params) {
				return true
			}
		}
	}
	return false
}

// refusedRange reports whether the parameters of a media range give it
// q=0.
func refusedRange(params string) bool {
	for p := range unquotedFields(params, ';') {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// unquotedFields yields the parts of s between the seps that stand
// outside quoted strings (RFC 9110, with backslash escapes): a parameter
// such as foo="a,b;c" is one.
func unquotedFields(s string, sep byte) iter.Seq[string] {
	return func(yield func(string) bool) {
		start, quoted := 0, false
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case quoted && c == '\\':
				i++
			case c == '"':
				quoted = !quoted
			case !quoted && c == sep:
				if !yield(s[start:i]) {
					return
				}
				start = i + 1
			}
		}
		yield(s[start:])
	}
}
