package quota

import "time"

// ObserveSlack is how far apart Observe allows this host's clock and the
// other store's to be.
const ObserveSlack = 10 * time.Second

// Observe records, for each item, that the store deciding this zone's
// quotas in this Counter's place (Redis) holds it.Used for it.Key in the
// period of kind it.Period containing now. From then on Used, TryAdd and
// AnyCounted count the larger of that plus what is counted here since
// and what this Counter counts (storage's total and its own): should that
// store become unreachable, counting here goes on from what it held
// instead of from what this Counter alone saw. Others' counts that reach
// storage later are in the larger of the two once, whether that store
// held them (an outage's counts pushed to it before they reached
// storage) or not (another instance's outage counts not yet
// pushed there, which are then counted once less until it reports
// again). A report below what that store was known to hold stands for
// no count: within a period its counts only grow, but for the few a
// refund gives back, so a smaller one is a store that lost its data (a
// restart without persistence, FLUSHALL, an eviction), and what it held
// stays the floor, copied to the host (Observed) for a start to raise it
// back to. Within ObserveSlack of a period's start nothing is recorded:
// the other store reads its own clock, and a count it gave for the
// period that just ended must not become the new one's.
func (c *Counter) Observe(items []Item, now time.Time) {
	c.observeEach(items, now, func(b *bucket, it *Item) {
		n := it.Used
		if o := b.observed[string(it.Key)]; o != nil {
			n = max(n, o.n-o.kept)
		}
		if n <= b.local(it.Key) {
			delete(b.observed, string(it.Key))
			return
		}
		b.observe(string(it.Key), observation{n: n})
	})
}

// ObserveAdded records, for each item, that the store deciding in this
// Counter's place (Redis) counted it.N more for it.Key than it held when
// last observed, in the period of kind it.Period containing now: a count
// made there on this host's behalf, such as a proving call's. Unlike
// Observe, concurrent calls add up.
func (c *Counter) ObserveAdded(items []Item, now time.Time) {
	c.observeEach(items, now, func(b *bucket, it *Item) {
		switch o := b.observed[string(it.Key)]; {
		case it.N <= 0:
		case o != nil:
			o.n += it.N
		default:
			b.observe(string(it.Key), observation{n: b.local(it.Key) + it.N})
		}
	})
}

// ObserveRefunded records, for each item, that the store deciding in
// this Counter's place (Redis) gave back it.N of what it held for it.Key
// in the period of kind it.Period containing now: a charge refunded after
// a later layer refused the call. What that store was known to hold, the
// floor a smaller report does not lower (see Observe), goes down by as
// much, so that the call is not counted again.
func (c *Counter) ObserveRefunded(items []Item, now time.Time) {
	c.observeEach(items, now, func(b *bucket, it *Item) {
		if o := b.observed[string(it.Key)]; o != nil && it.N > 0 {
			o.n = max(o.n-it.N, o.kept)
		}
	})
}

// ObserveReported records, for each count of cs, that the store deciding
// in this Counter's place (Redis) held at least c.N for c.Key in c.Period
// containing now, counts made here included, of which c.Kept were calls
// their makers push there themselves: what Observed gave a copy kept
// outside that store, read back by a start. The larger count wins when
// several copies are read, and the larger of what they say the store
// holds without those calls (see Counts). Calls that reached storage
// after the copy was taken, which it held already, are in the larger of
// the copy and storage's count once (see Observe).
func (c *Counter) ObserveReported(cs []Count, now time.Time) {
	items := make([]Item, len(cs)) // Used carries Kept through observeEach
	for i, n := range cs {
		items[i] = Item{Key: []byte(n.Key), Period: n.Period, N: n.N, Used: n.Kept}
	}
	c.observeEach(items, now, func(b *bucket, it *Item) {
		switch o := b.observed[string(it.Key)]; {
		case o != nil:
			without := max(o.n-o.kept, it.N-it.Used)
			o.n = max(o.n, it.N)
			o.kept = o.n - without
		case it.N > b.local(it.Key):
			b.observe(string(it.Key), observation{n: it.N, kept: it.Used})
		}
	})
}

// Pushed records, for each item, that it.N of the counts made here for
// it.Key in the period of kind it.Period containing now (negative: taken
// back) reached the store deciding in this Counter's place: the calls
// counted here since its last report that it now holds are left out of
// Counts no longer, so that another store raised to Counts (a new URL, or
// one that lost its data) gets them too. Each moves the key's calls
// counted since the report toward zero, by no more than it.N.
func (c *Counter) Pushed(items []Item, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range items {
		if !it.Period.Valid() {
			continue
		}
		b := c.bucketLocked(it.Period, now, false)
		if b == nil {
			continue
		}
		switch o := b.observed[string(it.Key)]; {
		case o == nil:
		case it.N > 0 && o.kept > 0:
			o.kept -= min(it.N, o.kept)
		case it.N < 0 && o.kept < 0:
			o.kept -= max(it.N, o.kept)
		}
	}
}

// observeEach calls f, with c.mu held, for each item that can be recorded
// at now (see observable) and the bucket of its period.
func (c *Counter) observeEach(items []Item, now time.Time, f func(b *bucket, it *Item)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range items {
		if it := &items[i]; observable(it, now) {
			f(c.bucketLocked(it.Period, now, true), it)
		}
	}
}

// observe records o as what the other store holds for key.
func (b *bucket) observe(key string, o observation) {
	if p := b.observed[key]; p != nil {
		*p = o
		return
	}
	if b.observed == nil {
		b.observed = map[string]*observation{}
	}
	b.observed[key] = &o
}

// observable reports whether a count the other store gives for it can
// be recorded at now: a valid key and period, not within ObserveSlack of
// the period's start (see Observe).
func observable(it *Item, now time.Time) bool {
	return it.Period.Valid() && validKey(it.Key) && it.Period.Start(now.Add(-ObserveSlack)).Equal(it.Period.Start(now.Add(ObserveSlack)))
}

// Observed returns, for the current period of every kind the Counter
// counts, each key's count that a store deciding in the Counter's place
// reported (Observe, ObserveAdded, ObserveReported), with what was counted
// here since: for a copy kept outside that store, which ObserveReported
// reads back at a start.
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
		for k, o := range b.observed {
			out = append(out, Count{Key: k, Period: b.period, Start: b.start, N: o.n, Kept: o.kept})
		}
	}
	return out
}
