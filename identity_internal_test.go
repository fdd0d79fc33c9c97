package mcplimit

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	maphandler "github.com/caddyserver/caddy/v2/modules/caddyhttp/map"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestCanonicalCredentials(t *testing.T) {
	tests := []struct {
		in, want string
		extra    bool // Bearer or Basic with more than one token
	}{
		{"Bearer abc", "Bearer abc", false},
		{"bearer abc", "Bearer abc", false},
		{"BEARER abc", "Bearer abc", false},
		{"bEaReR abc", "Bearer abc", false},
		{"Bearer  abc", "Bearer abc", false},
		{" Bearer abc ", "Bearer abc", false},
		{"Bearer\tabc", "Bearer abc", false},
		{"Bearer\u00a0abc", "Bearer abc", false},
		{"Bearer\xa0abc", "Bearer abc", false}, // Latin-1 spaces, lone bytes: Python splits there
		{"\x85Bearer \xa0\xa0abc", "Bearer abc", false},
		{"Bearer\x1fabc", "Bearer abc", false}, // so it does at 0x1C-0x1F
		{"Bearer abc\xa0junk", "Bearer abc junk", true},
		{"Bearer AbC", "Bearer AbC", false},                 // the token keeps its case
		{"Basic dXNlcjpwYXNz", "Basic dXNlcjpwYXNz", false}, // so does base64
		{"abcDEF", "abcDEF", false},                         // a lone token is not a scheme
		{" abcDEF ", "abcDEF", false},                       // only trimmed
		{"Digest a=1,  b=2", "Digest a=1, b=2", false},      // parameters: whitespace only
		{"Bearer abc junk", "Bearer abc junk", true},
		{"bearer  abc\tjunk", "Bearer abc junk", true},
		{"Basic dXNlcjpwYXNz x", "Basic dXNlcjpwYXNz x", true},
		{"", "", false},
		{"   ", "", false},
		{"Bearer", "", false}, // a scheme without a credential is none
		{"bearer ", "", false},
		{"\tBEARER\u00a0", "", false},
		{"Basic", "", false},
		{"Digest", "Digest", false}, // a scheme of its own parameters is a lone token
		// Go's EqualFold reads ſ as s and the Kelvin sign as k.
		{"Ba\u017fic dXNlcjpwYXNz", "Basic dXNlcjpwYXNz", false},
		{"BA\u017fIC dXNlcjpwYXNz", "Basic dXNlcjpwYXNz", false},
		{"Ba\u017fic", "", false},
		{"Tø\u212aen abc", "Tøken abc", false},
		// Java's equalsIgnoreCase and .NET's OrdinalIgnoreCase read the
		// dotless ı (and Java the dotted İ) as i.
		{"Bas\u0131c dXNlcjpwYXNz", "Basic dXNlcjpwYXNz", false},
		{"BAS\u0131C dXNlcjpwYXNz", "Basic dXNlcjpwYXNz", false},
		{"Bas\u0130c dXNlcjpwYXNz", "Basic dXNlcjpwYXNz", false},
		{"Ap\u0131Key abc", "Apikey abc", false},
		{"D\u0130gest a=1", "Digest a=1", false},
		{"Bas\u0131c", "", false},
		{"Bas\u0131c dXNlcjpwYXNz x", "Basic dXNlcjpwYXNz x", true},
		{"s\u0131d", "s\u0131d", false}, // a lone token is the credential itself: not folded
		// JavaScript's toUpperCase, Python's upper and Java's toUpperCase
		// turn ß and the Latin ligatures into ASCII letters.
		{"Dige\ufb06 u=2", "Digest u=2", false},
		{"Dige\ufb05 u=2", "Digest u=2", false},
		{"\ufb01x abc", "Fix abc", false},
		{"\ufb02ow abc", "Flow abc", false},
		{"O\ufb00 abc", "Off abc", false},
		{"O\ufb03ce abc", "Office abc", false},
		{"Ba\ufb04e abc", "Baffle abc", false},
		{"Ba\u00dfic abc", "Bassic abc", false},
		{"Digest\u00df u=2", "Digestss u=2", false},
		{"\u00dfx", "\u00dfx", false},           // a lone token: not folded
		{"\u1e9eWS okta1", "Ssws okta1", false}, // Python's casefold: ẞ is ss
		{"\xdfWS okta1", "Ssws okta1", false},   // the Latin-1 byte of ß
		{"SSWS okta1", "Ssws okta1", false},
		{"\xdf\xffWS k", "Ss\ufffdws k", false}, // another invalid byte stays invalid
	}
	for _, tt := range tests {
		if got, extra := canonicalCredentials(tt.in); got != tt.want || extra != tt.extra {
			t.Errorf("canonicalCredentials(%q) = %q, %v; want %q, %v", tt.in, got, extra, tt.want, tt.extra)
		}
		// The fast path agrees with the slow one (a lone scheme aside,
		// which both read as none).
		if _, ok := canonicalSpaces(tt.in); ok && tt.in != tt.want && tt.want != "" {
			t.Errorf("%q taken as canonical, but canonical is %q", tt.in, tt.want)
		}
		if got, _ := canonicalCredentials(tt.want); got != tt.want {
			t.Errorf("not idempotent: %q -> %q", tt.want, got)
		}
	}
	if _, ok := canonicalSpaces("Bearer " + strings.Repeat("x", 40)); !ok {
		t.Error("a canonical bearer value takes the slow path")
	}
}

