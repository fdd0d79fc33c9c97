package mcplimit

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

func TestFPCacheKeepsOnlyWhatItWasGiven(t *testing.T) {
	f := newFingerprinter(newFingerprintKey())
	c := f.cache
	v := "Bearer k-00000"
	if c.lookup(v) != nil {
		t.Fatal("an empty cache finds a fingerprint")
	}
	c.remember(v, f.sum(v))
	if e := c.lookup(v); e == nil || e.fp != f.sum(v) || string(e.hex[:]) != fingerprintHex(e.fp) {
		t.Fatalf("lookup after remember = %+v; want the HMAC %x, in hex too", e, f.sum(v))
	}

	// A value of the same length and slot finds nothing of the other's,
	// and takes the slot when remembered.
	other := ""
	for i := 1; other == "" && i < 100000; i++ {
		if s := fmt.Sprintf("Bearer k-%05d", i); c.slot(c.sum(s)[0]) == c.slot(c.sum(v)[0]) {
			other = s
		}
	}
	if other == "" {
		t.Fatal("no value of the same length shares a slot")
	}
	if c.lookup(other) != nil {
		t.Fatalf("%q finds the fingerprint of %q, which shares its slot", other, v)
	}
	c.remember(other, f.sum(other))
	if e := c.lookup(other); e == nil || e.fp != f.sum(other) || string(e.hex[:]) != fingerprintHex(e.fp) {
		t.Fatalf("lookup(%q) = %+v", other, e)
	}
	if c.lookup(v) != nil {
		t.Fatalf("%q still found after %q took its slot", v, other)
	}

	// Both halves of the hash must match: an entry that shares the first
	// (which picks the slot) but not the second is another value's.
	s := c.sum(v)
	c.slot(s[0]).Store(&fpEntry{sum: valueSum{s[0], s[1] ^ 1}, fp: f.sum(other)})
	if c.lookup(v) != nil {
		t.Fatal("an entry matching only the first half of the hash was found")
	}

	// A bearer JWT, however long, is remembered, and no entry holds a
	// value: what the cache keeps prints without the credential.
	long := "Bearer " + strings.Repeat("x", 4096)
	c.remember(long, f.sum(long))
	if e := c.lookup(long); e == nil || e.fp != f.sum(long) {
		t.Fatalf("a value of %d bytes was not remembered", len(long))
	}
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil {
			if dump := fmt.Sprintf("%+v %q", *e, fmt.Sprint(*e)); strings.Contains(dump, "k-0") || strings.Contains(dump, "xxxx") {
				t.Fatalf("slot %d holds an identity value: %s", i, dump)
			}
		}
	}

	if g := newFingerprinter(f.key); g.cache == f.cache {
		t.Fatal("two fingerprinters share a cache")
	}
}

// TestFPCacheRemembersOnlyProvenIdentities drives the handler: a caller
// the backend has not proven leaves nothing in the cache, so a flood of
// fresh credentials cannot churn it, and a proven one is found there with
// the fingerprint its HMAC gives.
func TestFPCacheRemembersOnlyProvenIdentities(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "fpcache-proven", Quota: &QuotaLimit{Day: 1000}})
	serve := func(token string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
		req := httptest.NewRequest(http.MethodPost, "http://cache/mcp", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", token)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
		w := httptest.NewRecorder()
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(http.StatusOK)
			return nil
		})
		if err := h.ServeHTTP(w, req, next); err != nil || w.Code != http.StatusOK {
			t.Fatalf("ServeHTTP: %d, %v", w.Code, err)
		}
	}
	f := h.zone.fpKey.Load()
	const token = "Bearer valid-cache"
	serve(token) // unproven: the 2xx proves it
	if f.cache.lookup(token) != nil {
		t.Fatal("an unproven identity was remembered")
	}
	if !h.zone.known.Proven(f.sum(token), time.Now()) {
		t.Fatal("the 2xx did not prove the identity")
	}
	serve(token)
	if e := f.cache.lookup(token); e == nil || e.fp != f.sum(token) {
		t.Fatalf("proven identity: lookup = %+v; want %x", e, f.sum(token))
	}
	// Found in the cache, the identity is charged under the quota key its
	// HMAC spells, as when it was not: of the two calls made once proven,
	// the first computed the HMAC and the second found the cache entry, and
	// they are counted together with the call that proved it.
	serve(token)
	key := []byte("i/" + fingerprintHex(f.sum(token)))
	if n := h.zone.quota.Used(key, quota.Day, time.Now()); n != 3 {
		t.Fatalf("quota count of %s = %d, want 3 (one per call the backend accepted)", key, n)
	}
}
