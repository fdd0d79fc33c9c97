package mcplimit

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// zoneWideConflict says how the zone-wide settings of a and b differ
// ("" when they agree): the flush interval and the store, which one zone
// can have only one of.
func zoneWideConflict(a, b *policy) string {
	var diffs []string
	if a.flush != b.flush {
		diffs = append(diffs, fmt.Sprintf("flush_interval %v here, %v in another", a.flush, b.flush))
	}
	switch {
	case (a.redis == nil) != (b.redis == nil):
		diffs = append(diffs, fmt.Sprintf("%s here, %s in another", storeOf(a), storeOf(b)))
	case a.redis != nil:
		diffs = append(diffs, redisConflict(a.redis, b.redis)...)
	}
	return strings.Join(diffs, "; ")
}

// redisConflict says how two Redis stores differ, as they would run: the
// URL once its placeholders are expanded, and the timeout a default
// stands for.
func redisConflict(a, b *RedisStore) []string {
	var diffs []string
	if parts := redisstore.URLDifference(expandRedisURL(a), expandRedisURL(b), a.Cluster && b.Cluster); parts != "" {
		// Not quoted: a URL may hold a password.
		diffs = append(diffs, "store redis url with another "+parts+" in another")
	}
	if a.Cluster != b.Cluster {
		diffs = append(diffs, fmt.Sprintf("store redis %s here, %s in another", clusterOf(a), clusterOf(b)))
	}
	ta, errA := redisTimeout(a)
	tb, errB := redisTimeout(b)
	if errA == nil && errB == nil && ta != tb {
		diffs = append(diffs, fmt.Sprintf("store redis timeout %v here, %v in another", ta, tb))
	}
	return diffs
}

// clusterOf names whether rs is a cluster, as the Caddyfile writes it.
func clusterOf(rs *RedisStore) string {
	if rs.Cluster {
		return "with cluster"
	}
	return "without cluster"
}

// storeOf names p's store as the Caddyfile writes it.
func storeOf(p *policy) string {
	if p.redis == nil {
		return "no store"
	}
	return "store redis"
}

// agree refuses pol, a handler's policy from the config load whose
// metrics registry is reg (one per load), when a handler of the same load
// holding z sets the zone-wide settings otherwise: the zone would take
// those of the handler Caddy happens to load last, which between servers
// changes from one load to the next, so one config would share its limits
// through Redis on one start and keep them per instance on the next.
// Handlers of another load (the config a reload replaces) may differ: the
// new one's settings apply.
func (z *zone) agree(reg *prometheus.Registry, pol *policy) error {
	z.holdMu.Lock()
	defer z.holdMu.Unlock()
	for _, h := range z.holders {
		if reg == nil || h.reg != reg {
			continue
		}
		if diff := zoneWideConflict(pol, h.pol); diff != "" {
			return fmt.Errorf("handlers of the zone in this config set its zone-wide settings differently (%s): give every handler of the zone the same flush_interval and store", diff)
		}
	}
	return nil
}
