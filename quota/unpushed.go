package quota

// Unpushed returns the counts not pushed to storage yet, so that a process
// stopping while storage is unreachable can keep them elsewhere.
func (c *Counter) Unpushed() []Count {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Count
	for _, b := range c.buckets {
		for _, d := range []deltas{b.pending, b.inflight} {
			for k, n := range d {
				out = append(out, Count{Key: k, Period: b.period, Start: b.start, N: *n})
			}
		}
	}
	return out
}

// AddUnpushed counts again what an earlier process could not push (see
// Unpushed), in the periods the counts belong to, to be pushed at the next
// Flush. Counts of periods that ended before the previous one, which
// refuse nothing any more, and invalid ones are dropped.
func (c *Counter) AddUnpushed(us []Count) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	for _, u := range us {
		if !u.Period.Valid() || !validKeyString(u.Key) || u.N == 0 || u.Start.Before(u.Period.prev(u.Period.Start(now))) || u.Start.After(now) {
			continue
		}
		c.bucketLocked(u.Period, u.Start, true).countHere(nil, []byte(u.Key), u.N)
	}
}
