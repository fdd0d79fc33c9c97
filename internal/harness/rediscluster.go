package harness

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// RedisCluster is a Redis Cluster of masters without replicas, each a
// redis-server started for one test (see StartRedis) with cluster mode on.
type RedisCluster struct {
	// Nodes are the masters: Nodes[i] starts with the i-th of len(Nodes)
	// equal ranges of the slots.
	Nodes []*Redis
}

// StartRedisCluster starts n masters, gives each a range of the slots, has
// them meet, and waits until every one of them sees the whole cluster.
func StartRedisCluster(t testing.TB, n int) *RedisCluster {
	t.Helper()
	c := &RedisCluster{}
	var bus []int
	for range n {
		port := 0
		r := startRedis(t, func(int) []string {
			port = FreePort(t)
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(port)}
		})
		c.Nodes = append(c.Nodes, r)
		bus = append(bus, port)
	}
	for i, r := range c.Nodes {
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		r.Do(t, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	for i, r := range c.Nodes[1:] {
		c.Nodes[0].Do(t, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(r.Port), strconv.Itoa(bus[i+1]))
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, r := range c.Nodes {
		for {
			info, err := r.Command("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok\r\n") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis cluster: node %s did not see the cluster: %q %v", r.Addr, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.Settle(t)
	return c
}

// URL returns the URL of node i, without a DB (a cluster has DB 0 alone).
func (c *RedisCluster) URL(i int) string { return "redis://" + c.Nodes[i].Addr }

// Slot returns key's hash slot.
func (c *RedisCluster) Slot(t testing.TB, key string) int {
	t.Helper()
	n, err := strconv.Atoi(c.Nodes[0].Do(t, "CLUSTER", "KEYSLOT", key))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Owner returns the index of the node serving slot, as the first node
// that answers sees it.
func (c *RedisCluster) Owner(t testing.TB, slot int) int {
	t.Helper()
	var nodes string
	var err error
	for _, r := range c.Nodes {
		if nodes, err = r.Command("CLUSTER", "NODES"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redis cluster: no node answers: %v", err)
	}
	if addr := ownerIn(nodes, slot); addr != "" {
		return c.index(t, addr)
	}
	t.Fatalf("redis cluster: no node serves slot %d", slot)
	return -1
}

// Settle waits until every node sees the same masters, with the same
// epochs and slots, and no two masters share an epoch: after
// MoveSlotUntold, gossip tells the nodes it did not, and in a cluster
// just formed the masters, all of epoch 0, bump theirs apart one by one.
// A move made before that settled can be undone, its keys dropped: Redis
// bumps the new owner's epoch without consensus, and a node that had not
// heard of an earlier bump may lose the slot again to its old owner's
// claim. StartRedisCluster settles the cluster before it returns.
func (c *RedisCluster) Settle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var views []string
		var err error
		for _, r := range c.Nodes {
			var nodes string
			if nodes, err = r.Command("CLUSTER", "NODES"); err != nil {
				break
			}
			views = append(views, mastersIn(nodes))
		}
		if err == nil && len(slices.Compact(views)) == 1 && distinctEpochs(views[0]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis cluster: the nodes do not agree: %q %v", views, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mastersIn returns the masters in the output of CLUSTER NODES, each by
// its ID, epoch and slots, in order.
func mastersIn(nodes string) string {
	var masters []string
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && strings.Contains(f[2], "master") {
			masters = append(masters, f[0]+" "+f[6]+" "+strings.Join(f[8:], " "))
		}
	}
	slices.Sort(masters)
	return strings.Join(masters, "\n")
}

// distinctEpochs reports whether no two masters in the output of
// mastersIn share an epoch.
func distinctEpochs(masters string) bool {
	seen := map[string]bool{}
	for _, line := range strings.Split(masters, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || seen[f[1]] {
			return false
		}
		seen[f[1]] = true
	}
	return true
}

// ownerIn returns the address of the master serving slot in the output
// of CLUSTER NODES, or "" when none does.
func ownerIn(nodes string, slot int) string {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for _, r := range f[8:] {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				return addr
			}
		}
	}
	return ""
}

// index returns the index of the node at addr.
func (c *RedisCluster) index(t testing.TB, addr string) int {
	t.Helper()
	for i, r := range c.Nodes {
		if r.Addr == addr {
			return i
		}
	}
	t.Fatalf("redis cluster: no node at %s", addr)
	return -1
}

// MoveSlot moves slot, with its keys, to node to, as a resharding does,
// and tells every node. It returns how many keys moved.
func (c *RedisCluster) MoveSlot(t testing.TB, slot, to int) int {
	t.Helper()
	from := c.Owner(t, slot)
	moved := c.moveSlot(t, slot, from, to)
	c.tellOwner(t, slot, to, from)
	return moved
}

// MoveSlotUntold moves slot from node from to node to as MoveSlot does,
// but has every other node name from as its owner still, as a node that
// gossip has not told of the move yet does (a replica, or a master
// redis-cli has not reached): gossip from to corrects it, later. It
// returns how many keys moved.
func (c *RedisCluster) MoveSlotUntold(t testing.TB, slot, from, to int) int {
	t.Helper()
	moved := c.moveSlot(t, slot, from, to)
	fromID := c.Nodes[from].Do(t, "CLUSTER", "MYID")
	for i, r := range c.Nodes {
		if i != from && i != to {
			r.Do(t, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "NODE", fromID)
		}
	}
	return moved
}

// moveSlot moves slot, with its keys, from node from to node to, and
// tells those two nodes.
func (c *RedisCluster) moveSlot(t testing.TB, slot, from, to int) int {
	t.Helper()
	if from == to {
		t.Fatalf("redis cluster: slot %d is on node %d already", slot, to)
	}
	s := strconv.Itoa(slot)
	fromID := c.Nodes[from].Do(t, "CLUSTER", "MYID")
	toID := c.Nodes[to].Do(t, "CLUSTER", "MYID")
	c.Nodes[to].Do(t, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID)
	c.Nodes[from].Do(t, "CLUSTER", "SETSLOT", s, "MIGRATING", toID)
	moved := 0
	for {
		keys := c.Nodes[from].Do(t, "CLUSTER", "GETKEYSINSLOT", s, "100")
		if keys == "" {
			break
		}
		for _, k := range strings.Split(keys, "\n") {
			c.Nodes[from].Do(t, "MIGRATE", "127.0.0.1", strconv.Itoa(c.Nodes[to].Port), k, "0", "5000")
			moved++
		}
	}
	c.Nodes[to].Do(t, "CLUSTER", "SETSLOT", s, "NODE", toID)
	c.Nodes[from].Do(t, "CLUSTER", "SETSLOT", s, "NODE", toID)
	return moved
}

// TakeOver gives slot, without its keys, to node to, on every node but
// the one serving it, which is down: what a failover does, a replica
// taking the place of a dead master, in a cluster that has none.
func (c *RedisCluster) TakeOver(t testing.TB, slot, to int) {
	t.Helper()
	from := c.Owner(t, slot)
	c.tellOwner(t, slot, to, from)
}

// tellOwner tells every node but skip that node to serves slot.
func (c *RedisCluster) tellOwner(t testing.TB, slot, to, skip int) {
	t.Helper()
	toID := c.Nodes[to].Do(t, "CLUSTER", "MYID")
	s := strconv.Itoa(slot)
	c.Nodes[to].Do(t, "CLUSTER", "SETSLOT", s, "NODE", toID)
	for i, r := range c.Nodes {
		if i != skip && i != to {
			r.Do(t, "CLUSTER", "SETSLOT", s, "NODE", toID)
		}
	}
}
