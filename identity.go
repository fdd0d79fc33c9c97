package mcplimit

import (
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
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// fingerprinter turns identity values into keyed fingerprints: the first
// 128 bits of HMAC-SHA256 under the zone's key. The key lives in Caddy's
// storage, so every instance and every restart computes the same
// fingerprint, and raw credentials never need to be kept anywhere.
type fingerprinter struct {
	key  []byte
	pool sync.Pool
}

// macState is a pooled HMAC with scratch buffers for its input and output.
type macState struct {
	mac     hash.Hash
	scratch []byte
	out     [sha256.Size]byte
}

func newFingerprinter(key []byte) *fingerprinter {
	f := &fingerprinter{key: key}
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
// and every mark uses it, so they cannot drift apart.
func identityValue(r *http.Request, repl *caddy.Replacer, placeholders []string) string {
	if len(placeholders) == 1 {
		return placeholderValue(r, repl, placeholders[0])
	}
	parts := make([]string, len(placeholders))
	empty := true
	for i, p := range placeholders {
		parts[i] = placeholderValue(r, repl, p)
		empty = empty && parts[i] == ""
	}
	if empty {
		return ""
	}
	return strings.Join(parts, "\n")
}

// unreadableIdentity returns why r's identity headers do not name one
// credential the way every backend reads it, or "" when they do: a header
// carried more than once (backends check the first value, the last or the
// joined list), or Bearer or Basic credentials with more than one token
// (the TypeScript SDK reads the first and ignores the rest, so each suffix
// would be an identity of its own, proven by the one real token).
func unreadableIdentity(r *http.Request, placeholders []string) string {
	for _, ph := range placeholders {
		name, ok := headerPlaceholder(ph)
		if !ok {
			continue
		}
		switch vals := headerValues(r, name); {
		case len(vals) > 1:
			return "Send exactly one " + textproto.CanonicalMIMEHeaderKey(name) + " header: requests carrying several are not accepted here."
		case len(vals) == 1 && isCredentialsHeader(name) && extraTokens(vals[0]):
			return "Malformed " + textproto.CanonicalMIMEHeaderKey(name) + " header: Bearer and Basic credentials are one token after the scheme."
		}
	}
	return ""
}

// extraTokens reports whether v is Bearer or Basic credentials with more
// than one token after the scheme. A value with at most one space and no
// other whitespace, as clients send them, is decided without splitting.
func extraTokens(v string) bool {
	spaces := 0
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == ' ' {
			spaces++
		} else if c < ' ' || c >= 0x7F {
			spaces = 2 // maybe other whitespace: split to know
			break
		}
	}
	if spaces < 2 {
		return false
	}
	f := strings.Fields(v)
	return len(f) > 2 && (strings.EqualFold(f[0], "Bearer") || strings.EqualFold(f[0], "Basic"))
}

// headerPlaceholder returns the header name of a lone request-header
// placeholder such as {http.request.header.Authorization}.
func headerPlaceholder(ph string) (string, bool) {
	name, ok := strings.CutPrefix(ph, "{http.request.header.")
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

// placeholderValue evaluates one placeholder. A lone request-header
// placeholder is read straight from the header, exactly as Caddy's
// replacer computes it (values joined with commas), without the
// replacer's allocations.
func placeholderValue(r *http.Request, repl *caddy.Replacer, ph string) string {
	if name, ok := headerPlaceholder(ph); ok {
		vals := headerValues(r, name)
		var v string
		if len(vals) == 1 {
			v = vals[0]
		} else {
			v = strings.Join(vals, ",")
		}
		if isCredentialsHeader(name) {
			v = canonicalCredentials(v)
		}
		return v
	}
	return repl.ReplaceAll(ph, "")
}

// isCredentialsHeader reports whether the header name carries RFC 9110
// credentials: Authorization or Proxy-Authorization.
func isCredentialsHeader(name string) bool {
	return strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "Proxy-Authorization")
}

// canonicalCredentials spells a credentials value ("<scheme> <token>")
// one way. RFC 9110 makes the auth-scheme case-insensitive and lets the
// whitespace vary, and backends (the official SDKs among them) accept
// every variant, so "bearer  abc" and "Bearer abc" must be one identity,
// or each variant would earn a budget of its own. The parts are separated
// by single spaces (split as strings.Fields splits them), the scheme is
// capitalized ("Bearer") when credentials follow it, and the credentials
// keep their case; a lone token is only trimmed. A value already in that
// form, as clients send it, is returned as is.
func canonicalCredentials(v string) string {
	if isCanonicalCredentials(v) {
		return v
	}
	fields := strings.Fields(v)
	if len(fields) > 1 {
		fields[0] = capitalized(fields[0])
	}
	return strings.Join(fields, " ")
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

// isCanonicalCredentials reports whether canonicalCredentials would leave
// v unchanged: printable ASCII, single spaces between parts, and a
// capitalized scheme when a space follows it.
func isCanonicalCredentials(v string) bool {
	if v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	sp := strings.IndexByte(v, ' ')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < ' ' || c >= 0x7F:
			return false // control or non-ASCII bytes, maybe whitespace: the slow path decides
		case c == ' ' && v[i-1] == ' ':
			return false
		case sp > 0 && i == 0 && 'a' <= c && c <= 'z', sp > 0 && i > 0 && i < sp && 'A' <= c && c <= 'Z':
			return false
		}
	}
	return true
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

// loadFingerprintKey returns the zone's fingerprint key from storage,
// creating it under the storage lock on first use (created reports that).
func loadFingerprintKey(parent context.Context, stor keyStorage, zone string) (key []byte, created bool, err error) {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	name := storagePrefix(zone) + "/fingerprint.key"
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
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, false, fmt.Errorf("generating fingerprint key: %w", err)
	}
	if err := stor.Store(ctx, name, key); err != nil {
		return nil, false, fmt.Errorf("storing fingerprint key %s: %w", name, err)
	}
	return key, true, nil
}
