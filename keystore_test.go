package mcplimit_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A storage that loses the fingerprint key (wiped, restored, a zone folder
// deleted) gets the running zone's key back at its next flush: else the
// next instance to start would create another key, and one credential
// would have a fingerprint, and a quota, under each.
func TestFingerprintKeyMissingFromStorageIsStoredAgain(t *testing.T) {
	const zone, token = "key_lost", "valid-key-lost"
	o := newOutage(t)
	e := start(t, "zone "+zone+"\nflush_interval 1s", o.options())
	e.prove(token)
	key := o.storedKey(zone)
	if len(key) != 32 {
		t.Fatalf("stored key %x", key)
	}
	if err := os.Remove(filepath.Join(o.root, "mcp_ratelimit", zone, "fingerprint.key")); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the key to be stored again", func() bool {
		return bytes.Equal(o.storedKey(zone), key)
	})
}

// An instance starting on a storage that holds no key offers the key it
// last used (cached on its host), as with Redis, instead of creating one:
// its identities keep their fingerprints and counts.
func TestStartOnStorageWithoutKeyOffersTheCachedKey(t *testing.T) {
	const zone, token = "key_offer", "valid-key-offer"
	block, o, e, fp := countedBeforeOutage(t, zone, token, 1000, 1)
	key := o.storedKey(zone)
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(o.root, "mcp_ratelimit", zone, "fingerprint.key")); err != nil {
		t.Fatal(err)
	}
	e = start(t, block, o.options())
	if !bytes.Equal(o.storedKey(zone), key) {
		t.Fatal("the key stored at the start is not the one the zone last used")
	}
	e.prove(token)
	if got := onlyIdentity(t, e, zone); got != fp {
		t.Fatalf("fingerprint %s after the start, want %s as before", got, fp)
	}
}

// The key of a zone's Redis store, which it fingerprints under, becomes
// its key in Caddy storage too: once `store redis` is removed, a restart
// fingerprints every identity as before, and the quota it used stays used.
func TestRedisKeyGoesToStorageAndOutlivesTheStore(t *testing.T) {
	const zone, token = "key_redis", "valid-key-redis"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	inRedis := make([]byte, 32)
	_, _ = rand.Read(inRedis)
	rd.Do(t, "SET", "mcprl:{"+zone+"}:fpkey", string(inRedis))
	o := newOutage(t)
	o.putKey(zone) // storage holds another key
	block := "zone " + zone + "\nflush_interval 1s\nquota 2/day"
	e := start(t, block+"\nstore redis "+rd.URL, o.options())
	if !bytes.Equal(o.storedKey(zone), inRedis) {
		t.Fatal("the key in storage is not redis's after the start")
	}
	e.prove(token)
	e.spend(token, 2)
	fp := onlyIdentity(t, e, zone)
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}

	e = start(t, block, o.options())
	if got := onlyIdentity(t, e, zone); got != fp {
		t.Fatalf("fingerprint %s without the store, want %s as with it", got, fp)
	}
	refusal(t, e.post(harness.ToolCall(9, "echo", map[string]any{"text": "x"}), "Authorization", "Bearer "+token), 429, "quota")
}
