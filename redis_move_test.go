package mcplimit_test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// Moving the store to another Redis raises it to every call the zone
// knows of, those it counted without the store and pushed to the old one
// when the store came back included: the new Redis never got them (it was
// raised to 5 of 8 here, and let three calls pass the quota).
func TestMovingTheRedisStoreCarriesTheCallsPushedToTheOldOne(t *testing.T) {
	const zone, token = "redis_move_pushed", "valid-move-pushed"
	first, second := harness.StartRedis(t), harness.StartRedis(t)
	_, block, opts, key := spentInRedis(t, zone, token, 10, 5, first.URL)
	e := start(t, block, opts)
	e.spend(token, 3)
	e = start(t, block+"\nstore redis "+first.URL, opts)
	settledAt(t, e, zone, first, key, "8")
	e = start(t, block+"\nstore redis "+second.URL, opts)
	settledAt(t, e, zone, second, key, "8")
	spendThenRefused(t, e, token, 2, "a call over the quota after the store moved to another Redis")
}

// A reload that moves the store to another Redis during an outage of the
// first pushes the outage's calls to the new one and raises it to what
// the first reported with them: the raise must not swallow the calls the
// push just carried (it left the new Redis at 5 of 8 here).
func TestMovingTheRedisStoreDuringAnOutageKeepsTheOutagesCalls(t *testing.T) {
	const zone, token = "redis_move_outage", "valid-move-outage"
	first, second := harness.StartRedis(t), harness.StartRedis(t)
	e, block, opts, key := spentInRedis(t, zone, token, 10, 5, first.URL+" {\ntimeout 100ms\n}")
	first.Kill()
	e.spend(token, 3) // decided locally, to be pushed
	e = start(t, block+"\nstore redis "+second.URL, opts)
	settledAt(t, e, zone, second, key, "8")
	spendThenRefused(t, e, token, 2, "a call over the quota after the store moved to another Redis during an outage")
}

// spentInRedis starts zone, with a data directory and storage of its own,
// a daily quota of limit and the store at redis (a URL, and the store's
// block if any), and has token proven and n calls counted in Redis. It
// returns the env, the zone's block without the store, the storage
// options, and the Redis key of the identity's count of the day.
func spentInRedis(t *testing.T, zone, token string, limit, n int, redis string) (e *env, block string, opts harness.Options, key string) {
	t.Helper()
	skipNearReset(t, nextDay)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	opts = harness.Options{Storage: t.TempDir()}
	block = "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota " + strconv.Itoa(limit) + "/day"
	e = start(t, block+"\nstore redis "+redis, opts)
	e.prove(token)
	e.spend(token, n)
	return e, block, opts, redisDayKey(zone, onlyIdentity(t, e, zone))
}

// spendThenRefused spends n calls of token, and checks that the next one
// is refused for the quota without reaching the backend.
func spendThenRefused(t *testing.T, e *env, token string, n int, why string) {
	t.Helper()
	e.spend(token, n)
	before := e.backend.ToolCalls()
	refusal(t, e.call(9, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, why)
}

// settledAt waits until rd holds want for key and zone's store has left
// degraded: the zone has pushed what it kept for Redis and raised it.
func settledAt(t *testing.T, e *env, zone string, rd *harness.Redis, key, want string) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, "redis at "+want+" for the identity, the zone deciding there", func() bool {
		return rd.Do(t, "GET", key) == want && !adminZone(t, e.caddy, zone)["store"].(map[string]any)["degraded"].(bool)
	})
}

// A reload that adds the store back pushes the calls a stop without it
// saved in storage, as a start with the store does, and decides locally
// until it has pushed them and raised Redis: the raise leaves them out
// (their maker pushes them), so without the push nobody carried them
// (Redis stayed at 2 of 4 here), and a decision in Redis before the push
// would not count them: the zone decides there again only once Redis holds
// them.
func TestReloadAddingTheRedisStorePushesWhatAStopWithoutItSaved(t *testing.T) {
	const zone, token = "redis_readd_saved", "valid-readd-saved"
	rd := harness.StartRedis(t)
	_, block, opts, key := spentInRedis(t, zone, token, 4, 2, rd.URL)
	e := start(t, block, opts)
	e.spend(token, 2)
	if err := caddy.Stop(); err != nil { // saves the 2 for Redis in storage
		t.Fatal(err)
	}
	start(t, block, opts)
	e = start(t, block+"\nstore redis "+rd.URL, opts)
	e.prove(token)
	spendThenRefused(t, e, token, 0, "a call over the quota right after a reload added the store back")
	harness.Eventually(t, 10*time.Second, "the zone deciding in redis", func() bool {
		return !adminZone(t, e.caddy, zone)["store"].(map[string]any)["degraded"].(bool)
	})
	spendThenRefused(t, e, token, 0, "a call over the quota as soon as the zone decides in Redis after a reload added the store back")
	settledAt(t, e, zone, rd, key, "4")
	if saved, _ := filepath.Glob(filepath.Join(opts.Storage, "mcp_ratelimit", zone, "redis-pending", "*")); len(saved) != 0 {
		t.Fatalf("objects left in redis-pending/ once pushed: %v", saved)
	}
}
