package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// LuaDate exposes the scripts' calendar to the external tests.
const LuaDate = luaDate

// PreloadedScripts exposes the hashes of the scripts Preload loads.
var PreloadedScripts = scriptHashes(preloaded)

// ReadSlotsWith has s read the cluster's slot map with slots, in place of
// asking a node, as go-redis's ClusterOptions.ClusterSlots does.
func ReadSlotsWith(s *Store, slots func(context.Context) ([]redis.ClusterSlot, error)) {
	_ = s.cluster.Close()
	s.cluster = redis.NewClusterClient(&redis.ClusterOptions{ClusterSlots: slots, ContextTimeoutEnabled: true})
}

// FillOverWithExpired replaces what s's short-circuit remembers with a
// full map (maxOver entries) of refusals whose wait ended before now.
func FillOverWithExpired(s *Store, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over = make(map[overKey]overEntry, maxOver)
	for i := range maxOver {
		k := overKey{kind: Bucket, key: "expired/" + strconv.Itoa(i)}
		s.over[k] = overEntry{until: now.Add(-time.Second), recheck: now.Add(RecheckAfter), n: 1, rate: 1, burst: 1}
	}
}