// TestCanonicalSpacesReadsEveryByte checks the word-at-a-time reading of
// canonicalSpaces against a byte-by-byte one: every byte value at every
// offset of values long enough to be read in words, and random values of
// the bytes that decide.
func TestCanonicalSpacesReadsEveryByte(t *testing.T) {
	check := func(v string) {
		t.Helper()
		gotN, gotOK := canonicalSpaces(v)
		wantN, wantOK := canonicalSpacesByByte(v)
		if gotN != wantN || gotOK != wantOK {
			t.Fatalf("canonicalSpaces(%q) = %d, %v; byte by byte %d, %v", v, gotN, gotOK, wantN, wantOK)
		}
	}
	for _, base := range []string{"Bearer " + strings.Repeat("x", 25), strings.Repeat("k", 24)} {
		for i := range len(base) {
			for c := range 256 {
				check(base[:i] + string([]byte{byte(c)}) + base[i+1:])
			}
		}
	}
	alphabet := []byte("aBz ZeR\t\x1f\x7f\x80\xa0~!0")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

// TestVisibleReadsEveryByte puts every byte value at every offset of
// strings from 1 to 24 bytes long, around the word boundaries.
func TestVisibleReadsEveryByte(t *testing.T) {
	for n := 1; n <= 24; n++ {
		for i := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("k", n))
				b[i] = byte(c)
				if want := c > ' ' && c < 0x7F; visible(string(b)) != want {
					t.Fatalf("visible(%q) = %v, want %v", b, !want, want)
				}
			}
		}
	}
}

// canonicalSpacesByByte is canonicalSpaces read one byte at a time.
func canonicalSpacesByByte(v string) (spaces int, ok bool) {
	if v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return 0, false
	}
	sp := strings.IndexByte(v, ' ')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < ' ' || c >= 0x7F:
			return 0, false
		case c == ' ' && v[i-1] == ' ':
			return 0, false
		case c == ' ':
			spaces++
		case sp > 0 && i == 0 && 'a' <= c && c <= 'z', sp > 0 && i > 0 && i < sp && 'A' <= c && c <= 'Z':
			return 0, false
		}
	}
	return spaces, true
}

// FuzzCanonicalCredentials checks that the fast path never keeps a value
// the slow path would change, nor reads its tokens differently, and that
// canonical values are fixed points.
func FuzzCanonicalCredentials(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  abc", " x ", "Basic a\tb", "Bearer\u00a0abc", "BEARER", "a  b  c", "Bearer\x00abc", "Bearer a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields := strings.FieldsFunc(s, func(r rune) bool { return r < ' ' || r == '\uFEFF' || unicode.IsSpace(r) })
		switch {
		case len(fields) == 1 && tokenScheme(fields[0]):
			fields = nil
		case len(fields) > 1:
			fields[0] = capitalized(fields[0])
		}
		want := strings.Join(fields, " ")
		wantExtra := len(fields) > 2 && tokenScheme(fields[0])
		if got, extra := canonicalCredentials(s); got != want || extra != wantExtra {
			t.Fatalf("canonicalCredentials(%q) = %q, %v; want %q, %v", s, got, extra, want, wantExtra)
		}
		if got, _ := canonicalCredentials(want); got != want {
			t.Fatalf("not a fixed point: %q -> %q", want, got)
		}
	})
}

