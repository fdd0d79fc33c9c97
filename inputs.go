package mcplimit

import (
	"net/http"
	"regexp"
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

// readQuery reads the query parameter name as Caddy's replacer does (its
// values joined with commas). A parameter sent more than once is
// unreadable: backends read the first value, the last or the list, so a
// caller could add a throwaway value to mint an identity per value that
// the one real one proves. Spellings that differ in case or escaping, and
// pairs separated by ';' or that Go's parser drops, count too: some
// backend reads them (see queryKeyIs; qs with allowDots also reads
// `name.0` as name). The parameter sent only under such a spelling is
// unreadable as well: Caddy reads no identity, the backend may.
func readQuery(r *http.Request, name string) (value, unreadable string) {
	vals, present := r.URL.Query()[name]
	value = strings.Join(vals, ",")
	n := 0
	for pair := range strings.FieldsFuncSeq(r.URL.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
		// ufo (Nuxt's h3) skips leading '=': `=name=v` is name.
		k, _, _ := strings.Cut(strings.TrimLeft(pair, "="), "=")
		k = phpUnescape(k)
		// qs with allowDots reads `name.0` and `name.x` as name.
		if base, _, _ := strings.Cut(k, "."); queryKeyIs(k, name) || strings.EqualFold(base, name) {
			n++
		}
	}
	switch {
	case n > 1:
		unreadable = "Send the " + name + " query parameter once: requests carrying it several times are not accepted here."
	case n == 1 && !present:
		// Only under a spelling Caddy does not read: no identity here,
		// while the backend may authenticate it.
		unreadable = "Send the " + name + " query parameter spelled exactly so: other spellings are not accepted here."
	}
	return value, unreadable
}

// queryKeyIs reports whether some backend reads the decoded query key k
// as the parameter name, ignoring case: as it is; as its first run of
// characters other than brackets, leading brackets skipped, which is how
// Rack 2 names any key and how arrays name theirs (`name[]`, `name[0]` in
// qs and PHP, qs's `[name]`, Rack's `name]` and `[[name]]`); or as PHP
// names its variable (phpName), arrays included (`api.key[]` is PHP's
// array `api_key`).
func queryKeyIs(k, name string) bool {
	want := phpName(name)
	first := strings.TrimLeft(k, "[]")
	if i := strings.IndexAny(first, "[]"); i >= 0 {
		first = first[:i]
	}
	return strings.EqualFold(k, name) || strings.EqualFold(first, name) ||
		strings.EqualFold(phpName(k), want) || strings.EqualFold(phpName(first), want)
}

// phpName is a decoded query or cookie name as PHP names its variable:
// leading spaces dropped, cut at a NUL, '.', ' ' and '[' turned into '_'
// (`api.key` and ` api key` are `api_key`).
func phpName(k string) string {
	k = strings.TrimLeft(k, " ")
	k, _, _ = strings.Cut(k, "\x00")
	return strings.Map(func(c rune) rune {
		if c == '.' || c == ' ' || c == '[' {
			return '_'
		}
		return c
	}, k)
}

// cookieNameIs reports whether some backend reads the raw cookie name k
// as name, as queryKeyIs reads a query key: as it is, with the spaces
// around it that Python frameworks strip trimmed (pyTrim), or %-decoded
// as PHP decodes it.
func cookieNameIs(k, name string) bool {
	return queryKeyIs(pyTrim(k), name) || queryKeyIs(phpUnescape(k), name)
}

// pyTrim trims what Python's str.strip trims from a cookie name or
// value, with the header read either way Python frameworks decode it: as
// UTF-8 (Django), where U+00A0 and the other Unicode spaces count, or as
// Latin-1 (Starlette), where the bytes 0x85 and 0xA0 are spaces. Go drops
// a name with such spaces as invalid, so Caddy reads no cookie from it.
func pyTrim(k string) string {
	for k != "" {
		r, n := utf8.DecodeRuneInString(k)
		if !pySpace(r, n, k[0]) {
			break
		}
		k = k[n:]
	}
	for k != "" {
		r, n := utf8.DecodeLastRuneInString(k)
		if !pySpace(r, n, k[len(k)-1]) {
			break
		}
		k = k[:len(k)-n]
	}
	return k
}

// pySpace reports whether the rune r, decoded from n bytes of which b is
// the outermost, is a space to Python: unicode.IsSpace, the separators
// 0x1C-0x1F, or a lone byte that is a space in Latin-1.
func pySpace(r rune, n int, b byte) bool {
	if r == utf8.RuneError && n == 1 {
		return b == 0x85 || b == 0xA0
	}
	return unicode.IsSpace(r) || 0x1C <= r && r <= 0x1F
}

// phpUnescape decodes a query or cookie name as PHP does (urldecode):
// '+' is a space, '%' and two hex digits the byte they name, and any other
// '%' stays as it is. Where Go's strict decoding fails, PHP still reads a
// name: `token%00%zz` is `token`, once cut at the NUL.
func phpUnescape(k string) string {
	if !strings.ContainsAny(k, "%+") {
		return k
	}
	b := make([]byte, 0, len(k))
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			if hi, lo, ok := hexPair(k, i+1); ok {
				c = hi<<4 | lo
				i += 2
			}
		}
		b = append(b, c)
	}
	return string(b)
}

