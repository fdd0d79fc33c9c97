package redisstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// Seed raises counts to what it is given and never lowers one, so every
// instance may seed what it knows without a call counted twice.
func TestSeedTakesTheLargerCount(t *testing.T) {
	r, s, now := storeOnRedis(t)
	ctx, day := context.Background(), quota.Day.Start(now)
	if _, err := s.Push(ctx, "seed-test", []redisstore.Delta{{Key: "i/a", Period: quota.Day, Start: day, N: 5}}); err != nil {
		t.Fatal(err)
	}
	seeds := []redisstore.Delta{
		{Key: "i/a", Period: quota.Day, Start: day, N: 3}, // below what Redis holds
		{Key: "i/b", Period: quota.Day, Start: day, N: 4}, // unknown to Redis
	}
	for range 2 { // twice: seeding again adds nothing
		if err := s.Seed(ctx, seeds); err != nil {
			t.Fatal(err)
		}
	}
	for key, want := range map[string]int64{"i/a": 5, "i/b": 4} {
		if n, _ := s.Used(ctx, key, quota.Day, now); n != want {
			t.Errorf("%s holds %d after seeding, want %d", key, n, want)
		}
	}
	ttl, _ := strconv.Atoi(r.Do(t, "TTL", s.QuotaKey("i/b", quota.Day, day)))
	if ttl <= 0 || ttl > 86400+120 {
		t.Fatalf("a seeded count's TTL is %d s, want until the day ends (+ margin)", ttl)
	}
}
