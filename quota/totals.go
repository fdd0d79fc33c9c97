package quota

import "time"

// Totals returns the shared totals of the current periods as last adopted
// from storage, for a copy kept outside it (see SeedTotals). ok is false
// until this Counter has read storage once: it would copy nothing true.
func (c *Counter) Totals(now time.Time) (cs []Count, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.adopted {
		return nil, false
	}
	for _, b := range c.currentLocked(now) {
		for k, n := range b.shared {
			cs = append(cs, Count{Key: k, Period: b.period, Start: b.start, N: n})
		}
	}
	return cs, true
}

// SeedTotals takes cs, shared totals an earlier process copied (Totals),
// as the shared totals of their periods when those are the current ones
// and nothing was read from storage yet: a start while storage is
// unreadable then counts on from what was last known instead of from
// zero, and refuses an identity that had used up its quota. The first
// successful read of storage replaces them.
func (c *Counter) SeedTotals(cs []Count, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.adopted {
		return
	}
	for _, t := range cs {
		if !t.Period.Valid() || !validKeyString(t.Key) || t.N <= 0 || !t.Start.Equal(t.Period.Start(now)) {
			continue
		}
		b := c.bucketLocked(t.Period, now, true)
		b.shared[t.Key] = max(b.shared[t.Key], t.N)
	}
}
