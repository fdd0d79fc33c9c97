package mcplimit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// fingerprinter turns identity values into keyed fingerprints: the first
// 128 bits of HMAC-SHA256 under the zone's key. The key lives in Caddy's
// storage, so every instance and every restart computes the same
// fingerprint, and raw credentials never need to be stored: only its
// in-memory cache keeps proven identities' values (see fpCache).
type fingerprinter struct {
	key   []byte
	pool  sync.Pool
	cache *fpCache // proven identities' fingerprints under key
}

// macState is a pooled HMAC with scratch buffers for its input and output.
type macState struct {
	mac     hash.Hash
	scratch []byte
	out     [sha256.Size]byte
}

func newFingerprinter(key []byte) *fingerprinter {
	f := &fingerprinter{key: key, cache: newFPCache()}
	f.pool.New = func() any { return &macState{mac: hmac.New(sha256.New, key)} }
	return f
}

// sum returns the fingerprint of value.
func (f *fingerprinter) sum(value string) [16]byte {
	st := f.pool.Get().(*macState)
	st.mac.Reset()
	st.scratch = append(st.scratch[:0], value...)
	_, _ = st.mac.Write(st.scratch)
	st.mac.Sum(st.out[:0])
	var fp [16]byte
	copy(fp[:], st.out[:16])
	clear(st.scratch) // no credential bytes linger in pooled memory
	f.pool.Put(st)
	return fp
}

// identityValue is the one function that computes a request's identity:
// the identity placeholders' values joined with newlines. Every check
// and every mark uses it, so they cannot drift apart. It also returns why
// the identity headers do not name one credential the way every backend
// reads it, or why the values cannot be joined unambiguously (one holds a
// newline), or "" when they can; such a request must be refused.
func identityValue(r *http.Request, pol *policy) (value, unreadable string) {
	if pol.identityHeader != "" {
		return readHeader(r, pol.identityHeader)
	}
	if len(pol.identity) == 1 {
		value, _, unreadable = readPlaceholder(r, pol.identity[0])
		return value, cmp.Or(unreadable, lineBreak(pol.identity[0], value))
	}
	parts := make([]string, len(pol.identity))
	empty := true
	for i, p := range pol.identity {
		var why string
		var varied bool
		parts[i], varied, why = readPlaceholder(r, p)
		empty = empty && !varied
		if why == "" {
			// A query parameter or a cookie may hold one (%0A): then
			// ("a\nb", "c") and ("a", "b\nc") would join into one
			// identity, which the second caller would share unproven.
			why = lineBreak(p, parts[i])
		}
		unreadable = cmp.Or(unreadable, why)
	}
	if empty {
		return "", unreadable
	}
	return strings.Join(parts, "\n"), unreadable
}

// lineBreak says why the value of identity placeholder p is refused when
// it holds a line break, which a query parameter or a cookie may (%0A):
// several values are joined with newlines, and the fingerprint command
// reads one line per placeholder, so no value may hold one. It is ""
// otherwise.
func lineBreak(p, value string) string {
	if !strings.Contains(value, "\n") {
		return ""
	}
	return "An identity value (" + p + ") holds a line break, which is not accepted here: send it without one."
}

// placeholderValue evaluates one placeholder, as identityValue reads it.
func placeholderValue(r *http.Request, ph string) string {
	v, _, _ := readPlaceholder(r, ph)
	return v
}

// readPlaceholder evaluates one placeholder. A lone request-header
// placeholder is read straight from the header (see readHeader), without
// the replacer's allocations. Any other is evaluated by the request's
// replacer, with every request header, query parameter and cookie it names
// read and checked as readInput does. varied says a placeholder that
// differs from caller to caller (see variesByCaller) is not empty; when
// the text holds such placeholders and every one is empty, so is its
// value, whatever text and same-for-everyone placeholders surround them
// (`key:{...}` or `{env.PREFIX}{...}` with no key is no identity, not one
// that every keyless caller shares). Text without such placeholders keeps
// its value, never varied. unreadable says why the request does not name
// one value as every backend reads it.
func readPlaceholder(r *http.Request, ph string) (value string, varied bool, unreadable string) {
	if name, ok := headerPlaceholder(ph); ok {
		value, unreadable = readHeader(r, name)
		return value, value != "", unreadable
	}
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		repl = caddy.NewReplacer()
	}
	perCaller := false
	value, _ = repl.ReplaceFunc(ph, func(key string, val any) (any, error) {
		if v, why, ok := readInput(r, key); ok {
			val = v
			unreadable = cmp.Or(unreadable, why)
		} else if wholeQuery(key) && strings.IndexByte(r.RequestURI, '#') >= 0 {
			unreadable = cmp.Or(unreadable, rawHash)
		}
		if variesByCaller(key) {
			perCaller = true
			varied = varied || caddy.ToString(val) != ""
		}
		return val, nil
	})
	if perCaller && !varied {
		return "", false, unreadable
	}
	return value, varied, unreadable
}

