package quota

import "time"

// ObserveSlack is how far apart Observe allows this host's clock and the
// other store's to be.
const ObserveSlack = 10 * time.Second

// Observe records, for each item, that the store deciding this zone's
// quotas in this Counter's place (Redis) holds it.Used for it.Key in the
// period of kind it.Period containing now. From then on Used, TryAdd and
// AnyCounted count at least that much plus what is counted here (less
// others' counts read from storage later, see rebaseObserved): should
// that store become unreachable, counting here goes on from what it held
// instead of from what this Counter alone saw. Within ObserveSlack of a
// period's start nothing is recorded: the other store reads its own clock,
// and a count it gave for the period that just ended must not become the
// new one's.
func (c *Counter) Observe(items []Item, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range items {
		it := &items[i]
		if !observable(it, now) {
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

// ObserveAdded records, for each item, that the store deciding in this
// Counter's place (Redis) counted it.N more for it.Key than it held when
// last observed, in the period of kind it.Period containing now: a count
// made there on this host's behalf, such as a proving call's. Unlike
// Observe, concurrent calls add up.
func (c *Counter) ObserveAdded(items []Item, now time.Time) {
	c.observeN(items, now, func(had, n int64) int64 { return had + n })
}

// ObserveExtra records, for each item, that the store deciding in this
// Counter's place (Redis) held at least it.N more for it.Key than was
// counted here, in the period of kind it.Period containing now, keeping
// the larger of that and what it recorded before: what Observed gave a
// copy kept outside that store, read back by a start while the store is
// unreachable or gone. Copies taken by several processes may each be read.
func (c *Counter) ObserveExtra(items []Item, now time.Time) {
	c.observeN(items, now, func(had, n int64) int64 { return max(had, n) })
}

// observeN records each item's positive it.N as what the other store
// holds beyond the counts made here, combined with what was recorded
// before for it.
func (c *Counter) observeN(items []Item, now time.Time, combine func(had, n int64) int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range items {
		it := &items[i]
		if it.N <= 0 || !observable(it, now) {
			continue
		}
		b := c.bucketLocked(it.Period, now, true)
		if p := b.observed[string(it.Key)]; p != nil {
			*p = combine(*p, it.N)
			continue
		}
		if b.observed == nil {
			b.observed = deltas{}
		}
		n := it.N
		b.observed[string(it.Key)] = &n
	}
}

// sumOf sums totals.
func sumOf(totals map[string]int64) int64 {
	var n int64
	for _, v := range totals {
		n += v
	}
	return n
}

// sum sums the deltas.
func (d deltas) sum() int64 {
	var n int64
	for _, v := range d {
		n += *v
	}
	return n
}

// grownBeyond returns what totals, read from storage for b, hold beyond
// b.shared and the deltas this Counter just pushed (b.inflight): counts
// other instances pushed since b was last read. The caller holds flushMu,
// under which alone b.shared is replaced; b.inflight is only read while
// a flush runs.
func grownBeyond(totals map[string]int64, b *bucket) map[string]int64 {
	// Sums first: when others pushed nothing, no lookup per key.
	if sumOf(totals) <= sumOf(b.shared)+b.inflight.sum() {
		return nil
	}
	var grown map[string]int64
	for k, n := range totals {
		n -= b.shared[k]
		if d := b.inflight[k]; d != nil {
			n -= *d
		}
		if n > 0 {
			if grown == nil {
				grown = map[string]int64{}
			}
			grown[k] = n
		}
	}
	return grown
}

// rebaseObserved takes grown (see grownBeyond) out of each key's observed
// count: the store deciding in this Counter's place (Redis) already held
// those counts when it last reported to it (an outage's counts pushed to
// it before they reached storage, an unproven caller's), and they would
// count twice, as the observed count and in the shared one. Counts that
// store did not hold (another instance's outage counts not yet pushed
// there) are then counted once less until it reports again. Only a bucket
// read from storage before is rebased: the first read of one whose
// observed counts came from a copy kept beside storage (ObserveExtra)
// brings counts made since that copy, not ones the copy holds.
func (b *bucket) rebaseObserved(grown map[string]int64) {
	for k, n := range grown {
		if e := b.observed[k]; e != nil {
			if *e -= n; *e <= 0 {
				delete(b.observed, k)
			}
		}
	}
}

// observable reports whether a count the other store gives for it can
// be recorded at now: a valid key and period, not within ObserveSlack of
// the period's start (see Observe).
func observable(it *Item, now time.Time) bool {
	return it.Period.Valid() && validKey(it.Key) && it.Period.Start(now.Add(-ObserveSlack)).Equal(it.Period.Start(now.Add(ObserveSlack)))
}

// Observed returns, for the current period of every kind the Counter
// counts, each key's count that a store deciding in the Counter's place
// reported beyond what was counted here (the part of Used that Observe,
// ObserveAdded and ObserveExtra record): what a copy kept outside that
// store gives ObserveExtra again, for a start while that store is
// unreachable. It is the extra, not Used, because what was counted here
// reaches storage by itself, and a start adds the copy to what storage
// then holds: counts made here after the copy was taken are in storage,
// not in the copy.
func (c *Counter) Observed(now time.Time) []Count {
	c.mu.Lock()
	defer c.mu.Unlock()
	bs := c.currentLocked(now)
	size := 0
	for _, b := range bs {
		size += len(b.observed)
	}
	out := make([]Count, 0, size)
	for _, b := range bs {
		for k, n := range b.observed {
			out = append(out, Count{Key: k, Period: b.period, Start: b.start, N: *n})
		}
	}
	return out
}
