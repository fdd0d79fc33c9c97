package quota

import "slices"

// An object whose lines do not all read (damaged, truncated, edited by
// hand: a count that is no number), or that lost the history this Counter
// read in it (emptied, deleted, rewritten by a version before it, started
// again by another instance after one of those, or put back as an older
// copy of itself: see rolledBack), may have lost counts. The Counter
// keeps, per key, what it last adopted as a floor, so that an identity
// that used up its quota is not handed it again: a read keeps the floor,
// and the next flush pushes even with nothing counted, restoring under
// the object's lock what the floor holds above the object's counts (none,
// when another instance restored them first). A zone moved to another
// storage forgets the history it read (see Counter.StorageMoved): quotas
// count on from what that storage holds.

// damaged reports whether an object read with history h and malformed
// lines lost counts a Counter that had read the history seen in it held.
func damaged(seen, h history, malformed int) bool {
	return malformed > 0 || seen.lineage != "" && (h.lineage != seen.lineage || rolledBack(seen, h))
}

// keepRetired is how many lineages an object had before its present one
// a Counter remembers.
const keepRetired = 8

// see records h as the history b's object has now, retiring the lineage
// seen before when h's is another: an object back in a retired lineage was
// put back from before a repair (see Counter.push).
func (b *bucket) see(h history) {
	if old := b.seen.lineage; old != "" && old != h.lineage && !slices.Contains(b.retired, old) {
		b.retired = append(slices.Clip(b.retired), old) // a job's copy stays as it was
		if n := len(b.retired); n > keepRetired {
			b.retired = b.retired[n-keepRetired:]
		}
	}
	b.seen = h
}

// rolledBack reports whether h, of seen's lineage, is an older state of
// the object than seen: its last push is one seen holds before its own
// last (an older copy put back, or the newest history lines removed), or
// older than any seen keeps. A writer that paused and stored over later
// pushes leaves a push of its own at a generation seen gives another
// writer: that object was overwritten, not rolled back (see checkSent).
func rolledBack(seen, h history) bool {
	n := len(seen.entries)
	if n == 0 {
		return false
	}
	if len(h.entries) == 0 {
		return true
	}
	last := h.entries[len(h.entries)-1]
	if last.gen < seen.entries[0].gen {
		return true
	}
	for _, e := range seen.entries[:n-1] {
		if e == last {
			return true
		}
	}
	return false
}

// aboveFloor returns, per key, what floor holds above the object's counts,
// given totals, the object's counts plus the deltas being pushed.
func aboveFloor(floor, totals map[string]int64, pushed deltas) deltas {
	var extra deltas
	for k, v := range floor {
		stored := totals[k]
		if d := pushed[k]; d != nil {
			stored -= *d
		}
		if v > stored {
			if extra == nil {
				extra = deltas{}
			}
			d := v - stored
			extra[k] = &d
		}
	}
	return extra
}

// StorageMoved tells the Counter that its storage is another one now: the
// histories it read are of objects that storage does not hold, so an
// object missing there is no damage, and quotas count on from what it
// holds. A flush running meanwhile adopts no history.
func (c *Counter) StorageMoved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moves++
	for _, b := range c.buckets {
		b.seen, b.retired, b.sent, b.keeping = history{}, nil, nil, false
	}
}

// keepFloor raises j's totals of b's damaged object, read without a push,
// to what b had adopted, and returns the counts kept above the object.
func keepFloor(b *bucket, j *job) int64 {
	var kept int64
	for k, v := range b.shared {
		if stored := j.totals[k]; stored < v {
			j.totals[k] = v
			kept += v - stored
		}
	}
	return kept
}