// readHeader reads the request header name as Caddy's replacer computes
// it (values joined with commas), each value trimmed of what any backend
// reads as space around a key (trimSpaces: Go's HTTP/2 server keeps the spaces
// and tabs HTTP/1 parsers drop, Go's TrimSpace drops Unicode spaces,
// Python's strip more), a credentials header spelled canonically. Else
// " key" and "key\u00a0" would each be an identity of their own that a
// trimming backend reads as "key", and a value of spaces alone one it reads
// as no key at all. unreadable says why the header does not name one
// credential as every backend reads it: it is carried more than once
// (backends check the first value, the last or the joined list), or it
// holds Bearer or Basic credentials with more than one token (the
// TypeScript SDK reads the first and ignores the rest, so each suffix
// would be an identity of its own, proven by the one real token).
func readHeader(r *http.Request, name string) (value, unreadable string) {
	vals := headerValues(r, name)
	switch len(vals) {
	case 0:
		return "", ""
	case 1:
		value = trimSpaces(vals[0])
	default:
		trimmed := make([]string, len(vals))
		for i, v := range vals {
			trimmed[i] = trimSpaces(v)
		}
		value = strings.Join(trimmed, ",")
		unreadable = "Send exactly one " + textproto.CanonicalMIMEHeaderKey(name) + " header: requests carrying several are not accepted here."
	}
	if isCredentialsHeader(name) {
		var extra bool
		if value, extra = canonicalCredentials(value); extra && unreadable == "" {
			unreadable = "Malformed " + textproto.CanonicalMIMEHeaderKey(name) + " header: Bearer and Basic credentials are one token after the scheme."
		}
	}
	if unreadable == "" && connectionNames(r, name) {
		// A proxy drops the header before the backend sees it: its 2xx
		// would prove a credential it was never shown.
		unreadable = "The Connection header names " + textproto.CanonicalMIMEHeaderKey(name) + ", which a proxy removes before the server sees it: do not list it there."
	}
	return value, unreadable
}