// wantStartWarnings checks, per identity, the warnings warn logs at
// provision for a handler with that identity (its arguments separated by
// spaces): want[ident] is their number without and with trust_identity.
func wantStartWarnings(t *testing.T, warn func(*policy, *zap.Logger), want map[string][2]int) {
	t.Helper()
	for ident, w := range want {
		pol, err := compile(&Handler{Identity: strings.Fields(ident)})
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.WarnLevel)
		warn(pol, zap.New(core))
		plain := logs.Len()
		pol.trustIdentity = true
		warn(pol, zap.New(core))
		if got := [2]int{plain, logs.Len() - plain}; got != w {
			t.Errorf("identity %s: %d warnings, %d with trust_identity; want %d and %d", ident, got[0], got[1], w[0], w[1])
		}
	}
}

// An identity header that reverse_proxy never forwards is warned about at
// provision: the backend would prove any value it carries. With
// trust_identity the backend's verdict is not what proves it.
func TestHopByHopIdentityHeaderIsWarnedAbout(t *testing.T) {
	wantStartWarnings(t, warnHopByHopIdentity, map[string][2]int{
		"{http.request.header.Proxy-Authorization}":             {1, 0},
		"{http.request.header.proxy-authorization}":             {1, 0},
		"key:{http.request.header.Proxy-Authorization}":         {1, 0},
		"{system.os}-{http.request.header.Proxy-Authorization}": {1, 0},
		"{http.request.header.Alt-Svc}":                         {1, 0},
		"{http.request.header.Authorization}":                   {0, 0},
		"{http.request.header.X-Api-Key}":                       {0, 0},
	})
}

// An identity read from a value an earlier handler derived from the
// request is warned about at provision, with or without trust_identity:
// the checks of repeated request inputs cannot see what went into it.
func TestDerivedIdentityIsWarnedAbout(t *testing.T) {
	wantStartWarnings(t, warnDerivedIdentity, map[string][2]int{
		"{http.vars.key}":                           {1, 1},
		"key:{http.regexp.tok.1}":                   {1, 1},
		"{mykey}":                                   {0, 0},
		"{http.vars.client_ip}":                     {0, 0},
		"{http.request.header.Authorization}":       {0, 0},
		"{http.auth.user.id}":                       {0, 0},
		"{system.os}-{http.request.cookie.session}": {0, 0},
	})
}

// An identity that reads a whole input carrying several values (the
// query, the Cookie header, the body) is warned about at provision: a
// throwaway parameter or cookie makes a fresh identity the backend
// proves. With trust_identity the client-input warning says it instead.
func TestWholeInputIdentityIsWarnedAbout(t *testing.T) {
	wantStartWarnings(t, warnWholeInputIdentity, map[string][2]int{
		"{http.request.uri.query}":               {1, 0},
		"{http.request.uri}":                     {1, 0},
		"{http.request.orig_uri.query}":          {1, 0},
		"{http.request.uri.prefixed_query}":      {1, 0},
		"{http.request.orig_uri.prefixed_query}": {1, 0},
		"{http.request.uri.query_escaped}":       {1, 0},
		"{http.request.uri_escaped}":             {1, 0},
		"{http.request.header.Cookie}":           {1, 0},
		"{http.request.header.cookie}":           {1, 0},
		"key:{http.request.body}":                {1, 0},
		"{http.request.uri.query.key}":           {0, 0},
		"{http.request.uri.path}":                {0, 0},
		"{http.request.cookie.session}":          {0, 0},
		"{http.request.header.Authorization}":    {0, 0},
		"{http.request.header.X-Cookie}":         {0, 0},
		"{http.request.uri.query.query}":         {0, 0},
	})
}

// An identity joining several inputs the client sends is warned about at
// provision, in one placeholder text or in several: a backend reading the
// credential from one of them proves every variant of the others.
func TestIdentityOfSeveralClientInputsIsWarnedAbout(t *testing.T) {
	wantStartWarnings(t, warnSeveralInputsIdentity, map[string][2]int{
		"{http.request.header.X-Api-Key} {http.request.uri.query.key}":  {1, 0},
		"{http.request.header.Authorization} {http.request.cookie.sid}": {1, 0},
		"{http.request.uri.path} {http.request.header.X-Tenant}":        {1, 0},
		"{http.request.header.X-Api-Key}":                               {0, 0},
		"{http.auth.user.id} {http.request.header.X-Api-Key}":           {0, 0},
		"{env.PREFIX} {http.request.uri.query.key}":                     {0, 0},
	})
}

