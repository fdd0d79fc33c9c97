package mcplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// Moving the store to another Redis raises it to every call the zone
// knows of, those it counted without the store and pushed to the old one
// when the store came back included: the new Redis never got them (it was
// raised to 5 of 8 here, and let three calls pass the quota).
func TestMovingTheRedisStoreCarriesTheCallsPushedToTheOldOne(t *testing.T) {
	const zone, token = "redis_move_pushed", "valid-move-pushed"
	skipNearReset(t, nextDay)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	first, second := harness.StartRedis(t), harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 10/day"
	e := start(t, block+"\nstore redis "+first.URL, opts)
	e.prove(token)
	e.spend(token, 5)
	key := redisDayKey(zone, onlyIdentity(t, e, zone))
	e = start(t, block, opts)
	e.spend(token, 3)
	e = start(t, block+"\nstore redis "+first.URL, opts)
	settledAt(t, e, zone, first, key, "8")
	e = start(t, block+"\nstore redis "+second.URL, opts)
	settledAt(t, e, zone, second, key, "8")
	e.spend(token, 2)
	before := e.backend.ToolCalls()
	refusal(t, e.call(9, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over the quota after the store moved to another Redis")
}

// A reload that moves the store to another Redis during an outage of the
// first pushes the outage's calls to the new one and raises it to what
// the first reported with them: the raise must not swallow the calls the
// push just carried (it left the new Redis at 5 of 8 here).
func TestMovingTheRedisStoreDuringAnOutageKeepsTheOutagesCalls(t *testing.T) {
	const zone, token = "redis_move_outage", "valid-move-outage"
	skipNearReset(t, nextDay)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	first, second := harness.StartRedis(t), harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 10/day"
	e := start(t, block+"\nstore redis "+first.URL+" {\ntimeout 100ms\n}", opts)
	e.prove(token)
	e.spend(token, 5)
	key := redisDayKey(zone, onlyIdentity(t, e, zone))
	first.Kill()
	e.spend(token, 3) // decided locally, to be pushed
	e = start(t, block+"\nstore redis "+second.URL, opts)
	settledAt(t, e, zone, second, key, "8")
	e.spend(token, 2)
	before := e.backend.ToolCalls()
	refusal(t, e.call(9, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over the quota after the store moved to another Redis during an outage")
}

// settledAt waits until rd holds want for key and zone's store has left
// degraded: the zone has pushed what it kept for Redis and raised it.
func settledAt(t *testing.T, e *env, zone string, rd *harness.Redis, key, want string) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, "redis at "+want+" for the identity, the zone deciding there", func() bool {
		return rd.Do(t, "GET", key) == want && !adminZone(t, e.caddy, zone)["store"].(map[string]any)["degraded"].(bool)
	})
}
