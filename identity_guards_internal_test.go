package mcplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// loadErrStorage is a storage whose reads fail (not for a missing key)
// while its lock and writes work.
type loadErrStorage struct{ stored [][]byte }

func (s *loadErrStorage) Lock(context.Context, string) error   { return nil }
func (s *loadErrStorage) Unlock(context.Context, string) error { return nil }
func (s *loadErrStorage) Store(_ context.Context, _ string, v []byte) error {
	s.stored = append(s.stored, v)
	return nil
}
func (s *loadErrStorage) Load(context.Context, string) ([]byte, error) {
	return nil, errors.New("read failed")
}

// A storage that cannot read the key (other than a key it does not hold)
// is an error: the key there, which every instance fingerprints under,
// is never overwritten by a fresh one.
func TestUnreadableFingerprintKeyIsNeverReplaced(t *testing.T) {
	stor := &loadErrStorage{}
	key, created, err := loadFingerprintKey(context.Background(), stor, "z", newFingerprintKey())
	if err == nil || key != nil || created || len(stor.stored) != 0 {
		t.Fatalf("key %x, created %v, err %v, %d stores: want an error and nothing stored", key, created, err, len(stor.stored))
	}
}

// A lone identity value holding a line break is refused as several are:
// the fingerprint command, which reads one line per placeholder, could
// not name it for an override.
func TestALoneIdentityValueHoldingALineBreakIsRefused(t *testing.T) {
	pol, err := compile(&Handler{Identity: []string{"{http.request.uri.query.key}"}})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "http://test/mcp?key=a%0Ab", nil)
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, nil)
	if _, why := identityValue(r, pol); !strings.Contains(why, "holds a line break") {
		t.Fatalf("unreadable %q, want the line break named", why)
	}
}

// A text of several placeholders is read as the replacer reads it: one
// that starts with a request-header placeholder and ends with a brace is
// not one lone header placeholder named "X-A}/{system.os}",
// which no request carries and which would make every caller keyless.
func TestHeaderPlaceholderFollowedByOthersIsNotALoneHeader(t *testing.T) {
	t.Setenv("MCPRL_GUARD", "e")
	for ident, want := range map[string]string{
		"{http.request.header.X-A}/{system.os}":          "1/" + runtime.GOOS,
		"{http.request.header.X-A}/{env.MCPRL_GUARD}/x}": "1/e/x}",
	} {
		pol, err := compile(&Handler{Identity: []string{ident}})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "http://test/mcp?b=2", nil)
		r.Header.Set("X-A", "1")
		r.Header.Set("X-B", "2")
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, nil)
		if got, why := identityValue(r, pol); got != want || why != "" {
			t.Errorf("identity %s: %q (%q), want %q", ident, got, why, want)
		}
	}
}

// The whole body, base64-encoded, is a whole input too; and a part of the
// original URI is an input the client sends, as one of the URI is.
func TestWholeAndSeveralInputWarningsCoverEverySpelling(t *testing.T) {
	wantStartWarnings(t, warnWholeInputIdentity, map[string][2]int{
		"key:{http.request.body_base64}": {1, 0},
	})
	wantStartWarnings(t, warnSeveralInputsIdentity, map[string][2]int{
		"{http.request.orig_uri.query.key} {http.request.header.X-Api-Key}": {1, 0},
		"{http.request.orig_uri.path} {http.request.cookie.sid}":            {1, 0},
	})
}

// An identity header sent twice is refused for that, first, even when the
// Connection header also names it: the refusal names the first thing the
// caller must fix.
func TestIdentityHeaderSentTwiceIsNamedBeforeTheConnectionHeader(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://test/mcp", nil)
	r.Header["Authorization"] = []string{"Bearer a", "Bearer b"}
	r.Header.Set("Connection", "Authorization")
	if _, why := readHeader(r, "Authorization"); !strings.Contains(why, "Send exactly one Authorization header") {
		t.Fatalf("unreadable %q, want the header sent twice named", why)
	}
}

// A raw '#' in the request target matters only to an identity that reads
// the query: one that reads a header and a same-for-everyone value is
// read as usual.
func TestRawHashIsRefusedOnlyForQueryIdentities(t *testing.T) {
	pol, err := compile(&Handler{Identity: []string{"{http.request.header.X-A}/{system.os}"}})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp?x=1#f", nil)
	r.Header.Set("X-A", "1")
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, nil)
	if got, why := identityValue(r, pol); got != "1/"+runtime.GOOS || why != "" {
		t.Fatalf("identity %q (%q), want %q accepted", got, why, "1/"+runtime.GOOS)
	}
}