// hopByHop are the headers reverse_proxy never forwards (its hopHeaders).
var hopByHop = []string{"Alt-Svc", "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// warnHopByHopIdentity warns about an identity header that reverse_proxy
// never forwards (Proxy-Authorization, say): the backend then never sees
// the credential, so its 2xx would prove whatever a caller sends.
func warnHopByHopIdentity(pol *policy, logger *zap.Logger) {
	if pol.trustIdentity {
		return
	}
	for _, ph := range pol.identity {
		for _, name := range headersIn(ph) {
			if !slices.ContainsFunc(hopByHop, func(h string) bool { return strings.EqualFold(h, name) }) {
				continue
			}
			logger.Warn("identity header is hop-by-hop: reverse_proxy does not forward it, so the backend never checks the credential it carries and proves any value; use trust_identity with an auth handler, or another header",
				zap.String("zone", pol.zone), zap.String("header", name))
		}
	}
}

// derivedValue reports whether the placeholder key is a value an earlier
// handler derived from the request (a `vars` variable, a regexp capture,
// a `map` output): any of Caddy's HTTP placeholders but the request's own
// inputs, an auth handler's user and the client address Caddy resolved.
func derivedValue(key string) bool {
	return strings.HasPrefix(key, "http.") && !strings.HasPrefix(key, "http.request.") && !strings.HasPrefix(key, "http.auth.") &&
		key != "http.vars.client_ip" && !hasPrefixIn(key, globalPlaceholders)
}

// warnDerivedIdentity warns about an identity read from a value an
// earlier handler derived from the request (derivedValue): the checks
// made of the request inputs an identity names itself (a header sent
// twice, a query parameter or cookie under two spellings, a line break)
// cannot see what went into it, so each variant a caller sends may be an
// identity of its own, proven by a backend that reads one of them. A
// map's destination or a plugin's placeholder, which only a request shows
// set, is warned about then (see unsetWatch).
func warnDerivedIdentity(pol *policy, logger *zap.Logger) {
	for _, ph := range pol.identity {
		for key := range placeholderKeys(ph) {
			if derivedValue(key) {
				logger.Warn(derivedIdentityWarning, zap.String("zone", pol.zone), zap.String("placeholder", "{"+key+"}"))
			}
		}
	}
}

// derivedIdentityWarning is the warning about an identity read from a
// value an earlier handler derived from the request.
const derivedIdentityWarning = "identity reads a value an earlier handler derived from the request: the checks of request inputs (a header sent twice, a parameter or cookie under two spellings) do not apply to what went into it; name the request input in identity, or derive the value from an authenticated one"

// unknownPlaceholder reports whether the placeholder key is none that
// Caddy answers itself: neither global nor one its HTTP server answers
// for every request (caddyHTTPPlaceholder). A JSON config's Caddyfile
// shorthand ({method}, {header.X}), a typo ({http.request.headers.X}) or
// a doubled brace ({{x}}) is empty for every caller, unless an earlier
// handler sets it (a map's destination, an auth handler's
// {http.auth.user.*}, a plugin's): see unsetWatch.
func unknownPlaceholder(key string) bool {
	return !caddyHTTPPlaceholder(key) && !hasPrefixIn(key, globalPlaceholders)
}

// headersIn returns the names of the request headers whose placeholders
// the identity input ph holds, alone or with text and other placeholders
// around them, read as Caddy's replacer reads them (placeholderKeys).
func headersIn(ph string) []string {
	var names []string
	for key := range placeholderKeys(ph) {
		if name, ok := strings.CutPrefix(key, headerPrefix); ok {
			names = append(names, name)
		}
	}
	return names
}

// warnTrustedClientInput warns when trust_identity proves on sight an
// input only the client writes (clientWritten): the Authorization header
// (basic_auth checks it but leaves it as sent), the URI or a cookie. Every
// value a caller makes up is then a proven identity with a tenant bucket
// of its own. Other headers are not warned about: forward_auth's
// copy_headers sets them from the auth server's answer.
func warnTrustedClientInput(pol *policy, logger *zap.Logger) {
	if !pol.trustIdentity {
		return
	}
	for _, ph := range pol.identity {
		if clientWritten(ph) {
			logger.Warn("trust_identity proves an input the client writes on sight: every made-up value gets a tenant bucket of its own; use a placeholder an earlier auth handler sets, such as {http.auth.user.id}",
				zap.String("zone", pol.zone), zap.String("identity", ph))
		}
	}
}

// clientWritten reports whether the identity input ph reads, alone or
// with text and other placeholders around it, an input that only the
// client writes: a credentials or Cookie header, a cookie, or any part of
// the request URI (the query, a parameter of it, the path).
func clientWritten(ph string) bool {
	for _, name := range headersIn(ph) {
		if isCredentialsHeader(name) || strings.EqualFold(name, "Cookie") {
			return true
		}
	}
	return strings.Contains(ph, "{http.request.uri") || strings.Contains(ph, "{http.request.orig_uri") || strings.Contains(ph, "{"+cookiePrefix)
}

// wholeQuery reports whether the placeholder key reads the request's
// whole query, alone (escaped, prefixed with '?') or in the URI.
func wholeQuery(key string) bool {
	switch key {
	case "http.request.uri", "http.request.uri_escaped", "http.request.uri.query", "http.request.uri.query_escaped",
		"http.request.uri.prefixed_query", "http.request.orig_uri", "http.request.orig_uri.query", "http.request.orig_uri.prefixed_query":
		return true
	}
	return false
}

// wholeInput reports whether the placeholder key reads a whole request
// input that carries several values: the query (wholeQuery), the Cookie
// header or the body. A caller adds a throwaway parameter or cookie, or
// reorders them, without changing the credential the backend reads in it.
func wholeInput(key string) bool {
	if name, ok := strings.CutPrefix(key, headerPrefix); ok {
		return strings.EqualFold(name, "Cookie")
	}
	return wholeQuery(key) || key == "http.request.body" || key == "http.request.body_base64"
}

// warnWholeInputIdentity warns about an identity that reads a whole
// request input carrying several values (wholeInput): every variant a
// caller makes of it (`?key=k&x=1`, `?x=1&key=k`) is an identity of its
// own, with a fresh budget, that the backend proves by the one credential
// in it. With trust_identity, warnTrustedClientInput warns instead.
func warnWholeInputIdentity(pol *policy, logger *zap.Logger) {
	if pol.trustIdentity {
		return
	}
	for _, ph := range pol.identity {
		for key := range placeholderKeys(ph) {
			if wholeInput(key) {
				logger.Warn("identity reads a whole request input that carries several values: a caller adds a throwaway parameter or cookie, or reorders them, and each variant is an identity of its own with a fresh budget that the backend proves; name the one input, such as {http.request.uri.query.key} or {http.request.cookie.session}",
					zap.String("zone", pol.zone), zap.String("placeholder", "{"+key+"}"))
			}
		}
	}
}

// clientInput reports whether the placeholder key reads an input the
// client sends: a request header, a cookie, or the request URI or a part
// of it.
func clientInput(key string) bool {
	return strings.HasPrefix(key, headerPrefix) || strings.HasPrefix(key, cookiePrefix) ||
		strings.HasPrefix(key, "http.request.uri") || strings.HasPrefix(key, "http.request.orig_uri")
}

// warnSeveralInputsIdentity warns about an identity that joins several
// inputs the client sends (`{http.request.header.X-Api-Key}
// {http.request.uri.query.key}`): a backend that reads the credential from
// one of them (a key in a header, or else in the query) proves every
// variant of the others, each an identity of its own with a fresh budget.
// With trust_identity, warnTrustedClientInput warns instead.
func warnSeveralInputsIdentity(pol *policy, logger *zap.Logger) {
	if pol.trustIdentity {
		return
	}
	var inputs []string
	for _, ph := range pol.identity {
		for key := range placeholderKeys(ph) {
			if clientInput(key) && !slices.Contains(inputs, "{"+key+"}") {
				inputs = append(inputs, "{"+key+"}")
			}
		}
	}
	if len(inputs) > 1 {
		logger.Warn("identity joins several inputs the client sends: a backend that reads the credential from one of them proves every variant of the others, each an identity of its own with a fresh budget; use one input, or have the backend refuse a request whose inputs it does not all check",
			zap.String("zone", pol.zone), zap.Strings("inputs", inputs))
	}
}

// connectionNames reports whether the request's Connection header lists
// the header name as hop-by-hop, which reverse_proxy then removes.
func connectionNames(r *http.Request, name string) bool {
	for _, v := range r.Header["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), name) {
				return true
			}
		}
	}
	return false
}