// hexPair returns the values of the two hex digits at s[i:i+2], if they
// are.
func hexPair(s string, i int) (hi, lo byte, ok bool) {
	if i+2 > len(s) {
		return 0, 0, false
	}
	hi, ok1 := hexDigit(s[i])
	lo, ok2 := hexDigit(s[i+1])
	return hi, lo, ok1 && ok2
}

// hexDigit returns the value of the hex digit c, if it is one.
func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// splitCookies counts the cookies named name in one Cookie header, split
// at ';', and at ',' and whitespace within a part (see readCookie).
func splitCookies(line, name string) int {
	n := 0
	for part := range strings.SplitSeq(line, ";") {
		if part = strings.Trim(part, " \t"); !strings.Contains(part, "=") {
			if cookieNameIs(part, name) {
				n++
			}
			continue
		}
		if strings.ContainsAny(part, " \t") {
			// Go and the Python frameworks read `name =v` as name.
			part = spacedEquals.ReplaceAllString(part, "=")
		}
		for pair := range strings.FieldsFuncSeq(part, func(c rune) bool { return c == ',' || c == ' ' || c == '\t' }) {
			if k, _, ok := strings.Cut(pair, "="); ok && cookieNameIs(k, name) {
				n++
			}
		}
	}
	return n
}

// webobLegal is a byte WebOb allows in a cookie name or unquoted value.
const webobLegal = "[A-Za-z0-9_~!@#$%^&*()+=\\-`.?|:/{}<>']"

// webobCookie is WebOb's cookie pattern (Pyramid reads request cookies
// with it): it finds name=value pairs anywhere in a Cookie header, also
// inside another cookie's value, after any byte it does not allow in a
// name (`x=a"token=v` holds the cookie token).
var webobCookie = regexp.MustCompile(`(` + webobLegal + `+?)[ \t\n\r\f\v]*=[ \t\n\r\f\v]*` +
	`(?:"(?:\\"|.)*?"|[A-Za-z0-9_]{3},[ \t\n\r\f\v][A-Za-z0-9_-]{9,11}[ \t\n\r\f\v][0-9:]{8}[ \t\n\r\f\v]GMT|(?:` +
	webobLegal + `|\\(?:[0-3][0-7][0-7]|.))*)`)

// spacedEquals is an '=' with the spaces and tabs around it.
var spacedEquals = regexp.MustCompile(`[ \t]*=[ \t]*`)

// readCookie reads the cookie name as Caddy's replacer does: the first
// whose name matches ignoring case. More than one such cookie is
// unreadable, counted over the raw Cookie headers: a backend that matches
// names exactly, or reads the last, would check another one than the
// identity names. Pairs are counted split at ',' and whitespace too: Go
// reads `sid=a sid=b` as one cookie valued "a sid=b", where Python's
// SimpleCookie reads two. Spaces around '=' do not split a pair: Go,
// Starlette and Django read `sid =a` as sid, SimpleCookie `x=1 sid =a`
// too. A word without '=' counts only as a whole ';'-separated part, which
// Go and PHP read as a cookie with an empty value; inside a value
// (`tabs=home,sid`) no parser reads it as one. WebOb's reading, which finds
// pairs inside other values, is counted apart (webobCookie); the larger
// count decides.
//
// The value is trimmed as pyTrim trims a name: Go keeps the spaces in
// `sid=  v` (and `sid=" v"`), which most backends trim, so each number of
// spaces would be an identity of its own, proven by the one real value.
func readCookie(r *http.Request, name string) (value, unreadable string) {
	found := false
	for _, c := range r.Cookies() {
		if strings.EqualFold(c.Name, name) {
			value, found = pyTrim(c.Value), true
			break
		}
	}
	split, scanned := 0, 0
	for _, line := range r.Header["Cookie"] {
		split += splitCookies(line, name)
		for _, m := range webobCookie.FindAllStringSubmatch(line, -1) {
			if cookieNameIs(m[1], name) {
				scanned++
			}
		}
	}
	switch n := max(split, scanned); {
	case n > 1:
		unreadable = "Send one " + name + " cookie: requests carrying several (in any letter case) are not accepted here."
	case n == 1 && !found:
		unreadable = "Send the " + name + " cookie named exactly so: other spellings are not accepted here."
	}
	return value, unreadable
}
