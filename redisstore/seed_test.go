package redisstore_test

import (
	"context"
	"strconv"
	"strings"
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

// Restore adds the largest claim for a count once to what Redis counted
// since it lost its data: a smaller claim, or the same one again, adds
// nothing, and a larger one its excess; its base expires with the count.
func TestRestoreAddsTheLargestClaimOnceToWhatRedisCountedSince(t *testing.T) {
	r, s, now := storeOnRedis(t)
	ctx, day := context.Background(), quota.Day.Start(now)
	if _, err := s.Push(ctx, "restore-test", []redisstore.Delta{{Key: "i/a", Period: quota.Day, Start: day, N: 4}}); err != nil {
		t.Fatal(err) // counted since the loss
	}
	for _, c := range []struct {
		claims []int64 // for i/a, then i/b
		a, b   int64
	}{
		{[]int64{10, 3}, 14, 3},
		{[]int64{10, 3}, 14, 3}, // the same claims again
		{[]int64{6, 0}, 14, 3},  // smaller ones
		{[]int64{12, 5}, 16, 5}, // larger ones: their excess
	} {
		err := s.Restore(ctx, []redisstore.Delta{
			{Key: "i/a", Period: quota.Day, Start: day, N: c.claims[0]},
			{Key: "i/b", Period: quota.Day, Start: day, N: c.claims[1]},
		})
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]int64{"i/a": c.a, "i/b": c.b} {
			if n, _ := s.Used(ctx, key, quota.Day, now); n != want {
				t.Fatalf("claims %v: %s holds %d, want %d", c.claims, key, n, want)
			}
		}
	}
	// A start's seed gives back what it raises a count by, which a claim
	// then does not give back again: 4 counted since the loss, the seed
	// raises to 10 (6 given back), a claim of 10 adds the 4 it lacks.
	if _, err := s.Push(ctx, "restore-test-2", []redisstore.Delta{{Key: "i/c", Period: quota.Day, Start: day, N: 4}}); err != nil {
		t.Fatal(err)
	}
	c := []redisstore.Delta{{Key: "i/c", Period: quota.Day, Start: day, N: 10}}
	if err := s.Seed(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Used(ctx, "i/c", quota.Day, now); n != 14 {
		t.Fatalf("i/c holds %d after a seed and a restore of 10 over 4 counted since, want 14", n)
	}
	for _, key := range []string{s.QuotaKey("i/b", quota.Day, day), "mcprl:{z}:r:" + strings.TrimPrefix(s.QuotaKey("i/b", quota.Day, day), "mcprl:{z}:")} {
		if ttl, _ := strconv.Atoi(r.Do(t, "TTL", key)); ttl <= 0 || ttl > 86400+120 {
			t.Fatalf("%s expires in %d s, want when the day ends (+ margin)", key, ttl)
		}
	}
}
