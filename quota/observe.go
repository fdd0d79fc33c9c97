package quota

import "time"

// Observe records, for each item, that the store deciding this zone's
// quotas in this Counter's place (Redis) holds it.Used for it.Key in the
// period of kind it.Period containing now. From then on Used, TryAdd and
// AnyCounted count at least that much plus what is counted here: should
// that store become unreachable, counting here goes on from what it held
// instead of from what this Counter alone saw.
func (c *Counter) Observe(items []Item, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range items {
		it := &items[i]
		if !it.Period.Valid() || !validKey(it.Key) {
			continue
		}
		b := c.bucketLocked(it.Period, now, true)
		extra := it.Used - b.local(it.Key)
		switch p := b.observed[string(it.Key)]; {
		case extra <= 0:
			delete(b.observed, string(it.Key))
		case p != nil:
			*p = extra
		default:
			if b.observed == nil {
				b.observed = deltas{}
			}
			b.observed[string(it.Key)] = &extra
		}
	}
}