// headerPlaceholder returns the header name of a lone request-header
// placeholder such as {http.request.header.Authorization}.
func headerPlaceholder(ph string) (string, bool) {
	return lonePlaceholder(ph, headerPrefix)
}

// lonePlaceholder returns the name in ph when ph is one placeholder
// {<prefix><name>} and nothing else.
func lonePlaceholder(ph, prefix string) (string, bool) {
	if !strings.HasPrefix(ph, "{") {
		return "", false
	}
	name, ok := strings.CutPrefix(ph[1:], prefix)
	if !ok || !strings.HasSuffix(name, "}") || strings.ContainsAny(name[:len(name)-1], "{}") {
		return "", false
	}
	return name[:len(name)-1], true
}

// headerValues returns the values of the request header name.
func headerValues(r *http.Request, name string) []string {
	if vals, ok := r.Header[name]; ok { // already canonical, as most configs write it
		return vals
	}
	return r.Header[textproto.CanonicalMIMEHeaderKey(name)]
}

// isCredentialsHeader reports whether the header name carries RFC 9110
// credentials: Authorization or Proxy-Authorization.
func isCredentialsHeader(name string) bool {
	return name == "Authorization" || // as the default identity spells it: no folding
		strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "Proxy-Authorization")
}

// canonicalCredentials spells a credentials value ("<scheme> <token>")
// one way. RFC 9110 makes the auth-scheme case-insensitive and lets the
// whitespace vary, and backends (the official SDKs among them) accept
// every variant, so "bearer  abc" and "Bearer abc" must be one identity,
// or each variant would earn a budget of its own. The parts are separated
// by single spaces (split at what any backend reads as a space, see
// credentialFields), the scheme is capitalized ("Bearer") when credentials
// follow it, and the credentials keep their case; a lone token is only
// trimmed. A lone Bearer or Basic scheme carries no credential (""): a
// backend reads `Bearer ` as no token, so it is no identity, as an empty
// header is, not one every keyless caller shares (in 64 spellings of
// "bearer"). A value already in that form, as clients send it, is
// returned as is, read in one pass. extra reports Bearer or Basic
// credentials with more than one token.
func canonicalCredentials(v string) (canonical string, extra bool) {
	if spaces, ok := canonicalSpaces(v); ok {
		if spaces == 0 && tokenScheme(v) {
			return "", false
		}
		return v, spaces > 1 && tokenScheme(v[:strings.IndexByte(v, ' ')])
	}
	fields := credentialFields(v)
	switch {
	case len(fields) == 1 && tokenScheme(asciiFolded(fields[0])):
		return "", false
	case len(fields) > 1:
		fields[0] = capitalized(asciiFolded(fields[0]))
	}
	return strings.Join(fields, " "), len(fields) > 2 && tokenScheme(fields[0])
}

