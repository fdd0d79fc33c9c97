package mcplimit_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A zone on a Redis Cluster whose URL names a node that does not serve
// the zone's slot decides on the node that does: the tenant bucket and
// the quota are there, the store is healthy, and a refusal comes from
// Redis's count. Given to a plain client, the same URL answers MOVED to
// every call, and the zone would stay degraded, deciding locally.
func TestRedisClusterZoneDecidesOnItsSlotsMaster(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone, token = "redis_cluster", "valid-cluster"
	skipNearReset(t, nextDay)
	c := harness.StartRedisCluster(t, 3)
	slot := c.Slot(t, "mcprl:{"+zone+"}:")
	owner := c.Owner(t, slot)
	e := start(t, "zone "+zone+"\ntenant 100/s burst 100\nquota 3/day\nstore redis "+c.URL((owner+1)%3)+" {\ncluster\n}")
	e.prove(token)
	e.spend(token, 3)
	before := e.backend.ToolCalls()
	refusal(t, e.call(9, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over the quota kept in the cluster")
	st := adminZone(t, e.caddy, zone)["store"].(map[string]any)
	if st["degraded"].(bool) || st["failures"].(float64) != 0 {
		t.Fatalf("store %v, want healthy with no failure", st)
	}
	fp := onlyIdentity(t, e, zone)
	key := "mcprl:{" + zone + "}:q:i/" + fp + ":d:" + time.Now().UTC().Format(time.DateOnly)
	if got := c.Nodes[owner].Do(t, "GET", key); got != "3" {
		t.Fatalf("the slot's master holds %q for the identity's day, want 3", got)
	}
	if n := c.Nodes[owner].Do(t, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)); n == "0" {
		t.Fatal("the slot's master holds no key of the zone")
	}
}
