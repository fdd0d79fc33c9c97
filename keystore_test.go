package mcplimit_test

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"os"
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
	if err := os.Remove(o.keyFile(zone)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the key to be stored again", func() bool {
		return bytes.Equal(o.storedKey(zone), key)
	})
	// A truncated key file is repaired the same way.
	if err := os.WriteFile(o.keyFile(zone), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the truncated key to be stored again", func() bool {
		return bytes.Equal(o.storedKey(zone), key)
	})
}

// Another key in storage (restored from a backup, or created by an
// instance that started while the key was missing) is adopted within a
// flush: every instance, the fingerprint command and overrides agree.
func TestAnotherFingerprintKeyInStorageIsAdopted(t *testing.T) {
	const zone, token = "key_other", "valid-key-other"
	o := newOutage(t)
	e := start(t, "zone "+zone+"\nflush_interval 1s", o.options())
	e.prove(token)
	other := o.putKey(zone)
	want := fingerprintOf(t, o.root, zone, "Bearer "+token)
	harness.Eventually(t, 10*time.Second, "the other key to be adopted", func() bool {
		e.prove(token)
		var v struct {
			Identities []struct {
				Fingerprint string `json:"fingerprint"`
			} `json:"identities"`
		}
		e.caddy.AdminJSON(t, "/mcp_ratelimit/"+zone+"/identities", &v)
		for _, id := range v.Identities {
			if id.Fingerprint == want {
				return true
			}
		}
		return false
	})
	if !bytes.Equal(o.storedKey(zone), other) {
		t.Fatal("the key in storage changed again")
	}
}