// A placeholder that Caddy does not answer itself, in identity, the group
// key or a tier's match, is warned about at the first request for which
// no earlier handler set it, once: a JSON config's shorthand, a map's
// destination, and under http. a typo of one of Caddy's own or one an
// auth handler sets. One that Caddy's map handler sets before the handler
// runs is not, but in identity one outside http. is a value derived from
// the request, warned about once too.
func TestUnsetPlaceholderIsWarnedAbout(t *testing.T) {
	for _, c := range []struct {
		text           string
		derived, unset int
	}{
		{"{method}", 1, 3},
		{"{header.X-Api-Key}", 1, 3},
		{"{{http.request.header.X-Api-Key}}", 1, 3},
		{"{env.PREFIX}-{mykey}", 1, 3},
		{"{http.request.headers.X-Api-Key}", 0, 3},
		{"{http.request.query.key}", 0, 3},
		{"{http.request.header}", 0, 3},
		{"{http.auth.user.id}", 0, 3},
		{"{http.regexp.key.1}", 0, 3},
		{"{http.request.header.X-Api-Key}", 0, 0},
		{"{http.request.uri.query.key}", 0, 0},
		{"{http.request.remote.host/24}", 0, 0},
		{"{http.request.tls.client.fingerprint}", 0, 0},
		{"{http.request.host.labels.5}", 0, 0},
		{"{http.request.uri.path.7}", 0, 0},
		{"{http.request.orig_uri.path.7}", 0, 0},
		{"{http.vars.key}", 0, 0},
		{"{env.PREFIX}-{http.request.cookie.sid}", 0, 0},
	} {
		h := &Handler{
			Identity: []string{c.text},
			Group:    &Group{Key: c.text, Rate: "1/s"},
			Tiers:    []Tier{{Name: "paid", Match: TierMatch{Placeholder: c.text, Values: []string{"paid"}}, Limits: Limits{Quota: &QuotaLimit{Day: 9}}}},
		}
		logs, warn := watchUnset(t, h)
		var keys []string
		for _, w := range h.unset {
			keys = append(keys, w.key)
		}
		if c.unset == 0 && len(keys) != 0 {
			t.Errorf("%s: watches for %q, want none: Caddy answers them", c.text, keys)
		}
		mapped := &maphandler.Handler{Source: "{http.request.method}", Destinations: keys, Defaults: make([]string, len(keys))}
		if err := mapped.ServeHTTP(httptest.NewRecorder(), unsetRequest(), warn); err != nil {
			t.Fatal(err)
		}
		// Set, the identity's is a value derived from the request.
		if got := logs.FilterMessage(derivedIdentityWarning).Len(); got != c.derived || logs.Len() != c.derived {
			t.Fatalf("%s: %d warnings, %d of them of a derived identity, when a map sets it; want %d of those alone", c.text, logs.Len(), got, c.derived)
		}
		for range 2 {
			_ = warn(httptest.NewRecorder(), unsetRequest())
		}
		if got := logs.Len() - c.derived; got != c.unset {
			t.Errorf("%s: %d warnings for two requests without the map, want %d (identity, group, tier)", c.text, got, c.unset)
		}
		for range 2 {
			if err := mapped.ServeHTTP(httptest.NewRecorder(), unsetRequest(), warn); err != nil {
				t.Fatal(err)
			}
		}
		if got := logs.Len(); got != c.derived+c.unset {
			t.Errorf("%s: %d warnings after more requests, want each given once (%d)", c.text, got, c.derived+c.unset)
		}
		for _, e := range logs.All() {
			if ph := e.ContextMap()["placeholder"]; !strings.HasPrefix(c.text, "{env") && !strings.Contains(c.text, ph.(string)) {
				t.Errorf("%s: warning names %v", c.text, ph)
			}
			if typo := strings.Contains(e.Message, "a typo, such as {http.request.headers"); typo != strings.HasPrefix(c.text, "{http.") {
				t.Errorf("%s: warning %q", c.text, e.Message)
			}
		}
	}
}

