package mcplimit

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Caddy's placeholders for request inputs a client controls.
const (
	headerPrefix = "http.request.header."
	queryPrefix  = "http.request.uri.query."
	cookiePrefix = "http.request.cookie."
)

// readInput reads the request input the placeholder key (without braces)
// names, when it is a header, a query parameter or a cookie: the value
// Caddy's replacer gives (a credentials header spelled canonically, as
// readHeader does), and why the request does not name one value the way
// every backend reads it. ok is false for any other key.
func readInput(r *http.Request, key string) (value, unreadable string, ok bool) {
	switch {
	case strings.HasPrefix(key, headerPrefix):
		value, unreadable = readHeader(r, key[len(headerPrefix):])
	case strings.HasPrefix(key, queryPrefix):
		value, unreadable = readQuery(r, key[len(queryPrefix):])
	case strings.HasPrefix(key, cookiePrefix):
		value, unreadable = readCookie(r, key[len(cookiePrefix):])
	default:
		return "", "", false
	}
	return value, unreadable, true
}

// rawHash says why a request whose identity reads the query must not
// hold a raw '#' in its target (see readQuery).
const rawHash = "Do not send '#' in the request target: servers read what follows it as a fragment, not as the query."

// readQuery reads the query parameter name as Caddy's replacer does (its
// values joined with commas). A parameter sent more than once is
// unreadable: backends read the first value, the last or the list, so a
// caller could add a throwaway value to mint an identity per value that
// the one real one proves. Spellings that differ in case or escaping, and
// pairs separated by ';' or that Go's parser drops, count too: some
// backend reads them (see inputName.queryKey; qs with allowDots also reads
// `name.0` as name). The parameter sent only under such a spelling is
// unreadable as well: Caddy reads no identity, the backend may.
func readQuery(r *http.Request, name string) (value, unreadable string) {
	vals, present := r.URL.Query()[name]
	// Trimmed as readHeader trims a header: `?key=+` is no key to a
	// backend that trims, and `?key=k%C2%A0` is k. (Several values are
	// refused, below.)
	value = trimSpaces(strings.Join(vals, ","))
	if strings.IndexByte(r.RequestURI, '#') >= 0 {
		// Go reads a raw '#' in the request target as part of the query
		// (or the path); Python's urlsplit and Node's URL start a fragment
		// there, so `?token=k#1` would be an identity per suffix that the
		// backend reads as k, and `#&token=junk` one it never sees.
		return value, rawHash
	}
	n, in := 0, newInputName(name)
	for pair := range strings.FieldsFuncSeq(r.URL.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
		// ufo (Nuxt's h3) skips leading '=': `=name=v` is name.
		k, _, _ := strings.Cut(strings.TrimLeft(pair, "="), "=")
		k = phpUnescape(k)
		// qs with allowDots reads `name.0` and `name.x` as name.
		if base, _, _ := strings.Cut(k, "."); in.queryKey(k) || strings.EqualFold(base, name) {
			n++
		}
	}
	return value, repeatedInput(n, present, name+" query parameter")
}

// repeatedInput says why a request carrying an identity input n times,
// counted under every spelling some backend reads, must be refused, or
// "" when it need not: more than once, backends read the first, the last
// or another one; once but not read by Caddy's placeholder (read false),
// the limiter sees no identity while the backend may authenticate it.
func repeatedInput(n int, read bool, what string) string {
	switch {
	case n > 1:
		return "Send one " + what + ": requests carrying several (under any spelling, in any letter case) are not accepted here."
	case n == 1 && !read:
		return "Send the " + what + " spelled exactly so: other spellings are not accepted here."
	}
	return ""
}

// inputName is the name of an identity query parameter or cookie, with
// what matching spellings against it needs, computed once per request.
type inputName struct {
	name string
	php  string // phpName(name)
	// ascii says name is ASCII: a key shorter than name then never
	// matches, since a key's readings only drop or swap bytes (but for
	// U+FFFD in place of invalid UTF-8, never in an ASCII name), and a
	// string equal to an ASCII name under case folding is never shorter
	// than it (the non-ASCII folds, K for k, ſ for s, take more bytes).
	ascii bool
}

// newInputName prepares name for matching spellings against it.
func newInputName(name string) inputName {
	return inputName{name: name, php: phpName(name), ascii: isASCII(name)}
}

// queryKey reports whether some backend reads the decoded query key k
// as the parameter name, ignoring case: as it is; as its first run of
// characters other than brackets, leading brackets skipped, which is how
// Rack 2 names any key and how arrays name theirs (`name[]`, `name[0]` in
// qs and PHP, qs's `[name]`, Rack's `name]` and `[[name]]`); or as PHP
// names its variable (phpName), arrays included (`api.key[]` is PHP's
// array `api_key`).
func (n inputName) queryKey(k string) bool {
	if len(k) < len(n.name) && n.ascii {
		return false
	}
	i := 0
	for i < len(k) && (k[i] == '[' || k[i] == ']') {
		i++
	}
	j := i
	for j < len(k) && k[j] != '[' && k[j] != ']' {
		j++
	}
	first := k[i:j]
	if strings.EqualFold(k, n.name) || first != k && strings.EqualFold(first, n.name) {
		return true
	}
	// PHP's readings, where they differ from those just compared.
	if pk := phpName(k); (pk != k || n.php != n.name) && strings.EqualFold(pk, n.php) {
		return true
	}
	pf := phpName(first)
	return first != k && (pf != first || n.php != n.name) && strings.EqualFold(pf, n.php)
}