// credentialFields splits v at every run of what some backend reads as a
// space (anySpace): Go's Unicode spaces, and Python's, which also has
// 0x1C-0x1F and, decoding headers as Latin-1, the lone bytes 0x85 and
// 0xA0 (`Bearer\xa0k` is `Bearer k` to authlib).
func credentialFields(v string) []string {
	var fields []string
	for i := skipSpaces(v, 0); i < len(v); i = skipSpaces(v, i) {
		start := i
		for i < len(v) {
			r, n := utf8.DecodeRuneInString(v[i:])
			if anySpace(r, n, v[i]) {
				break
			}
			i += n
		}
		fields = append(fields, v[start:i])
	}
	return fields
}

// tokenScheme reports whether scheme takes a single token: Bearer, Basic.
func tokenScheme(scheme string) bool {
	return strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Basic")
}

// asciiFolded returns the scheme s with each rune that a backend's case
// rules read as ASCII letters replaced by them: Go's EqualFold matches
// `Baſic` to Basic (ſ folds to s, the Kelvin sign to k); Java's
// equalsIgnoreCase and .NET's OrdinalIgnoreCase read the dotless ı (Java
// the dotted İ too) as i; and the full upper-casing of JavaScript's
// toUpperCase, Python's upper and Java's toUpperCase turns ß into SS and
// the Latin ligatures into their letters (`Digeﬆ` is DIGEST), Python's
// casefold ẞ into ss. A lone byte 0xDF is ß to the servers that decode
// headers as Latin-1 (Python's, Node's). A backend
// that reads the scheme so accepts each such spelling, which must not be
// an identity of its own.
func asciiFolded(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if size == 1 && s[i] == 0xDF {
			r = 'ß' // a lone byte, which backends decoding Latin-1 read so
		}
		i += size
		if letters, ok := asciiLetters[r]; ok {
			b.WriteString(letters)
			continue
		}
		for f := unicode.SimpleFold(r); r >= utf8.RuneSelf && f != r; f = unicode.SimpleFold(f) {
			if f < utf8.RuneSelf {
				r = f
				break
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// asciiLetters are the runes no simple case fold joins to ASCII that
// backends' case rules read as ASCII letters (see asciiFolded).
var asciiLetters = map[rune]string{
	'ı': "i", 'İ': "i", 'ß': "ss", 'ẞ': "ss",
	'ﬀ': "ff", 'ﬁ': "fi", 'ﬂ': "fl", 'ﬃ': "ffi", 'ﬄ': "ffl", 'ﬅ': "st", 'ﬆ': "st",
}

// capitalized returns the ASCII word s with its first letter upper case
// and the others lower case.
func capitalized(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case i == 0 && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case i > 0 && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// canonicalSpaces reports whether canonicalCredentials would leave v
// unchanged (printable ASCII, single spaces between parts, and a
// capitalized scheme when a space follows it) and, if so, how many spaces
// separate its parts. Credentials run to hundreds of bytes (a JWT), so
// each part is checked eight bytes at a time.
func canonicalSpaces(v string) (spaces int, ok bool) {
	if v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return 0, false
	}
	sp := strings.IndexByte(v, ' ')
	if sp > 0 && !capitalizedWord(v[:sp]) {
		return 0, false
	}
	for ; sp >= 0; sp = strings.IndexByte(v, ' ') {
		// A part is never empty: v neither starts nor ends with a space,
		// so an empty part is two spaces in a row.
		if sp == 0 || !visible(v[:sp]) {
			return 0, false
		}
		spaces++
		v = v[sp+1:]
	}
	if !visible(v) {
		return 0, false
	}
	return spaces, true
}

// capitalizedWord reports whether the letters of w are as capitalized
// spells them: the first not lower case, the others not upper case.
func capitalizedWord(w string) bool {
	if 'a' <= w[0] && w[0] <= 'z' {
		return false
	}
	for i := 1; i < len(w); i++ {
		if 'A' <= w[i] && w[i] <= 'Z' {
			return false
		}
	}
	return true
}

// visible reports whether s is all visible ASCII (0x21-0x7E): control,
// space and non-ASCII bytes are what some backend may read as whitespace.
// From eight bytes on it reads words, the last one overlapping the one
// before it.
func visible(s string) bool {
	if len(s) < 8 {
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] >= 0x7F {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(s)-8; i += 8 {
		if !visibleWord(le64(s[i:])) {
			return false
		}
	}
	return visibleWord(le64(s[len(s)-8:]))
}

// visibleWord reports whether the eight bytes of x are all visible ASCII.
// A byte's high bit is set in below when it is under 0x21 (subtracting
// borrows; a borrow reaching higher bytes only ever follows such a byte)
// and in above when it is 0x7F or more (adding 1 carries into the high
// bit, which bytes of 0x80 and up have already).
func visibleWord(x uint64) bool {
	below := (x - ones*0x21) &^ x
	above := x + ones | x
	return (below|above)&highs == 0
}

// fingerprintHex formats a fingerprint as operators see it.
func fingerprintHex(fp [16]byte) string { return hex.EncodeToString(fp[:]) }

// keyStorage is what loading the fingerprint key needs from storage.
type keyStorage interface {
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
}

// offeredKey is the key a zone offers a storage that holds none: cached,
// the key this host last used for the zone, or else a new one.
func offeredKey(cached []byte) []byte {
	if cached != nil {
		return cached
	}
	return newFingerprintKey()
}

// newFingerprintKey returns a new random fingerprint key.
func newFingerprintKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails: crypto/rand crashes the program instead
	return key
}

// replaceFingerprintKey makes key the zone's fingerprint key in storage,
// replacing the one there, if any.
func replaceFingerprintKey(ctx context.Context, stor keyStorage, zone string, key []byte) error {
	name := fingerprintKeyName(zone)
	if err := stor.Lock(ctx, name); err != nil {
		return fmt.Errorf("locking fingerprint key %s: %w", name, err)
	}
	defer func() { _ = stor.Unlock(context.Background(), name) }()
	if cur, err := stor.Load(ctx, name); err == nil && bytes.Equal(cur, key) {
		return nil
	}
	if err := stor.Store(ctx, name, key); err != nil {
		return fmt.Errorf("storing fingerprint key %s: %w", name, err)
	}
	return nil
}

// fingerprintKeyName is the storage key of a zone's fingerprint key.
func fingerprintKeyName(zone string) string { return storagePrefix(zone) + "/fingerprint.key" }

// loadFingerprintKey returns the zone's fingerprint key from storage. When
// storage holds none, fresh becomes the key: it is stored under the
// storage lock and returned (created reports that).
func loadFingerprintKey(parent context.Context, stor keyStorage, zone string, fresh []byte) (key []byte, created bool, err error) {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	name := fingerprintKeyName(zone)
	if key, err := stor.Load(ctx, name); err == nil && len(key) == 32 {
		return key, false, nil
	}
	if err := stor.Lock(ctx, name); err != nil {
		return nil, false, fmt.Errorf("locking fingerprint key %s: %w", name, err)
	}
	defer func() { _ = stor.Unlock(context.Background(), name) }()
	key, err = stor.Load(ctx, name)
	if err == nil && len(key) == 32 {
		return key, false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("loading fingerprint key %s: %w", name, err)
	}
	if err := stor.Store(ctx, name, fresh); err != nil {
		return nil, false, fmt.Errorf("storing fingerprint key %s: %w", name, err)
	}
	return fresh, true, nil
}
