package quota

// An object whose lines do not all read (damaged, truncated, edited by
// hand: a count that is no number) or that is there but lost its history
// (emptied, or rewritten by a version before it) may have lost counts.
// The Counters that read it keep, per key, what they last adopted as a
// floor, so that an identity that used up its quota is not handed it
// again; the first that pushes to it then finds the damage under the lock
// (a push rewrites the object with the lines that read) and pushes what
// its floor holds above the object's counts at its next flush, once. An
// object that is not there (a zone moved to another storage) is no damage:
// quotas count on from what that storage holds.

// damaged reports whether j's read of b's object found it damaged.
func damaged(b *bucket, j *job) bool {
	return j.malformed > 0 || b.lineage != "" && j.history.lineage == "" && !j.absent
}

// keepThroughDamage adopts j's totals of b's damaged object as described
// above: a read keeps the floor, a push counts what the floor holds above
// the object as pending. It returns the counts restored. The caller holds
// c.mu, and b.inflight is still the pushed deltas.
func (c *Counter) keepThroughDamage(b *bucket, j *job) int64 {
	var restored int64
	for k, v := range b.shared {
		stored := j.totals[k]
		if !j.push {
			if stored < v {
				j.totals[k] = v
				restored += v - stored
			}
			continue
		}
		if d := v - (stored - b.inflight.get([]byte(k))); d > 0 {
			b.pending.add([]byte(k), d)
			restored += d
		}
	}
	if c.onDamage != nil {
		c.onDamage(b.name, j.malformed, restored)
	}
	return restored
}