// An instance starting on a storage that holds no key offers the key it
// last used (cached on its host), as with Redis, instead of creating one:
// its identities keep their fingerprints and counts.
func TestStartOnStorageWithoutKeyOffersTheCachedKey(t *testing.T) {
	const zone, token = "key_offer", "valid-key-offer"
	block, o, _, fp := countedBeforeOutage(t, zone, token, 1000, 1)
	key := o.storedKey(zone)
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(o.keyFile(zone)); err != nil {
		t.Fatal(err)
	}
	e := start(t, block, o.options())
	if !bytes.Equal(o.storedKey(zone), key) {
		t.Fatal("the key stored at the start is not the one the zone last used")
	}
	provesAs(t, e, zone, token, fp, "after the start")
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

// Counts a Redis outage left, saved in storage at a stop, are pushed once
// storage answers, when the next start could not read them: not only by
// the start after that.
func TestRedisOutageCountsSavedInStorageArePushedOnceStorageAnswers(t *testing.T) {
	const zone, token = "redis_pending_later", "valid-pending-later"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	o := newOutage(t)
	block := "zone " + zone + "\nflush_interval 1s\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 100/day\nstore redis " + rd.URL
	e := start(t, block, o.options())
	e.prove(token)
	fp := onlyIdentity(t, e, zone)
	rd.Kill()
	e.spend(token, 3)                    // decided locally, kept for Redis
	if err := caddy.Stop(); err != nil { // saves them in storage
		t.Fatal(err)
	}
	rd.Start(t) // empty: persistence is off
	o.set(true)
	start(t, block, o.options())
	o.set(false)
	key := "mcprl:{" + zone + "}:q:i/" + fp + ":d:" + time.Now().UTC().Format(time.DateOnly)
	harness.Eventually(t, 15*time.Second, "the saved counts pushed to redis", func() bool {
		n, _ := rd.Command("GET", key)
		return n == "3"
	})
}

// A zone with a Redis store that is down fingerprints under the key it
// last used (Redis's, cached on the host) until Redis answers, even when
// Caddy storage holds another: it does not adopt storage's at a flush and
// switch back when Redis returns.
func TestRedisZoneKeepsRedisKeyWhileRedisIsDown(t *testing.T) {
	const zone, token = "key_redis_down", "valid-key-redis-down"
	rd := harness.StartRedis(t)
	o := newOutage(t)
	block := "zone " + zone + "\nflush_interval 1s\nstore redis " + rd.URL
	e := start(t, block, o.options())
	e.prove(token)
	fp := onlyIdentity(t, e, zone)
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	rd.Kill()
	o.putKey(zone) // storage holds another key
	e = start(t, block, o.options())
	flushes := func() uint64 { return harness.GetZone(t, e.caddy.Admin, zone).QuotaStore.Flushes }
	seen := flushes()
	harness.Eventually(t, 10*time.Second, "two flushes", func() bool { return flushes() >= seen+2 })
	provesAs(t, e, zone, token, fp, "while Redis is down")
}

// A restart that adds `store redis` carries the counts storage holds this
// period to Redis, as a reload that adds it does: a quota used up before
// stays used up.
func TestStartThatAddsTheRedisStoreCarriesTheQuotaUsed(t *testing.T) {
	const zone, token = "redis_added_at_start", "valid-added-at-start"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	o := newOutage(t)
	block := "zone " + zone + "\nflush_interval 1s\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 3/day"
	e := start(t, block, o.options())
	e.prove(token)
	e.spend(token, 3)
	if err := caddy.Stop(); err != nil { // its final flush stores the counts
		t.Fatal(err)
	}
	e = start(t, block+"\nstore redis "+rd.URL, o.options())
	before := e.backend.ToolCalls()
	refusal(t, e.call(4, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over a quota used up before the restart that added the store")
}

// A start that adds `store redis` while counts of an earlier Redis outage
// wait on the host pushes those first and carries storage's counts at the
// next probe: Redis ends with the period's count, once, and the quota
// holds.
func TestStartWithPendingOutageCountsCarriesTheQuotaUsedOnce(t *testing.T) {
	const zone, token = "redis_added_pending", "valid-added-pending"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	o := newOutage(t)
	block := "zone " + zone + "\nflush_interval 1s\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 4/day"
	e := start(t, block, o.options())
	e.prove(token)
	e.spend(token, 2)
	if err := caddy.Stop(); err != nil { // storage holds 2
		t.Fatal(err)
	}
	rd.Kill()
	e = start(t, block+"\nstore redis "+rd.URL, o.options())
	e.prove(token)
	e.spend(token, 1) // counted locally while Redis is down: pending
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	rd.Start(t) // empty: persistence is off
	e = start(t, block+"\nstore redis "+rd.URL, o.options())
	day := "mcprl:{" + zone + "}:q:i/*:d:" + time.Now().UTC().Format(time.DateOnly)
	counted := func() string {
		return rd.Do(t, "EVAL", "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do n = n + tonumber(redis.call('GET', k)) end return n", "0", day)
	}
	harness.Eventually(t, 15*time.Second, "Redis to hold the 3 calls of the day", func() bool { return counted() == "3" })
	time.Sleep(2500 * time.Millisecond) // more flushes and probes
	if n := counted(); n != "3" {
		t.Fatalf("Redis counts %s for the day, want the 3 calls once", n)
	}
	e.spend(token, 1)
	before := e.backend.ToolCalls()
	refusal(t, e.call(9, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over the quota of 4 after 3 before the restarts and 1 since")
}

// provesAs proves token again and checks that zone's one proven identity
// is still fp; when says at what point, for the failure.
func provesAs(t *testing.T, e *env, zone, token, fp, when string) {
	t.Helper()
	e.prove(token)
	if got := onlyIdentity(t, e, zone); got != fp {
		t.Fatalf("fingerprint %s %s, want %s as before", got, when, fp)
	}
}

// A stop that pushes the outage's counts (Redis answers again, and the
// zone's probe had not found it yet) records in storage that they are no
// longer bound for Redis: a start that raises a Redis that lost its data
// to storage's counts then carries every call storage holds, those made
// before the store was added among them.
func TestStopThatPushesTheOutagesCountsLeavesNoneBoundForRedis(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone, token = "redis_stop_push", "valid-stop-push"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 5/day"
	withRedis := block + "\nstore redis " + rd.URL + " {\ntimeout 100ms\n}"
	e := start(t, block, opts)
	e.prove(token)
	e.spend(token, 3) // in storage only
	e = start(t, withRedis, opts)
	rd.Kill()
	e.spend(token, 1)                    // counted locally for Redis
	rd.Start(t)                          // empty: persistence is off
	if err := caddy.Stop(); err != nil { // pushes the outage's call
		t.Fatal(err)
	}
	oneLeftAfterStart(t, withRedis, opts, token, "a call over a quota of 5 after 3 calls in storage, 1 in an outage and 1 since")
}

// A call that proves its credential is counted in Redis at once; when that
// push fails (Redis just went down) the call is kept for Redis, and
// counted as bound for it until the push goes through: the record of
// calls bound for Redis never goes below what was bound (a negative one
// would make another instance's raise carry one call too many).
func TestProvingCallWhosePushFailedIsBoundForRedisUntilPushed(t *testing.T) {
	const zone, token = "redis_proving_push", "valid-proving-push"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	e := start(t, "zone "+zone+"\nflush_interval 1s\nquota 5/day\nstore redis "+rd.URL+" {\ntimeout 100ms\n}", opts)
	rd.Kill()
	if r := e.call(1, "Authorization", "Bearer "+token); r.Status != http.StatusOK {
		t.Fatalf("proving call during the outage: %d %s", r.Status, r.Body)
	}
	fp := onlyIdentity(t, e, zone)
	rd.Start(t)
	harness.Eventually(t, 15*time.Second, "the proving call pushed to redis", func() bool {
		n, _ := rd.Command("GET", redisDayKey(zone, fp))
		return n == "1"
	})
	time.Sleep(2 * time.Second) // flushes after the push
	if n := harness.StoredDayCounts(t, opts.Storage, zone+"/redis-bound")["i/"+fp]; n != 0 {
		t.Fatalf("storage holds %d calls of the identity bound for redis once all were pushed, want 0", n)
	}
}

// A proving call's push that timed out while Redis was frozen, and that
// Redis ran once it thawed, is counted once: it is sent again under its
// id, which Redis recognises, and nothing stays bound for Redis.
func TestProvingCallWhosePushTimedOutButRanIsCountedOnce(t *testing.T) {
	const zone, token = "redis_proving_timeout", "valid-proving-timeout"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	e := start(t, "zone "+zone+"\nflush_interval 1s\nquota 5/day\nstore redis "+rd.URL+" {\ntimeout 100ms\n}", opts)
	// A first proving call loads the push script, so that the push cut
	// short below is one Redis runs as sent once it thaws.
	if r := e.call(1, "Authorization", "Bearer valid-proving-first"); r.Status != http.StatusOK {
		t.Fatalf("first proving call: %d %s", r.Status, r.Body)
	}
	first := onlyIdentity(t, e, zone)
	rd.Pause(t)
	r := e.call(2, "Authorization", "Bearer "+token)
	rd.Resume(t)
	if r.Status != http.StatusOK {
		t.Fatalf("proving call while Redis is frozen: %d %s", r.Status, r.Body)
	}
	var v struct {
		Identities []struct {
			Fingerprint string `json:"fingerprint"`
		} `json:"identities"`
	}
	e.caddy.AdminJSON(t, "/mcp_ratelimit/"+zone+"/identities", &v)
	fp := ""
	for _, id := range v.Identities {
		if id.Fingerprint != first {
			fp = id.Fingerprint
		}
	}
	if len(v.Identities) != 2 || fp == "" {
		t.Fatalf("proven identities %+v, want the two callers", v.Identities)
	}
	harness.Eventually(t, 15*time.Second, "the push in doubt sent again", func() bool {
		st := harness.GetStore(t, e.caddy.Admin, zone)
		return !st.Degraded && st.Pending == 0
	})
	if n, err := rd.Command("GET", redisDayKey(zone, fp)); err != nil || n != "1" {
		t.Fatalf("Redis counts %q (%v) for the proving call, want 1: its push ran once", n, err)
	}
	time.Sleep(2 * time.Second) // flushes after the push
	if n := harness.StoredDayCounts(t, opts.Storage, zone+"/redis-bound")["i/"+fp]; n != 0 {
		t.Fatalf("storage holds %d calls of the identity bound for redis once its push ran, want 0", n)
	}
}