// isASCII reports whether s is ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// phpName is a decoded query or cookie name as PHP names its variable:
// leading spaces dropped, cut at a NUL, '.', ' ' and '[' turned into '_'
// (`api.key` and ` api key` are `api_key`).
func phpName(k string) string {
	plain := true
	for i := 0; i < len(k) && plain; i++ {
		plain = k[i] != '.' && k[i] != ' ' && k[i] != '[' && k[i] != 0
	}
	if plain {
		return k // as most names are
	}
	k = strings.TrimLeft(k, " ")
	k, _, _ = strings.Cut(k, "\x00")
	return strings.Map(func(c rune) rune {
		if c == '.' || c == ' ' || c == '[' {
			return '_'
		}
		return c
	}, k)
}

// cookie reports whether some backend reads the raw cookie name k as
// the name, as queryKey reads a query key: as it is, with the spaces
// around it that Python frameworks strip trimmed (trimSpaces), or %-decoded
// as PHP decodes it.
func (n inputName) cookie(k string) bool {
	if len(k) < len(n.name) && n.ascii {
		return false
	}
	trimmed, decoded := trimSpaces(k), phpUnescape(k)
	return n.queryKey(trimmed) || decoded != trimmed && n.queryKey(decoded)
}

// trimSpaces trims what some backend's trim takes for whitespace
// (anySpace) from a cookie name or value, an identity header's value or a
// query parameter's: Python's str.strip, with the header read either way
// Python frameworks decode it, as UTF-8 (Django), where U+00A0 and the
// other Unicode spaces count, or as Latin-1 (Starlette), where the bytes
// 0x85 and 0xA0 are spaces; Java's String.trim, every control character below the space;
// JavaScript's trim, U+FEFF too. Go drops a cookie name with such spaces
// as invalid, so Caddy reads no cookie from it. (It trims a superset of
// what Go's strings.TrimSpace does.)
func trimSpaces(k string) string {
	if k != "" && printableASCII(k[0]) && printableASCII(k[len(k)-1]) {
		return k // the common case, an identity header's: nothing to trim
	}
	return trimSpacesRight(k[skipSpaces(k, 0):])
}

// printableASCII reports whether c is an ASCII byte above the space, which
// no reading takes for whitespace.
func printableASCII(c byte) bool {
	return ' ' < c && c < utf8.RuneSelf
}

// trimSpacesRight is trimSpaces at the end of k only.
func trimSpacesRight(k string) string {
	for k != "" {
		r, n := utf8.DecodeLastRuneInString(k)
		if !anySpace(r, n, k[len(k)-1]) {
			break
		}
		k = k[:len(k)-n]
	}
	return k
}

// anySpace reports whether the rune r, decoded from n bytes of which b is
// the outermost, is whitespace to some backend: to Python (unicode.IsSpace,
// the separators 0x1C-0x1F, or a lone byte that is a space in Latin-1), to
// Java's String.trim (every control character below the space) or to
// JavaScript's trim and \s (U+FEFF).
func anySpace(r rune, n int, b byte) bool {
	if r == utf8.RuneError && n == 1 {
		return b == 0x85 || b == 0xA0
	}
	return r < ' ' || r == '\uFEFF' || unicode.IsSpace(r)
}

// phpUnescape decodes a query or cookie name as PHP does (urldecode):
// '+' is a space, '%' and two hex digits the byte they name, and any other
// '%' stays as it is. Where Go's strict decoding fails, PHP still reads a
// name: `token%00%zz` is `token`, once cut at the NUL.
func phpUnescape(k string) string { return percentDecode(k, true) }

// percentDecode decodes every '%' and two hex digits in s to the byte they
// name and leaves any other '%' as it is; plus makes '+' a space.
func percentDecode(s string, plus bool) string {
	if !strings.Contains(s, "%") && (!plus || !strings.Contains(s, "+")) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+' && plus:
			c = ' '
		case c == '%' && i+2 < len(s):
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				c = byte(v)
				i += 2
			}
		}
		b = append(b, c)
	}
	return string(b)
}