// Every placeholder caddyhttp's replacer answers is Caddy's own, so no
// handler pays for watching it; a near miss of one is not.
func TestCaddysOwnHTTPPlaceholders(t *testing.T) {
	own := []string{
		"method", "scheme", "proto", "proto_name", "host", "port", "hostport",
		"local", "local.host", "local.port", "remote", "remote.host", "remote.port",
		"uri", "uri_escaped", "uri.path", "uri.path_escaped", "uri.query", "uri.query_escaped", "uri.prefixed_query",
		"duration", "duration_ms", "uuid", "body", "body_base64",
		"orig_method", "orig_uri", "orig_uri.path", "orig_uri.query", "orig_uri.prefixed_query",
		"header.X-Api-Key", "cookie.sid", "uri.query.key", "tls.client.fingerprint", "uri.path.file.base",
		"orig_uri.path.file_escaped", "host.labels.0", "remote.host/24,64", "remote.host/24",
		"uri.path.file", "uri.path.dir", "uri.path.file.ext", "uri.path.0", "orig_uri.path.file", "orig_uri.path.dir", "orig_uri.path.2",
		"host.labels.12", "tls.version", "tls.cipher_suite", "tls.resumed", "tls.proto", "tls.proto_mutual", "tls.server_name", "tls.ech",
		"tls.client.public_key", "tls.client.public_key_sha256", "tls.client.issuer", "tls.client.serial", "tls.client.subject",
		"tls.client.certificate_pem", "tls.client.certificate_der_base64", "TLS.Client.Fingerprint",
		"tls.client.san.dns_names", "tls.client.san.emails.0", "tls.client.san.ips", "tls.client.san.uris.3",
	}
	for _, name := range own {
		if key := "http.request." + name; !caddyHTTPPlaceholder(key) {
			t.Errorf("{%s} is not read as Caddy's own", key)
		}
	}
	for _, key := range []string{"http.vars.client_ip", "http.response.header.X", "http.shutting_down", "http.time_until_shutdown"} {
		if !caddyHTTPPlaceholder(key) {
			t.Errorf("{%s} is not read as Caddy's own", key)
		}
	}
	for _, key := range []string{
		"http.request.headers.X-Api-Key", "http.request.header", "http.request.query.key", "http.request.uri.querys",
		"http.request.remote.ip", "http.request.cookies.sid", "http.auth.user.id", "http.regexp.k.1", "http.var.key",
		"http.response.headers.X", "request.header.X", "http.request.methods",
		// Typos under the prefixes the replacer reads by name or index.
		"http.request.tls.client.fingerprints", "http.request.tls.versions", "http.request.tls.client.san.dns",
		"http.request.tls.client.san.dns_names.x", "http.request.tls.client.san.dns_names0", "http.request.tls.client.san.emails.-1",
		"http.request.host.labels.first", "http.request.host.labels.-1", "http.request.uri.path.x", "http.request.uri.path.files",
		"http.request.orig_uri.path.last", "http.request.remote.host/x", "http.request.remote.host/24,", "http.request.remote.host/24,64,8",
		"http.request.remote.host/129", "http.request.7",
	} {
		if caddyHTTPPlaceholder(key) {
			t.Errorf("{%s} is read as Caddy's own", key)
		}
	}
}

// A watch looks at the handler's first unsetChecks requests only: asking
// the replacer runs the map again, which a busy handler must not pay for
// each request.
func TestUnsetPlaceholderIsLookedForInTheFirstRequestsOnly(t *testing.T) {
	h := &Handler{Tiers: []Tier{{Name: "paid", Match: TierMatch{Placeholder: "{plan}", Values: []string{"paid"}}, Limits: Limits{Quota: &QuotaLimit{Day: 9}}}}}
	logs, warn := watchUnset(t, h)
	mapped := &maphandler.Handler{Source: "{http.request.method}", Destinations: []string{"plan"}, Defaults: []string{"free"}}
	for range unsetChecks {
		if err := mapped.ServeHTTP(httptest.NewRecorder(), unsetRequest(), warn); err != nil {
			t.Fatal(err)
		}
	}
	_ = warn(httptest.NewRecorder(), unsetRequest()) // unset, but past the checks
	if logs.Len() != 0 {
		t.Fatalf("%d warnings after %d requests that set it and one that did not, want none", logs.Len(), unsetChecks)
	}
}

