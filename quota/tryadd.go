package quota

import (
	"bytes"
	"time"
)

// Item is one quota to check and charge: N more for Key in the Period
// containing the time of the call, allowed while used + N <= Limit.
type Item struct {
	// Key identifies the counted subject; not empty, no space, no newline.
	// It is only read during the call, so it may live in a reused buffer.
	Key []byte
	// Period is the window the count belongs to.
	Period Period
	// Limit is the largest count allowed in the period.
	Limit int64
	// N is the amount to charge; at least 0.
	N int64
	// Used is set by TryAdd and Fits: the count of Key in the period once
	// this item, and the items before it in the call, are added, as this
	// instance knows it; when the items do not all fit, the count each
	// found before it (so Limit-Used is what it has left).
	Used int64
}

// TryAdd checks every item (used + N <= Limit) and, only when all fit, adds
// them all, atomically with respect to concurrent TryAdd and Refund calls.
// Counts are attributed to the period containing now. On success it returns
// (-1, true) and sets each item's Used. On refusal it returns false and the
// index of the failing item whose period ends last (the month on a month's
// last day, the first of them on another tie): the earliest time the same
// items can all fit again is that item's reset. Nothing is counted then. An item with an invalid Key or Period or a
// negative N is refused. TryAdd never waits on storage and does not allocate
// for keys already tracked.
func (c *Counter) TryAdd(items []Item, now time.Time) (failed int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found [4]foundCount // the first items' buckets and pending counts, as the check found them
	if failed = c.checkLocked(items, now, found[:]); failed >= 0 {
		return failed, false
	}
	for i := range items {
		it := &items[i]
		if it.N == 0 {
			continue
		}
		n := min(it.N, MaxAdd) // an item without a limit fits any N
		if i < len(found) {
			found[i].b.countHere(found[i].p, it.Key, n)
		} else {
			c.bucketLocked(it.Period, now, true).countHere(nil, it.Key, n)
		}
	}
	return -1, true
}

// foundCount is where the check of TryAdd found an item counted: its
// bucket, and its pending count there (nil when it has none yet).
type foundCount struct {
	b *bucket
	p *int64
}

// Fits reports what TryAdd would, setting each item's Used the same way,
// but counts nothing.
func (c *Counter) Fits(items []Item, now time.Time) (failed int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	failed = c.checkLocked(items, now, nil)
	return failed, failed < 0
}

// checkLocked is the check of TryAdd: the index of the refused item, or -1
// when all fit. It sets found[i], for as many items as found holds, to
// where the item is counted.
func (c *Counter) checkLocked(items []Item, now time.Time, found []foundCount) int {
	failed := -1
	for i := range items {
		it := &items[i]
		if !it.Period.Valid() || it.N < 0 || !validKey(it.Key) {
			return i
		}
		b := c.bucketLocked(it.Period, now, true)
		used, p := b.usedPending(it.Key)
		if i < len(found) {
			found[i] = foundCount{b, p}
		}
		for j := range i { // the same key twice in one call adds up
			if bytes.Equal(items[j].Key, it.Key) && items[j].Period == it.Period {
				used += items[j].N // an item fails before this can wrap
			}
		}
		it.Used = used
		if exceeds(used, it.N, it.Limit) && (failed < 0 || resetsLater(it.Period, items[failed].Period, now)) {
			failed = i
		}
	}
	if failed < 0 {
		for i := range items {
			items[i].Used += items[i].N
		}
	}
	return failed
}

// exceeds reports whether used+n > limit, for n >= 0, without the sum:
// a batch's cost saturates at math.MaxInt64, and the sum would wrap to a
// negative count that fits every limit.
func exceeds(used, n, limit int64) bool {
	if used <= 0 {
		return used+n > limit
	}
	return n > limit-used
}

// resetsLater reports whether a count of kind p resets after one of kind
// q, both counted at now. On a tie (a month's last day) the month counts as
// later: it is the quota to report.
func resetsLater(p, q Period, now time.Time) bool {
	pn, qn := p.Next(now), q.Next(now)
	return pn.After(qn) || pn.Equal(qn) && p > q
}

// Refund takes back a successful TryAdd, for example when a later layer
// refused the request. Pass the same items and now as to TryAdd. After a
// flush the refund is pushed as a negative delta.
func (c *Counter) Refund(items []Item, now time.Time) {
	c.count(items, now, -1)
}

// Add counts items whatever their limits: work already done that the
// quotas must see, such as a call admitted before its identity had a
// count. An N above MaxAdd, more than any limit, counts as MaxAdd, so that
// no count comes near overflowing.
func (c *Counter) Add(items []Item, now time.Time) {
	c.count(items, now, 1)
}

// MaxAdd is the most Add, or TryAdd for an item without a limit
// (math.MaxInt64), counts for one item: 2^50, above every limit a
// configuration may set (at most 15 digits).
const MaxAdd = 1 << 50

// count adds sign times each item's N, at most MaxAdd, to its key's
// count.
func (c *Counter) count(items []Item, now time.Time, sign int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range items {
		it := &items[i]
		if !it.Period.Valid() || it.N <= 0 || !validKey(it.Key) {
			continue
		}
		c.bucketLocked(it.Period, now, true).countHere(nil, it.Key, sign*min(it.N, MaxAdd))
	}
}

// AnyCounted reports whether the key of any of items has a count in its
// period containing now, without creating one.
func (c *Counter) AnyCounted(items []Item, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range items {
		if !items[i].Period.Valid() {
			continue
		}
		if b := c.bucketLocked(items[i].Period, now, false); b != nil && b.used(items[i].Key) != 0 {
			return true
		}
	}
	return false
}

// Used returns the count of key in the period of kind p containing now: the
// shared total last adopted plus what this instance counted since.
func (c *Counter) Used(key []byte, p Period, now time.Time) int64 {
	if !p.Valid() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.bucketLocked(p, now, false)
	if b == nil {
		return 0
	}
	return b.used(key)
}
