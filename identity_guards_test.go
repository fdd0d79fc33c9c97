package mcplimit_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// Replacing storage's key with the Redis store's lets go of the storage
// lock: a key lost from storage afterwards is stored again at the next
// flush, which takes that lock.
func TestRedisKeyReplacedInStorageIsStoredAgainOnceLost(t *testing.T) {
	const zone = "key_redis_lock"
	rd := harness.StartRedis(t)
	inRedis := make([]byte, 32)
	_, _ = rand.Read(inRedis)
	rd.Do(t, "SET", "mcprl:{"+zone+"}:fpkey", string(inRedis))
	o := newOutage(t)
	o.putKey(zone) // storage holds another key, which the start replaces
	start(t, "zone "+zone+"\nflush_interval 1s\nstore redis "+rd.URL, o.options())
	if !bytes.Equal(o.storedKey(zone), inRedis) {
		t.Fatal("the key in storage is not redis's after the start")
	}
	if err := os.Remove(o.keyFile(zone)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "redis's key to be stored again", func() bool {
		return bytes.Equal(o.storedKey(zone), inRedis)
	})
}