// watchUnset compiles h and gives it the placeholder watches and a log
// to record their warnings in, and returns the log and a next handler
// that runs the watches.
func watchUnset(t *testing.T, h *Handler) (*observer.ObservedLogs, caddyhttp.HandlerFunc) {
	t.Helper()
	pol, err := compile(h)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	h.logger, h.zone, h.unset = zap.New(core), &zone{name: "z"}, unsetWatches(pol)
	return logs, func(_ http.ResponseWriter, r *http.Request) error {
		h.warnUnsetPlaceholders(r)
		return nil
	}
}

// unsetRequest is a request as Caddy hands it to a handler, with its
// replacer.
func unsetRequest() *http.Request {
	return caddyhttp.PrepareRequest(httptest.NewRequest(http.MethodPost, "/mcp", nil), caddy.NewReplacer(), nil, nil)
}

// trust_identity on an input only the client writes is warned about at
// provision; on one an auth handler sets, it is not.
func TestTrustedClientInputIsWarnedAbout(t *testing.T) {
	wantStartWarnings(t, warnTrustedClientInput, map[string][2]int{
		"{http.request.header.Authorization}":                  {0, 1},
		"{http.request.header.authorization}":                  {0, 1},
		"{http.request.uri.query.key}":                         {0, 1},
		"{http.request.uri.query}":                             {0, 1},
		"{http.request.uri}":                                   {0, 1},
		"{http.request.orig_uri.path}":                         {0, 1},
		"{http.request.header.Cookie}":                         {0, 1},
		"{http.request.header.Proxy-Authorization}":            {0, 1},
		"key:{http.request.cookie.sid}":                        {0, 1},
		"key:{http.request.header.Authorization}":              {0, 1},
		"{system.os}{http.request.header.Proxy-Authorization}": {0, 1},
		"{http.request.header.Cookie}-x":                       {0, 1},
		"{system.os}-{http.auth.user.id}":                      {0, 0},
		"{http.auth.user.id}":                                  {0, 0},
		"{http.request.header.Remote-User}":                    {0, 0},
		"{http.request.tls.client.fingerprint}":                {0, 0},
	})
}

