package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node a MOVED redirect names keeps one client: the next redirect there
// reuses it. A new client per redirect would leak the old one's pool and
// dial anew on every call while the slot map lags.
func TestARedirectedNodeKeepsOneClient(t *testing.T) {
	s := &Store{}
	like := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() {
		_ = like.Close()
		for _, c := range s.redirects {
			_ = c.Close()
		}
	})
	first := s.redirected("127.0.0.1:2", like)
	if again := s.redirected("127.0.0.1:2", like); again != first {
		_ = again.Close()
		t.Fatal("a second redirect to the same node made another client")
	}
	if other := s.redirected("127.0.0.1:3", like); other == first {
		t.Fatal("a redirect to another node reused the first node's client")
	}
}

// Closing a cluster's store closes the clients its redirects made too:
// else each would keep its connections open after the store is gone
// (a config reload makes a new store).
func TestCloseClosesTheRedirectsClients(t *testing.T) {
	s, err := New(Config{URL: "redis://127.0.0.1:1", Cluster: true, Zone: "z"})
	if err != nil {
		t.Fatal(err)
	}
	like := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = like.Close() })
	c := s.redirected("127.0.0.1:2", like)
	t.Cleanup(func() { _ = c.Close() })
	_ = s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Ping on a redirect's client after Close: %v, want %v", err, redis.ErrClosed)
	}
}
