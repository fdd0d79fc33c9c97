package redisstore

import (
	"context"

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