// inputName's queryKey and cookie count every spelling under which some
// backend reads a query parameter or a cookie: case, arrays as qs and PHP
// read them, PHP's mangled and (for cookies) %-decoded names.
func TestEverySpellingABackendReadsCounts(t *testing.T) {
	for _, c := range []struct {
		key, name string
		want      bool
	}{
		{"token", "token", true},
		{"Token", "token", true},
		{"token[]", "token", true},
		{"token[0]", "token", true},
		{"api.key", "api_key", true},
		{"api key", "api_key", true},
		{"api[key", "api_key", true},
		{" token", "token", true},
		{"token\x00x", "token", true},
		{"tokens", "token", false},
		{"tok", "token", false},
		{"apikey", "api_key", false},
		{"[token]", "token", true},
		{"[TOKEN][]", "token", true},
		{"api.key[]", "api_key", true},
		{"api key[0]", "api_key", true},
		{"[tokens]", "token", false},
		{"x[token]", "token", false},
		{"token]", "token", true},
		{"[token", "token", true},
		{"]token", "token", true},
		{"[[token]]", "token", true},
		{"]]token]]", "token", true},
		{"filters[token]", "token", false},
		// The ASCII spelling of a non-ASCII name whose case fold is
		// shorter in bytes: backends that fold case read `sid` as `ſid`.
		{"sid", "ſid", true},
		{"SID", "ſid", true},
		{"si", "ſid", false},
	} {
		if got := newInputName(c.name).queryKey(c.key); got != c.want {
			t.Errorf("queryKey(%q) of %q = %v, want %v", c.key, c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		key, name string
		want      bool
	}{
		{"api_key", "api_key", true},
		{"API_KEY", "api_key", true},
		{"api.key", "api_key", true},
		{"api%5Fkey", "api_key", true},
		{"%20api_key", "api_key", true},
		{"apikey", "api_key", false},
		{"theme", "api_key", false},
		{"api_key%00%zz", "api_key", true},
		{"api+key", "api_key", true},
		{"api_key[]", "api_key", true},
		{"\xc2\xa0api_key", "api_key", true},
		{"\xa0api_key", "api_key", true},
		{"api_key\xa0", "api_key", true},
		{"\x85api_key", "api_key", true},
		{"\u3000api_key\u2003", "api_key", true},
		{"\xa0api_keys", "api_key", false},
		{"\xe9api_key", "api_key", false},
	} {
		if got := newInputName(c.name).cookie(c.key); got != c.want {
			t.Errorf("cookie(%q) of %q = %v, want %v", c.key, c.name, got, c.want)
		}
	}
}

// phpUnescape reads a name as PHP's urldecode does, escapes Go refuses to
// decode included.
func TestPHPUnescapeDecodesWhatItCanAndKeepsTheRest(t *testing.T) {
	for in, want := range map[string]string{
		"token":       "token",
		"token%00%zz": "token\x00%zz",
		"a+b":         "a b",
		"%4":          "%4",
		"%41%":        "A%",
		"%zz%41":      "%zzA",
		"%6F%6f":      "oo",
		"":            "",
	} {
		if got := phpUnescape(in); got != want {
			t.Errorf("phpUnescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// A cookie value is fingerprinted as one spelling of what backends read:
// trimmed, cut where WebOb stops reading it, %-decoded, '+' and space one.
func TestCanonicalCookieValueJoinsSpellingsBackendsRead(t *testing.T) {
	for in, want := range map[string]string{
		"c1":          "c1",
		"  c1 ":       "c1",
		"%63%31":      "c1",
		"c%31":        "c1",
		"a+b":         "a b",
		"a%20b":       "a b",
		"a%2Bb":       "a b",
		"\xc2\xa0c1":  "c1",
		"%zz":         "%zz",
		"c1 x1":       "c1",
		"c1,x":        "c1",
		"c1[0]":       "c1",
		"c1]":         "c1",
		"c1%EF%BB%BF": "c1",
		"%01c1%1B":    "c1",
	} {
		if got := canonicalCookieValue(in); got != want {
			t.Errorf("canonicalCookieValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// Around a key, an identity header or query parameter is trimmed of what
// any backend reads as space, so that each spelling is not an identity of
// its own, and one of spaces alone is no identity; nor is a template
// whose placeholders are all empty, whatever text surrounds them.
func TestIdentityInputsAreReadAsTrimmingBackendsReadThem(t *testing.T) {
	for _, c := range []struct {
		identity, target, header, want string
	}{
		{"{http.request.header.X-Api-Key}", "/mcp", "k\u00a0", "k"},
		{"{http.request.header.X-Api-Key}", "/mcp", "\u3000k\u2003", "k"},
		{"{http.request.header.X-Api-Key}", "/mcp", "\xa0", ""},
		{"{http.request.header.X-Api-Key}", "/mcp", "\u3000", ""},
		{"{http.request.uri.query.key}", "/mcp?key=+", "", ""},
		{"{http.request.uri.query.key}", "/mcp?key=%E3%80%80", "", ""},
		{"{http.request.uri.query.key}", "/mcp?key=k%C2%A0", "", "k"},
		{"{http.request.uri.query.key}", "/mcp?key=%20k", "", "k"},
		// JavaScript's trim takes U+FEFF, Java's every control character below the space.
		{"{http.request.uri.query.key}", "/mcp?key=k%EF%BB%BF%EF%BB%BF", "", "k"},
		{"{http.request.uri.query.key}", "/mcp?key=%00k%01%1B", "", "k"},
		{"{http.request.uri.query.key}", "/mcp?key=%EF%BB%BF", "", ""},
		{"key:{http.request.header.X-Api-Key}", "/mcp", "", ""},
		{"key:{http.request.header.X-Api-Key}", "/mcp", " k ", "key:k"},
		{"{system.os}/{http.request.uri.query.key}", "/mcp", "", ""},
		{"{system.os}/{http.request.uri.query.key}", "/mcp?key=q", "", runtime.GOOS + "/q"},
		{"{http.request.uri.query.key}{http.request.uri.query.key}", "/mcp?key=q", "", "qq"},
	} {
		pol, err := compile(&Handler{Identity: []string{c.identity}})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "http://test"+c.target, nil)
		if c.header != "" {
			r.Header["X-Api-Key"] = []string{c.header}
		}
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, nil)
		if got, why := identityValue(r, pol); got != c.want || why != "" {
			t.Errorf("identity %s, %s, X-Api-Key %q: %q (%q), want %q", c.identity, c.target, c.header, got, why, c.want)
		}
	}
}
