package mcplimit

import (
	"maps"
	"slices"

	"go.uber.org/zap"
)

// warnPerIdentityAboveMax warns about a per-identity concurrency cap above
// the zone-wide cap it sits under (`concurrency 5 per_identity 10`): one
// identity is held by the zone-wide cap first, so the per-identity cap
// never binds. It is a warning, not an error: a tier may lower the
// zone-wide cap for its calls below a per-identity cap set above it. Each
// set of caps is warned about where it is set, once: a tier or an override
// that inherits its caps unchanged is not warned about again.
func warnPerIdentityAboveMax(pol *policy, logger *zap.Logger) {
	check := func(c Concurrency, fields ...zap.Field) {
		if c.Max > 0 && c.PerIdentity > c.Max {
			logger.Warn("concurrency per_identity is above the zone-wide cap: one identity meets the zone-wide cap first, so per_identity never binds; lower it, or raise the zone-wide cap",
				append(fields, zap.String("zone", pol.zone), zap.Int("max", c.Max), zap.Int("per_identity", c.PerIdentity))...)
		}
	}
	check(pol.base.concurrency)
	under := map[string]Concurrency{"": pol.base.concurrency}
	for _, t := range pol.tiers {
		under[t.name] = t.limits.concurrency
		if t.limits.concurrency != pol.base.concurrency {
			check(t.limits.concurrency, zap.String("tier", t.name))
		}
	}
	keys := slices.SortedFunc(maps.Keys(pol.overrides), func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	for _, key := range keys {
		o := pol.overrides[key]
		if !o.concurrency {
			continue
		}
		var warned []Concurrency // each set of caps once, under whichever tier
		for _, name := range slices.Sorted(maps.Keys(o.limits)) {
			if c := o.limits[name].concurrency; c != under[name] && !slices.Contains(warned, c) {
				warned = append(warned, c)
				check(c, zap.String("override", fingerprintHex(key)), zap.String("tier", name))
			}
		}
	}
}