// splitPairs calls pair with the name of every cookie read in line split
// at ';', and at ',', spaces and tabs within a part (SimpleCookie), and
// the offset just past that name (its trailing spaces trimmed as trimSpaces
// trims them). Spaces around '=' do not split a pair: Go, Starlette and
// Django read `sid =v` as sid (Django and Starlette also across Unicode
// spaces), SimpleCookie `x=1 sid =v` too, and a quoted value is one value
// (`x="a sid=b"` holds no sid). A word without '=' is a cookie only as a
// whole ';'-separated part, which Go and PHP read as a cookie with an
// empty value; inside a value (`tabs=home,sid`) no parser reads it as one.
func splitPairs(line string, pair func(name string, end int)) {
	sep := func(c byte) bool { return c == ',' || c == ' ' || c == '\t' }
	for base := 0; base <= len(line); {
		end := strings.IndexByte(line[base:], ';')
		if end < 0 {
			end = len(line)
		} else {
			end += base
		}
		part := line[base:end]
		lead := len(part) - len(strings.TrimLeft(part, " \t"))
		part = strings.Trim(part, " \t")
		hasEq := strings.Contains(part, "=")
		if part != "" && !hasEq {
			pair(part, base+lead+len(trimSpacesRight(part)))
		}
		for i := 0; hasEq && i < len(part); {
			for i < len(part) && sep(part[i]) {
				i++
			}
			nameStart := i
			for i < len(part) && part[i] != '=' && !sep(part[i]) {
				i++
			}
			name := part[nameStart:i]
			j := skipSpaces(part, i)
			if j >= len(part) || part[j] != '=' {
				continue // a word without '=': no cookie
			}
			pair(name, base+lead+nameStart+len(trimSpacesRight(name)))
			i = skipSpaces(part, j+1)
			if q, ok := quotedEnd(part, i); ok {
				i = q
			}
			for i < len(part) && !sep(part[i]) {
				i++
			}
		}
		base = end + 1
	}
}

// skipSpaces returns the index of the first byte at or after i in s that
// does not begin a space to Python (anySpace).
func skipSpaces(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !anySpace(r, n, s[i]) {
			break
		}
		i += n
	}
	return i
}

// quotedEnd returns the end of the quoted string SimpleCookie reads at i
// (`"(?:[^\\"]|\\.)*"`), if one starts there and ends.
func quotedEnd(s string, i int) (int, bool) {
	if i >= len(s) || s[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// canonicalCookieValue spells a cookie value one way for every backend
// reading of it. It is trimmed as trimSpaces trims, and cut at the first
// space, ',', '[' or ']': Go keeps those in a value, but WebOb stops
// reading at any of them and SimpleCookie at a space, so `sid=v x1`,
// `sid=v x2`, … would each be an identity proven by v. It is then
// %-decoded, with '+' and space one ('+' is a space to Rack and PHP,
// itself to Node's cookie). Each step only ever joins spellings into one
// identity.
func canonicalCookieValue(v string) string {
	v = trimSpaces(v)
	if i := strings.IndexAny(v, " ,[]"); i >= 0 {
		v = v[:i]
	}
	return trimSpaces(strings.ReplaceAll(percentDecode(v, false), "+", " "))
}

// readCookie reads the cookie name spelled exactly so, as backends read
// it (Go's r.Cookie, RFC 6265): Caddy's replacer would also take another
// letter case, which a backend then never sees as a credential, so that
// each junk value sent as `SID` would be proven by a 2xx served without
// one. A lone cookie spelled otherwise is unreadable, and so is more than
// one matching cookie, counted over the raw Cookie headers in any letter
// case: a backend that matches names differently, or reads the last,
// would check another one than the identity names. Cookies are counted as two readings find them: split at
// ';', ',' and whitespace (splitPairs; Go reads `sid=a sid=b` as one
// cookie valued "a sid=b", where Python's SimpleCookie reads two), and as
// WebOb finds pairs, inside other values too (webobPairs). A cookie both
// find counts once: they must not add up to two, nor find one each where
// a backend reads both.
//
// The value is made canonical (canonicalCookieValue), so `sid=  v`,
// `sid=" v"` and `sid=%76` are the identity v, not one each proven by the
// one real value.
//
// A request with more than one Cookie header line is unreadable whatever
// the lines hold: HTTP/1.1 clients send one (RFC 6265), and servers that
// read only the first line (Python's http.server, aiohttp, Starlette)
// would serve `Cookie: a=1` without a credential, proving the junk value
// the second line names. (HTTP/2 requests reach here with their cookie
// fields joined into one.)
func readCookie(r *http.Request, name string) (value, unreadable string) {
	if len(r.Header["Cookie"]) > 1 {
		return "", "Send one Cookie header: requests carrying several are not accepted here."
	}
	found := false
	for _, c := range r.Cookies() {
		if c.Name == name {
			value, found = canonicalCookieValue(c.Value), true
			break
		}
	}
	// Each reading reports where the names it reads end; the cookies
	// named name are the distinct such places, over both readings.
	n, in := 0, newInputName(name)
	for _, line := range r.Header["Cookie"] {
		var ends []int
		count := func(k string, end int) {
			if in.cookie(k) {
				ends = append(ends, end)
			}
		}
		splitPairs(line, count)
		webobPairs(line, count)
		// Sorted, not searched per cookie: a header of thousands of
		// `sid=` pairs must cost n log n, not n².
		slices.Sort(ends)
		n += len(slices.Compact(ends))
	}
	return value, repeatedInput(n, found, name+" cookie")
}
