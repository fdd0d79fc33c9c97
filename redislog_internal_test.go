package mcplimit

import (
	"context"
	"errors"
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
	r, err := newZoneRedis(pol, freshCounters(), zap.New(core))
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
			if e.Level != zap.DebugLevel {
				t.Errorf("go-redis's message logged at %v: a failed dial would repeat at that level all through an outage", e.Level)
			}
		}
	}
	if !found {
		t.Fatalf("go-redis's message did not reach the zone logger: %v", logs.All())
	}
}

// Calls failing together as Redis goes away (every request then in flight)
// make one transition to degraded: one error line and one save of the
// counts, not one per failed call.
func TestRedisFailuresMakeOneTransition(t *testing.T) {
	pol, err := compile(&Handler{Zone: "redis-fail", Store: &Store{Redis: &RedisStore{URL: "redis://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := newZoneRedis(pol, freshCounters(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer r.store.Close()
	now := time.Now()
	if !r.fail(errors.New("connection refused"), now) {
		t.Fatal("the first failure is no transition to degraded")
	}
	for i := range 3 {
		if r.fail(errors.New("connection refused"), now.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("failure %d while degraded counted as a new transition", i+2)
		}
	}
	if !r.degraded.Load() || r.failures != 4 {
		t.Fatalf("degraded %v, failures %d; want degraded after 4 failures", r.degraded.Load(), r.failures)
	}
}
