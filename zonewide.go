package mcplimit

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
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
	if parts := urlConflict(expandRedisURL(a), expandRedisURL(b)); parts != "" {
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

// urlConflict names the parts in which two Redis URLs differ ("" when they
// mean the same): the scheme, the user or password, the host, the DB (none
// is DB 0) and the options (in any order).
func urlConflict(a, b string) string {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		if a == b {
			return ""
		}
		return "spelling"
	}
	var parts []string
	add := func(differ bool, part string) {
		if differ {
			parts = append(parts, part)
		}
	}
	add(!strings.EqualFold(ua.Scheme, ub.Scheme), "scheme")
	add(ua.User.String() != ub.User.String(), "user or password")
	add(!strings.EqualFold(ua.Host, ub.Host), "host")
	add(redisDB(ua) != redisDB(ub), "db")
	add(!maps.EqualFunc(ua.Query(), ub.Query(), func(x, y []string) bool {
		return slices.Equal(slices.Sorted(slices.Values(x)), slices.Sorted(slices.Values(y)))
	}), "options")
	return strings.Join(parts, ", ")
}

// redisDB is the DB a Redis URL names, "0" when it names none.
func redisDB(u *url.URL) string {
	if db := strings.Trim(u.Path, "/"); db != "" {
		return db
	}
	return "0"
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
// holding z sets the zone-wide settings otherwise: the zone would take those of the handler Caddy happens to
// load last, which between servers changes from one load to the next, so
// one config would share its limits through Redis on one start and keep
// them per instance on the next. Handlers of another load (the config a
// reload replaces) may differ: the new one's settings apply.
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
