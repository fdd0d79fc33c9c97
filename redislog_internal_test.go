package mcplimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestGoRedisLogsThroughTheZoneLogger(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	pol, err := compile(&Handler{Zone: "redis-log", Store: &Store{Redis: &RedisStore{URL: "redis://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := newZoneRedis(pol, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer r.store.Close()
	// go-redis logs that it rounds a sub-millisecond expiry up, before
	// any connection is attempted.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer c.Close()
	_ = c.Set(context.Background(), "k", "v", 500*time.Microsecond).Err()
	found := false
	for _, e := range logs.All() {
		if e.LoggerName == "go-redis" && strings.Contains(e.Message, "truncating to 1ms") {
			found = true
		}
	}
	if !found {
		t.Fatalf("go-redis's message did not reach the zone logger: %v", logs.All())
	}
}
