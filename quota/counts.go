package quota

import "time"

// Count is one key's count in one period.
type Count struct {
	// Key is the counted key, as in Item.Key.
	Key string
	// Period is the kind of period the count belongs to.
	Period Period
	// Start is when that period began.
	Start time.Time
	// N is the count; negative for a refund not yet pushed.
	N int64
	// Kept is, in what Observed returns, the part of N counted here since
	// the other store last reported that has not reached it (see Pushed),
	// which the counts' makers push there themselves (see Counts); zero
	// elsewhere.
	Kept int64
}

// Counts returns, for the current period of every kind the counter
// counts, each key's count as a store deciding in its place must hold it
// at least: the larger of the shared total last adopted plus what this
// instance counted since, less what bound gives for the key (calls of
// that total that their makers push to that store themselves; nil for
// none), and what that store reported (Observe) without the calls counted
// since the report that have not reached it (by this instance, or by
// another whose copy ObserveReported read; see Pushed), which their makers
// push there themselves.
func (c *Counter) Counts(now time.Time, bound func(key string, p Period, start time.Time) int64) []Count {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Count
	for _, b := range c.currentLocked(now) {
		p := b.period
		seen := make(map[string]bool, len(b.shared)+len(b.pending))
		add := func(key string) {
			if seen[key] {
				return
			}
			seen[key] = true
			var toPush int64
			if bound != nil {
				toPush = max(bound(key, p, b.start), 0)
			}
			if n := b.unkept(key, toPush); n > 0 {
				out = append(out, Count{Key: key, Period: p, Start: b.start, N: n})
			}
		}
		for k := range b.shared {
			add(k)
		}
		for k := range b.pending {
			add(k)
		}
		for k := range b.inflight {
			add(k)
		}
		for k := range b.observed {
			add(k)
		}
	}
	return out
}

// currentLocked returns the buckets of the current period of every kind
// the Counter counts that it holds. c.mu must be held.
func (c *Counter) currentLocked(now time.Time) []*bucket {
	var out []*bucket
	for _, p := range c.periods {
		if b := c.bucketLocked(p, now, false); b != nil {
			out = append(out, b)
		}
	}
	return out
}
