package mcplimit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// A zone's buckets follow limit changes (see buckets.Set.Advance): a
// bucket banks its refill at the rate it had up to the change, and earns
// its new limit from then on. Only a change of which limit a key gets
// counts: a reload that changes something else leaves the buckets alone,
// so that an idle bucket keeps earning its own rate rather than the
// slowest one a change credits to buckets whose new limit is unknown.

// retune brings the zone's bucket sets to the limits of the handlers now
// holding it. It runs when a handler takes hold of the zone and when one
// lets go, since during a reload the old and the new configuration hold
// it together: what changed shows against the holders before, whichever
// of the two moments changes them. z.holdMu must be held.
func (z *zone) retune(now time.Time) {
	for _, s := range []struct {
		set interface {
			Advance(time.Time, time.Duration, rate.Limit)
		}
		l layer
	}{{z.preauth, layerPreauth}, {z.tenants, layerTenant}, {z.groups, layerGroup}, {z.shared, layerGlobal}} {
		if m := z.limitsMap(s.l); m != z.applied[s.l] {
			z.applied[s.l] = m
			bound, slowest := z.refill(s.l)
			s.set.Advance(now, bound, slowest)
		}
	}
	// Overrides are their identities' own limits: a change to some
	// retunes those identities' buckets only.
	ov := z.overrideMaps()
	if changed := changedKeys(z.overridesApplied, ov); len(changed) > 0 {
		z.tenants.Rebase(now, changed)
	}
	z.overridesApplied = ov
}

// limitsMap describes which limit the holders give which keys of the
// bucket set of layer l, overrides aside: one line per distinct holder
// policy, each with every input of the choice (tiers in order with their
// placeholders and values, gateways with their networks) and the limits.
func (z *zone) limitsMap(l layer) string {
	var lines []string
	for _, h := range z.holders {
		lines = append(lines, h.pol.limitsMap(l))
	}
	slices.Sort(lines)
	return strings.Join(slices.Compact(lines), "\n")
}

// limitsMap describes which limit p gives which keys of the bucket set of
// layer l, overrides aside.
func (p *policy) limitsMap(l layer) string {
	var b strings.Builder
	switch l {
	case layerPreauth:
		fmt.Fprintf(&b, "%t %s", p.preauthOff, limitText(p.preauth))
		for _, g := range p.gateways {
			fmt.Fprintf(&b, "|%v %s", g.prefixes, limitText(g.limit))
		}
	case layerTenant:
		fmt.Fprintf(&b, "%t %s", p.base.tenantOff, limitText(p.base.tenant))
		for _, t := range p.tiers {
			fmt.Fprintf(&b, "|%q %q %t %s", t.placeholder, t.values, t.limits.tenantOff, limitText(t.limits.tenant))
		}
	case layerGroup:
		fmt.Fprintf(&b, "%q %s", p.groupKey, limitText(p.group))
	default:
		fmt.Fprintf(&b, "%t %s|%t %s", p.globalOff, limitText(p.global), p.anonymousOn, limitText(p.anonymous))
	}
	return b.String()
}

// overrideMaps describes, per identity with an override of its tenant
// limits in a holder, those limits: per tier they apply under, in every
// holder.
func (z *zone) overrideMaps() map[[16]byte]string {
	lines := map[[16]byte][]string{}
	for _, h := range z.holders {
		for fp, o := range h.pol.overrides {
			if !o.tenant {
				continue
			}
			for tier, ol := range o.limits {
				lines[fp] = append(lines[fp], fmt.Sprintf("%q %t %s", tier, ol.tenantOff, limitText(ol.tenant)))
			}
		}
	}
	maps := make(map[[16]byte]string, len(lines))
	for fp, l := range lines {
		slices.Sort(l)
		maps[fp] = strings.Join(slices.Compact(l), "|")
	}
	return maps
}

// changedKeys returns the keys whose description differs between was and
// is, a key missing from one included.
func changedKeys(was, is map[[16]byte]string) (keys [][16]byte) {
	for k, v := range is {
		if w, ok := was[k]; !ok || w != v {
			keys = append(keys, k)
		}
	}
	for k := range was {
		if _, ok := is[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// limitText spells a bucket limit for limitsMap.
func limitText(b bucketLimit) string {
	return fmt.Sprintf("%g/%d", float64(b.rate), b.burst)
}

// refill is policy.refill over every handler holding the zone (they share
// its buckets): the longest time to fill, and the slowest rate.
func (z *zone) refill(l layer) (time.Duration, rate.Limit) {
	var bound time.Duration
	var slowest float64
	for _, h := range z.holders {
		b, s := h.pol.refill(l)
		bound = max(bound, b)
		if s > 0 && (slowest == 0 || s < slowest) {
			slowest = s
		}
	}
	return bound, rate.Limit(slowest)
}
