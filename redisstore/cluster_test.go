package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// clusterStore opens a store of zone on the cluster that the node at url
// belongs to.
func clusterStore(t *testing.T, url, zone string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisstore.Config{URL: url, Cluster: true, Zone: zone, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// zoneSlot returns the hash slot of zone's keys and the node serving it.
func zoneSlot(t *testing.T, c *harness.RedisCluster, zone string) (slot, owner int) {
	t.Helper()
	slot = c.Slot(t, "mcprl:{"+zone+"}:")
	return slot, c.Owner(t, slot)
}

// A store of a cluster given a node that does not serve its zone's slot
// makes every call on the node that does: the fingerprint key, the
// decisions, refunds, pushes, seeds and reads, none failing with a
// redirect (a plain client on that node gets MOVED for each).
func TestClusterStoreCallsTheMasterOfTheZonesSlot(t *testing.T) {
	c := harness.StartRedisCluster(t, 3)
	const zone = "z"
	slot, owner := zoneSlot(t, c, zone)
	s := clusterStore(t, c.URL((owner+1)%3), zone)
	ctx := context.Background()
	if err := s.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	key, epoch, err := s.FingerprintKey(ctx, nil)
	if err != nil || epoch == "" {
		t.Fatalf("fingerprint key and epoch: %q, %v", epoch, err)
	}
	if again, e, err := s.FingerprintKey(ctx, nil); err != nil || string(again) != string(key) || e != epoch {
		t.Fatalf("fingerprint key read again: %x, epoch %q, %v; want %x, %q", again, e, err, key, epoch)
	}
	items := []redisstore.Item{bucket("t/a", 1.0/3600, 2, 1), quotaItem("i/a", quota.Day, 100, 1)}
	for i, want := range []bool{true, true, false} {
		if res := decide(t, s, items...); res.OK != want {
			t.Fatalf("call %d: %+v, want admitted %v (burst 2)", i+1, res, want)
		}
	}
	if err := s.Refund(ctx, items); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Push(ctx, "push-1", []redisstore.Delta{{Key: "i/a", Period: quota.Day, Start: quota.Day.Start(time.Now()), N: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx, []redisstore.Delta{{Key: "i/b", Period: quota.Day, Start: quota.Day.Start(time.Now()), N: 4}}); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]int64{"i/a": 4, "i/b": 4} { // 2 charged, 1 refunded, 3 pushed; 4 seeded
		if n, err := s.Used(ctx, k, quota.Day, time.Now()); err != nil || n != want {
			t.Fatalf("used of %s: %d %v, want %d", k, n, err, want)
		}
	}
	if tokens, _, ok, err := s.Tokens(ctx, "t/a"); err != nil || !ok || tokens < 0.99 || tokens > 1.01 {
		t.Fatalf("tokens of t/a: %v %v %v, want 1 (2 charged, 1 refunded)", tokens, ok, err)
	}
	if n := c.Nodes[owner].Do(t, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)); n == "0" {
		t.Fatalf("the slot's master holds no key of the zone")
	}
}

// When the zone's slot moves to another node (a resharding), the store
// follows it: a call that meets the old node's redirect (which runs
// nothing) has the slot map read again at once and is made on the new
// node, where the bucket moved with its level (1 token, short of a second
// call's 2), and so are the next ones. Failing that call instead would
// decide it, and every call until the zone's next probe, on local
// buckets that start full: a drained tenant's fresh burst per instance.
func TestClusterStoreFollowsTheZonesSlotWhenItMoves(t *testing.T) {
	c := harness.StartRedisCluster(t, 3)
	const zone = "moving"
	slot, owner := zoneSlot(t, c, zone)
	s := clusterStore(t, c.URL(owner), zone)
	item := bucket("t/a", 1.0/3600, 3, 2)
	if res := decide(t, s, item); !res.OK {
		t.Fatalf("%+v, want admitted (2 of burst 3)", res)
	}
	if moved := c.MoveSlot(t, slot, (owner+1)%3); moved == 0 {
		t.Fatal("the zone's slot held no key to move")
	}
	res, err := s.Decide(context.Background(), []redisstore.Item{item})
	if err != nil {
		t.Fatalf("the first call after the move: %v, want it run on the slot's new master", err)
	}
	if res.OK {
		t.Fatalf("%+v: admitted by a fresh bucket, want the moved one's refusal", res)
	}
	if res := decide(t, s, bucket("t/b", 1, 2, 1)); !res.OK {
		t.Fatalf("%+v, want the next call decided on the new master", res)
	}
}

// After a resharding the nodes it did not involve name the slot's old
// master until gossip tells them: a call redirected (MOVED) while the
// slot map is read from one of them still runs once more, on the master
// the redirect names. The map is read from a node picked at random, so
// thirty zones each have their slot moved once, once the cluster settled
// from the last (see Settle), and each first call after the move is
// required to succeed.
func TestClusterStoreFollowsTheRedirectBeforeEveryNodeKnows(t *testing.T) {
	c := harness.StartRedisCluster(t, 3)
	for i := range 30 {
		c.Settle(t)
		zone := "resharded" + strconv.Itoa(i)
		slot, owner := zoneSlot(t, c, zone)
		s := clusterStore(t, c.URL((owner+2)%3), zone)
		item := bucket("t/a", 1.0/3600, 3, 1)
		if res := decide(t, s, item); !res.OK {
			t.Fatalf("%s: %+v, want admitted", zone, res)
		}
		if moved := c.MoveSlotUntold(t, slot, owner, (owner+1)%3); moved == 0 {
			t.Fatalf("%s: its slot held no key to move", zone)
		}
		res, err := s.Decide(context.Background(), []redisstore.Item{item})
		if err != nil {
			t.Fatalf("%s: the first call after the move: %v, want it run on the master the redirect names", zone, err)
		}
		if !res.OK || res.After[0] > 1.5 {
			t.Fatalf("%s: %+v, want the moved bucket charged once more", zone, res)
		}
		_ = s.Close()
	}
}

// A call a node redirects (MOVED) runs on the node the redirect names
// whatever the slot map read again says, as read from a node that has not
// heard of the change: the new master listed as the old one's replica (a
// failover), or not listed at all (a master added to the cluster, then
// given the slot). The store is given such a map, and the slot really
// moved, so the first call after the move meets the old master.
func TestClusterStoreRunsARedirectOnTheNodeItNamesWhateverTheMapSays(t *testing.T) {
	for _, listed := range []bool{true, false} {
		c := harness.StartRedisCluster(t, 3)
		const zone = "redirected"
		slot, owner := zoneSlot(t, c, zone)
		to, other := (owner+1)%3, (owner+2)%3
		s := clusterStore(t, c.URL(owner), zone)
		item := bucket("t/a", 1.0/3600, 3, 1)
		if res := decide(t, s, item); !res.OK {
			t.Fatalf("%+v, want admitted", res)
		}
		if moved := c.MoveSlot(t, slot, to); moved == 0 {
			t.Fatal("the zone's slot held no key to move")
		}
		c.Settle(t) // no epoch of a node that had not heard of another's gives the slot back
		// The map of a node not told yet: the old owner serves the slot,
		// and the new one is its replica or unknown; the slots the new
		// one served are the third node's. Its nodes are named by host
		// name, as a cluster announcing host names does (go-redis would
		// rewrite a loopback address in a map read without a node).
		named := func(i int) string { return "localhost:" + strconv.Itoa(c.Nodes[i].Port) }
		redisstore.ReadSlotsWith(s, func(context.Context) ([]redis.ClusterSlot, error) {
			var slots []redis.ClusterSlot
			for i := range 3 {
				nodes := []redis.ClusterNode{{Addr: named(i)}}
				switch {
				case i == to:
					nodes[0].Addr = named(other)
				case i == owner && listed:
					nodes = append(nodes, redis.ClusterNode{Addr: named(to)})
				}
				slots = append(slots, redis.ClusterSlot{Start: i * 16384 / 3, End: (i+1)*16384/3 - 1, Nodes: nodes})
			}
			return slots, nil
		})
		res, err := s.Decide(context.Background(), []redisstore.Item{item})
		if err != nil {
			t.Fatalf("listed %v: the first call after the move: %v, want it run on the node the redirect names", listed, err)
		}
		if !res.OK || res.After[0] > 1.5 {
			t.Fatalf("listed %v: %+v, want the moved bucket charged once more", listed, res)
		}
	}
}

// A cluster that lost a master without a replica is down: its live
// masters still answer PING but refuse every key (CLUSTERDOWN). The
// store's ping, which the zone's probe makes, fails then too: an idle
// zone was told Redis was back, and failed again at its next key check,
// every few seconds while the cluster stayed down.
func TestClusterStorePingFailsWhileTheClusterIsDown(t *testing.T) {
	c := harness.StartRedisCluster(t, 3)
	const zone = "down"
	_, owner := zoneSlot(t, c, zone)
	s := clusterStore(t, c.URL(owner), zone)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Nodes[(owner+1)%3].Kill()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if info, _ := c.Nodes[owner].Command("CLUSTER", "INFO"); strings.Contains(info, "cluster_state:fail") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cluster did not go down with a master lost")
		}
	}
	if pong, err := c.Nodes[owner].Command("PING"); err != nil || pong != "PONG" {
		t.Fatalf("the zone's master answers PING with %q %v, want PONG (the case this test is about)", pong, err)
	}
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("ping with the cluster down: %v, want its CLUSTERDOWN", err)
	}
}

// When the zone's master dies, the probe's ping that fails while no node
// serves the slot has the map read again, and a ping after a replica has
// taken the slot over finds it at once: it does not call the dead master
// from the map read before the takeover and wait for the next probe.
func TestClusterStorePingFindsTheMasterThatTookOver(t *testing.T) {
	c := harness.StartRedisCluster(t, 3)
	const zone = "failover"
	slot, owner := zoneSlot(t, c, zone)
	s := clusterStore(t, c.URL((owner+1)%3), zone)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Nodes[owner].Kill()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("ping answered with the slot's master dead")
	}
	c.TakeOver(t, slot, (owner+2)%3)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("the first ping after the takeover: %v, want the new master's answer", err)
	}
	if res := decide(t, s, bucket("t/a", 1, 2, 1)); !res.OK {
		t.Fatalf("%+v, want a decision on the new master", res)
	}
}
