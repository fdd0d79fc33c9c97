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
// Buckets kept in Redis are not held here: the time of the last change of
// each set's limits goes with every request to Redis, which credits a
// bucket's idle time before it at the limits the bucket last had.

// retune brings the zone's bucket sets to the limits of the handlers now
// holding it. It runs when a handler takes hold of the zone and when one
// lets go, since during a reload the old and the new configuration hold
// it together: what changed shows against the holders before, whichever
// of the two moments changes them. z.holdMu must be held.
func (z *zone) retune(now time.Time) {
	for _, s := range []struct {
		set interface {
			Advance(time.Time, time.Duration, rate.Limit, int)
		}
		l layer
	}{{z.preauth, layerPreauth}, {z.tenants, layerTenant}, {z.groups, layerGroup}, {z.global, layerGlobal}, {z.anon, layerAnonymous}} {
		// Holders that disagree (routes of one zone with different
		// limits, or a reload in progress) leave unknown which limit a
		// key had, as a request may have moved from one to the other:
		// only one agreed map, the one applied before, is no change.
		if m, agreed := z.limitsMap(s.l); !agreed || m != z.applied[s.l] {
			bound, slowest, largest := z.refill(s.l)
			if slowest == 0 {
				// Off in every holder: the buckets stay as they are,
				// earning their rate, so a layer turned off and on
				// again finds each where it was, not dropped as idle
				// and made anew with a fresh burst.
				continue
			}
			z.applied[s.l] = m
			s.set.Advance(now, bound, slowest, largest)
			z.limitsSince[s.l].Store(now.UnixMicro())
		}
	}
	// Overrides are their identities' own limits: a change to some, or
	// holders that disagree on some, retunes those identities' buckets
	// only.
	ov, split := z.overrideMaps()
	if changed := append(changedKeys(z.overridesApplied, ov), split...); len(changed) > 0 {
		_, slowest, largest := z.refill(layerTenant)
		z.tenants.Rebase(now, changed, slowest, largest)
		z.limitsSince[layerTenant].Store(now.UnixMicro())
	}
	z.overridesApplied = ov
}

// limitsMap describes which limit the holders give which keys of the
// bucket set of layer l, overrides aside: one line per distinct holder
// policy, each with every input of the choice (tiers in order with their
// placeholders and values, gateways with their networks) and the limits.
// agreed says every holder has the same line.
func (z *zone) limitsMap(l layer) (m string, agreed bool) {
	var lines []string
	for _, h := range z.holders {
		lines = append(lines, h.pol.limitsMap(l))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	return strings.Join(lines, "\n"), len(lines) <= 1
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
	case layerGlobal:
		fmt.Fprintf(&b, "%t %s", p.globalOff, limitText(p.global))
	case layerAnonymous:
		fmt.Fprintf(&b, "%t %s", p.anonymousOn, limitText(p.anonymous))
	}
	return b.String()
}

// overrideMaps describes, per identity with an override of its tenant
// limits in a holder, those limits: per tier they apply under, in every
// holder. split lists the identities the holders disagree on (one has an
// override another lacks or sets otherwise).
func (z *zone) overrideMaps() (maps map[[16]byte]string, split [][16]byte) {
	per := make([]map[[16]byte]string, len(z.holders))
	all := map[[16]byte][]string{}
	for i, h := range z.holders {
		per[i] = map[[16]byte]string{}
		for fp, o := range h.pol.overrides {
			if !o.tenant {
				continue
			}
			var lines []string
			for tier, ol := range o.limits {
				lines = append(lines, fmt.Sprintf("%q %t %s", tier, ol.tenantOff, limitText(ol.tenant)))
			}
			slices.Sort(lines)
			per[i][fp] = strings.Join(lines, "|")
			all[fp] = append(all[fp], per[i][fp])
		}
	}
	maps = make(map[[16]byte]string, len(all))
	for fp, descs := range all {
		for _, p := range per {
			if _, ok := p[fp]; !ok {
				// A holder without it is part of the description: the
				// holders disagree on the key (split), and it changes
				// again when that holder goes.
				descs = append(descs, "none")
			}
		}
		slices.Sort(descs)
		descs = slices.Compact(descs)
		maps[fp] = strings.Join(descs, "\n")
		if len(descs) > 1 {
			split = append(split, fp)
		}
	}
	return maps, split
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
// its buckets): the longest time to fill, the slowest rate and the largest
// burst. z.holdMu must be held.
func (z *zone) refill(l layer) (time.Duration, rate.Limit, int) {
	var bound time.Duration
	var slowest float64
	var largest int
	for _, h := range z.holders {
		b, s, g := h.pol.refill(l)
		bound, largest = max(bound, b), max(largest, g)
		if s > 0 && (slowest == 0 || s < slowest) {
			slowest = s
		}
	}
	return bound, rate.Limit(slowest), largest
}
