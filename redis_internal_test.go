package mcplimit

import (
	"net"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// silentServer accepts connections and never answers: a Redis too slow
// to reply within the timeout, which may still run what it was sent.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return ln.Addr().String()
}

// A refund that timed out may have run in Redis: it is not kept to be
// pushed later, which would give the count back twice.
func TestTimedOutRefundIsNotPushedAgain(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "refund", Store: &Store{Redis: &RedisStore{URL: "redis://" + silentServer(t), Timeout: caddy.Duration(50 * time.Millisecond)}}})
	r := h.zone.redis.Load()
	h.zone.refundRedis(r, []redisstore.Item{{Kind: redisstore.Quota, Key: "i/refunded", Period: quota.Day, Limit: 10, N: 1}})
	if n := r.pendingLen(); n != 0 {
		t.Fatalf("%d counts kept to push, want none", n)
	}
}

// Counts recorded into a store a reload replaced, by a request or an
// adoption that loaded it just before the swap, or put back by a push the
// reload cut short, go to the store that took its pending counts over.
func TestReplacedRedisStoreForwardsItsCounts(t *testing.T) {
	old := &zoneRedis{pending: map[deltaKey]int64{}}
	next := &zoneRedis{pending: map[deltaKey]int64{}}
	old.movedTo = next
	now := time.Now()
	old.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, now, 1)
	old.addCounts([]quota.Count{{Key: "i/b", Period: quota.Day, Start: quota.Day.Start(now), N: 3}})
	old.putBack(map[deltaKey]int64{{key: "i/c", period: quota.Day, start: quota.Day.Start(now).Unix()}: 4}) // a push the reload cut short
	if old.pendingLen() != 0 || next.pendingLen() != 3 {
		t.Fatalf("pending: replaced store %d, its successor %d; want 0 and 3", old.pendingLen(), next.pendingLen())
	}
}
