package mcplimit

import (
	"net/http"
	"net/url"
	"strings"
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
// backend reads them. The parameter sent only under such a spelling is
// unreadable as well: Caddy reads no identity, the backend may.
func readQuery(r *http.Request, name string) (value, unreadable string) {
	vals, present := r.URL.Query()[name]
	value = strings.Join(vals, ",")
	n := 0
	for pair := range strings.FieldsFuncSeq(r.URL.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
		k, _, _ := strings.Cut(pair, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if queryKeyIs(k, name) {
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
// as the parameter name: ignoring case, as an array (`name[]`, `name[0]`,
// as qs and PHP read them), or as PHP names its variable (phpName).
func queryKeyIs(k, name string) bool {
	if base, _, ok := strings.Cut(k, "["); ok && strings.EqualFold(base, name) {
		return true
	}
	return strings.EqualFold(k, name) || strings.EqualFold(phpName(k), phpName(name))
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
// as name: ignoring case, or %-decoded as PHP names its variable.
func cookieNameIs(k, name string) bool {
	if strings.EqualFold(k, name) {
		return true
	}
	if dk, err := url.QueryUnescape(k); err == nil {
		k = dk
	}
	return strings.EqualFold(phpName(k), phpName(name))
}

// readCookie reads the cookie name as Caddy's replacer does: the first
// whose name matches ignoring case. More than one such cookie is
// unreadable, counted over the raw Cookie headers: a backend that matches
// names exactly, or reads the last, would check another one than the
// identity names. Pairs are counted split at ',' and whitespace too: Go
// reads `sid=a sid=b` as one cookie valued "a sid=b", where Python's
// SimpleCookie reads two.
func readCookie(r *http.Request, name string) (value, unreadable string) {
	found := false
	for _, c := range r.Cookies() {
		if strings.EqualFold(c.Name, name) {
			value, found = c.Value, true
			break
		}
	}
	n := 0
	for _, line := range r.Header["Cookie"] {
		for part := range strings.FieldsFuncSeq(line, func(c rune) bool { return c == ';' || c == ',' || c == ' ' || c == '\t' }) {
			if k, _, _ := strings.Cut(part, "="); cookieNameIs(k, name) {
				n++
			}
		}
	}
	switch {
	case n > 1:
		unreadable = "Send one " + name + " cookie: requests carrying several (in any letter case) are not accepted here."
	case n == 1 && !found:
		unreadable = "Send the " + name + " cookie named exactly so: other spellings are not accepted here."
	}
	return value, unreadable
}
