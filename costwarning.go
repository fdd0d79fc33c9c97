package mcplimit

import (
	"maps"
	"slices"

	"go.uber.org/zap"
)

// warnUnpayableCosts warns about tool costs above the tenant burst of the
// top-level limits or of a tier: no call of that tool can ever pass for
// those tenants (each is told so when refused). It is a warning, not an
// error: an override may give some identities the burst.
func warnUnpayableCosts(pol *policy, logger *zap.Logger) {
	check := func(l limits) {
		if l.tenantOff || l.tenant.rate <= 0 {
			return
		}
		for _, tool := range slices.Sorted(maps.Keys(l.costs)) {
			if c := l.costs[tool]; c > int64(l.tenant.burst) {
				logger.Warn("a tool costs more than the tenant burst: no call of it can pass for these tenants unless an override raises their burst",
					zap.String("zone", pol.zone), zap.String("tier", l.tier), zap.String("tool", tool), zap.Int64("cost", c), zap.Int("burst", l.tenant.burst))
			}
		}
	}
	check(pol.base)
	for _, t := range pol.tiers {
		check(t.limits)
	}
}
