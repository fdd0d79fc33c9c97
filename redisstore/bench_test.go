package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// BenchmarkPush is one push of an outage's counts, by how many it holds:
// what sets the size of the chunks a zone pushes them in.
func BenchmarkPush(b *testing.B) {
	r := harness.StartRedis(b)
	s, err := redisstore.New(redisstore.Config{URL: r.URL, Zone: "bench", Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	day := quota.Day.Start(time.Now())
	id := 0 // every push its own id: the runs of a sub-benchmark share the Redis
	for _, n := range []int{1000, 10000, 100000} {
		ds := make([]redisstore.Delta, n)
		for i := range ds {
			ds[i] = redisstore.Delta{Key: "i/0123456789abcdef0123456789abcdef" + strconv.Itoa(i), Period: quota.Day, Start: day, N: 3}
		}
		b.Run(strconv.Itoa(n)+"_counts", func(b *testing.B) {
			for b.Loop() {
				id++
				if added, err := s.Push(context.Background(), strconv.Itoa(id), ds); err != nil || !added {
					b.Fatalf("push: %v, added %v", err, added)
				}
			}
		})
	}
}
