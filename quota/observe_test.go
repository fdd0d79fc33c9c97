package quota

import (
	"sync"
	"testing"
	"time"
)

// What another store reported is a floor under the counts, and what is
// counted here afterwards adds to it; it is never pushed.
func TestObserveCountsOnFromWhatTheOtherStoreHeld(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	item := func(used int64) []Item { return []Item{{Key: []byte("i/x"), Period: Day, Used: used}} }
	c.Observe(item(10), t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 10 {
		t.Fatalf("Used after observing 10: %d", got)
	}
	if !c.AnyCounted([]Item{{Key: []byte("i/x"), Period: Day}}, t0) {
		t.Fatal("an observed count is not counted")
	}
	if c.AnyCounted([]Item{{Key: []byte("i/x"), Period: Month}}, t0) {
		t.Fatal("observed in a day period, counted in the month")
	}
	if _, ok := c.TryAdd([]Item{{Key: []byte("i/x"), Period: Day, Limit: 12, N: 3}}, t0); ok {
		t.Fatal("10 observed + 3 fit a limit of 12")
	}
	if _, ok := c.TryAdd([]Item{{Key: []byte("i/x"), Period: Day, Limit: 12, N: 2}}, t0); !ok {
		t.Fatal("10 observed + 2 refused by a limit of 12")
	}
	if us := c.Unpushed(); len(us) != 1 || us[0].N != 2 {
		t.Fatalf("unpushed %v, want only the 2 counted here", us)
	}
	// The other store took those 2 in (pushed after an outage) and one
	// more: what it holds now counts, not the sum.
	c.Observe(item(13), t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 13 {
		t.Fatalf("Used after observing 13 with 2 counted here: %d", got)
	}
	c.Observe(item(7), t0.Add(24*time.Hour))
	if got := c.Used([]byte("i/x"), Day, t0); got != 13 {
		t.Fatalf("an observation of the next day changed today's count to %d", got)
	}
}

// A figure below what the other store was known to hold is a store that
// lost its data (a Redis restarted without persistence): what it held
// stays the floor, in the count and in the copy a start raises it back
// to, and its next reports count again once they pass it. Calls counted
// here since its last report are not part of what it was known to hold.
func TestObserveKeepsWhatTheOtherStoreHeldWhenItReportsLess(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	item := func(used int64) []Item { return []Item{{Key: []byte("i/x"), Period: Day, Used: used}} }
	c.Observe(item(30), t0)
	c.Observe(item(1), t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 30 {
		t.Fatalf("Used after 30 and then 1 reported: %d, want 30", got)
	}
	if got := c.Observed(t0); len(got) != 1 || got[0].N != 30 {
		t.Fatalf("Observed after 30 and then 1 reported: %v, want i/x 30", got)
	}
	c.Observe(item(31), t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 31 {
		t.Fatalf("Used after 31 reported: %d", got)
	}
	add(c, "i/x", Day, 2, t0) // 33, of which 2 the store does not hold yet
	c.Observe(item(32), t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 32 {
		t.Fatalf("Used after 32 reported with 2 counted here since 31: %d, want 32", got)
	}
}

// Near a period's start the other store's clock may still be in the
// period before: what it reports then is not recorded.
func TestObserveSkipsThePeriodBoundary(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	midnight := Day.Next(t0)
	item := []Item{{Key: []byte("i/x"), Period: Day, Used: 100}}
	c.Observe(item, midnight.Add(2*time.Second))
	if got := c.Used([]byte("i/x"), Day, midnight.Add(2*time.Second)); got != 0 {
		t.Fatalf("a count reported 2s after midnight was recorded: %d", got)
	}
	c.Observe(item, midnight.Add(-2*time.Second))
	if got := c.Used([]byte("i/x"), Day, midnight.Add(-2*time.Second)); got != 0 {
		t.Fatalf("a count reported 2s before midnight was recorded: %d", got)
	}
	c.Observe(item, midnight.Add(time.Minute))
	if got := c.Used([]byte("i/x"), Day, midnight.Add(time.Minute)); got != 100 {
		t.Fatalf("a count reported a minute after midnight: %d, want 100", got)
	}
}

// Observed gives back, for a copy, each observed key's count as it
// stands: what is counted here (pushed to storage or not) plus what the
// other store held beyond it, and nothing for keys only counted here. A
// start that reads the copy back counts from the larger of it and what
// it counts itself (storage's count, and the calls not pushed that it
// took over from the host), the larger copy winning.
func TestObservedCopiesWhatObserveRecorded(t *testing.T) {
	st := newFakeStorage()
	ctx := t.Context()
	c := New(Config{Storage: st, Prefix: "z", Clock: newFakeClock(t0).Now})
	add(c, "i/x", Day, 3, t0)
	c.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 10}}, t0)
	add(c, "i/x", Day, 2, t0)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	add(c, "i/x", Day, 1, t0) // not pushed
	add(c, "i/local", Day, 5, t0)
	got := c.Observed(t0)
	if len(got) != 1 || got[0].Key != "i/x" || got[0].N != 13 || !got[0].Start.Equal(Day.Start(t0)) {
		t.Fatalf("Observed = %v, want i/x 13 of today: 10 reported, 3 more counted since", got)
	}
	restarted := New(Config{Storage: st, Prefix: "z", Clock: newFakeClock(t0).Now})
	if err := restarted.Load(ctx); err != nil {
		t.Fatal(err)
	}
	add(restarted, "i/x", Day, 1, t0) // the call not pushed, taken over from the host
	restarted.ObserveReported([]Count{{Key: "i/x", Period: Day, N: 13}}, t0)
	restarted.ObserveReported([]Count{{Key: "i/x", Period: Day, N: 4}}, t0) // another process's smaller copy
	if got := restarted.Used([]byte("i/x"), Day, t0); got != 13 {
		t.Fatalf("Used after a start read the copy back: %d, want 13", got)
	}
	add(restarted, "i/x", Day, 1, t0)
	if got := restarted.Used([]byte("i/x"), Day, t0); got != 14 {
		t.Fatalf("Used after a call counted on top: %d, want 14", got)
	}
}

// A copy of what the other store reported holds calls other instances
// had pushed to it but not yet to storage. A start that reads it back
// after they reached storage, or before, does not count them twice.
func TestReportedCopyIsNotAddedToTheCallsThatReachedStorageSince(t *testing.T) {
	st := newFakeStorage()
	ctx := t.Context()
	clock := newFakeClock(t0)
	counter := func() *Counter { return New(Config{Storage: st, Prefix: "z", Clock: clock.Now}) }
	flush := func(c *Counter) {
		t.Helper()
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	used := func(c *Counter) int64 { return c.Used([]byte("i/x"), Day, t0) }
	a, b := counter(), counter()
	add(a, "i/x", Day, 1, t0)
	flush(a)
	a.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 4}}, t0) // b's 3 calls, pushed there only
	copied := a.Observed(t0)
	unread := counter() // a start that cannot read storage yet
	unread.ObserveReported([]Count{{Key: "i/x", Period: Day, N: copied[0].N}}, t0)
	add(b, "i/x", Day, 1, t0)
	flush(b) // one of b's 3 calls reaches storage
	started := counter()
	if err := started.Load(ctx); err != nil {
		t.Fatal(err)
	}
	started.ObserveReported([]Count{{Key: "i/x", Period: Day, N: copied[0].N}}, t0)
	if got := used(started); got != 4 {
		t.Fatalf("Used %d after reading back a copy of 4 beside storage's 2, want 4", got)
	}
	add(b, "i/x", Day, 2, t0)
	flush(b) // and the other two
	flush(started)
	if err := unread.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if s, u := used(started), used(unread); s != 4 || u != 4 {
		t.Fatalf("Used %d, and %d by the start that read storage after the copy, once storage holds all 4 calls; want 4", s, u)
	}
}

// Counts made in the other store on this host's behalf add up, however
// many are observed at once, on top of what it reported before; nothing
// of them is pushed.
func TestObserveAddedAddsUp(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	one := []Item{{Key: []byte("i/y"), Period: Day, N: 1}}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { c.ObserveAdded(one, t0) })
	}
	wg.Wait()
	if got := c.Used([]byte("i/y"), Day, t0); got != 5 {
		t.Fatalf("Used after five counts of 1 observed added: %d, want 5", got)
	}
	c.Observe([]Item{{Key: []byte("i/y"), Period: Day, Used: 9}}, t0)
	c.ObserveAdded(one, t0)
	if got := c.Used([]byte("i/y"), Day, t0); got != 10 {
		t.Fatalf("Used after observing 9 and adding 1: %d, want 10", got)
	}
	if us := c.Unpushed(); len(us) != 0 {
		t.Fatalf("unpushed %v, want none", us)
	}
}

// Counts, which a store added on reload is seeded with, holds the keys
// known only from what a store reported as well: a quota used up in Redis,
// carried to the local quota when the store was removed, must be carried
// back when it is added again.
func TestCountsHoldKeysKnownOnlyFromAnotherStore(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	c.Observe([]Item{{Key: []byte("i/redis-only"), Period: Day, Used: 5}}, t0)
	add(c, "i/local", Day, 2, t0)
	got := map[string]int64{}
	for _, n := range c.Counts(t0, nil) {
		got[n.Key] = n.N
	}
	if got["i/redis-only"] != 5 || got["i/local"] != 2 || len(got) != 2 {
		t.Fatalf("Counts = %v, want i/redis-only 5 and i/local 2", got)
	}
}

// Counts other instances push to storage after the other store last
// reported are counted once, in the larger of what it reported and
// storage's count: it held them already (an outage's counts were pushed
// to it before they reached storage), and they are not counted twice.
// This Counter's own pushes change nothing. A copy read back before
// storage was (ObserveReported) stands likewise against what the first
// read of storage brings.
func TestAdoptedCountsOfOthersComeOutOfTheObservedOnes(t *testing.T) {
	st := newFakeStorage()
	clock := newFakeClock(t0)
	a := New(Config{Storage: st, Prefix: "z", Clock: clock.Now})
	b := New(Config{Storage: st, Prefix: "z", Clock: clock.Now})
	ctx := t.Context()
	used := func(c *Counter) int64 { return c.Used([]byte("i/x"), Day, t0) }
	if err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	a.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 4}}, t0)
	b.Add([]Item{{Key: []byte("i/x"), Period: Day, N: 2}}, t0)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(a); got != 4 {
		t.Fatalf("Used %d after adopting 2 the other store held among the 4 it reported, want 4", got)
	}
	a.Add([]Item{{Key: []byte("i/x"), Period: Day, N: 1}}, t0)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(a); got != 5 {
		t.Fatalf("Used %d after pushing 1 counted here, want 5", got)
	}
	b.Add([]Item{{Key: []byte("i/x"), Period: Day, N: 1}}, t0)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	a.Add([]Item{{Key: []byte("i/x"), Period: Day, N: 1}}, t0)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(a); got != 6 {
		t.Fatalf("Used %d after pushing 1 counted here and adopting 1 pushed by the other, want 6", got)
	}
	c := New(Config{Storage: st, Prefix: "z", Clock: clock.Now})
	c.ObserveReported([]Count{{Key: "i/x", Period: Day, N: 7}}, t0)
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(c); got != 7 {
		t.Fatalf("Used %d after a first read of 5 beside a copy of 7, want 7", got)
	}
}

// The calls counted here since the other store last reported are counted
// in Used, and in the copy Observed gives, marked as kept: their makers
// push them there themselves. Counts, what a raise of that store goes to,
// leaves them out, here and in another process that reads the copy back,
// which counts them meanwhile all the same.
func TestCallsCountedSinceAReportAreLeftToTheirMakersByARaise(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	c.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 1}}, t0)
	add(c, "i/x", Day, 3, t0) // while the other store is unreachable
	raise := func(c *Counter) int64 {
		t.Helper()
		for _, n := range c.Counts(t0, nil) {
			if n.Key == "i/x" {
				return n.N
			}
		}
		return 0
	}
	copied := c.Observed(t0)
	if len(copied) != 1 || copied[0].N != 4 || copied[0].Kept != 3 {
		t.Fatalf("Observed = %v, want i/x 4 of which 3 kept", copied)
	}
	other := New(Config{Clock: newFakeClock(t0).Now})
	other.ObserveReported(copied, t0)
	if u, r := other.Used([]byte("i/x"), Day, t0), raise(other); u != 4 || r != 1 {
		t.Fatalf("another process that read the copy: Used %d, raise to %d; want 4, and 1 (the 3 kept are their maker's to push)", u, r)
	}
	other.ObserveReported([]Count{{Key: "i/x", Period: Day, Start: Day.Start(t0), N: 2}}, t0) // a copy of a later report
	if u, r := other.Used([]byte("i/x"), Day, t0), raise(other); u != 4 || r != 2 {
		t.Fatalf("after a second copy: Used %d, raise to %d; want 4, and 2", u, r)
	}
	// A refund counted here since the report (one an earlier process
	// could not push) takes nothing back from what was reported.
	refunded := New(Config{Clock: newFakeClock(t0).Now})
	refunded.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 5}}, t0)
	refunded.AddUnpushed([]Count{{Key: "i/x", Period: Day, Start: Day.Start(t0), N: -1}})
	if r := raise(refunded); r != 5 {
		t.Fatalf("raise to %d after a refund counted since a report of 5, want 5", r)
	}
}

// raiseOf is what Counts gives key in the day of t0, with bound.
func raiseOf(c *Counter, key string, bound func(string, Period, time.Time) int64) int64 {
	for _, n := range c.Counts(t0, bound) {
		if n.Key == key && n.Period == Day {
			return n.N
		}
	}
	return 0
}

// Calls counted here since the other store's report that a push carried
// there are in it: the raise (Counts) counts them again, so that a store
// raised later (another Redis, or one that lost its data) gets them too,
// and the copy Observed gives marks them kept no longer. A push carrying
// more than was kept (calls of another process's adopted too) leaves
// nothing kept, and a refund pushed takes back what it counted.
func TestPushedCallsAreInTheRaise(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	c.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 5}}, t0)
	add(c, "i/x", Day, 3, t0) // while the other store is unreachable
	steps := []struct {
		what string
		do   func()
		want int64
	}{
		{"before the push", func() {}, 5},
		{"after a push of 2 of the 3", func() { c.Pushed([]Item{{Key: []byte("i/x"), Period: Day, N: 2}}, t0) }, 7},
		{"after a push of 4 more", func() { c.Pushed([]Item{{Key: []byte("i/x"), Period: Day, N: 4}}, t0) }, 8},
		{"after a refund", func() { c.Refund([]Item{{Key: []byte("i/x"), Period: Day, N: 1}}, t0) }, 8},
		{"after the refund's push", func() { c.Pushed([]Item{{Key: []byte("i/x"), Period: Day, N: -1}}, t0) }, 7},
	}
	for _, s := range steps {
		s.do()
		if r := raiseOf(c, "i/x", nil); r != s.want {
			t.Fatalf("%s: raise to %d, want %d", s.what, r, s.want)
		}
	}
	if cs := c.Observed(t0); len(cs) != 1 || cs[0].N != 7 || cs[0].Kept != 0 {
		t.Fatalf("Observed = %v once all was pushed, want i/x 7, none kept", cs)
	}
}

// The calls that their makers push to the other store themselves (bound
// for it) come out of the local count only: what that store reported never
// held them, and taking them out of it too would raise it short.
func TestCountsLeaveCallsBoundForTheStoreOutOfTheLocalCountOnly(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	c.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 5}}, t0)
	add(c, "i/x", Day, 3, t0) // the outage's, bound for the store
	add(c, "i/y", Day, 4, t0) // of which 1 bound for it
	add(c, "i/z", Day, 1, t0) // bound for it
	bound := map[string]int64{"i/x": 3, "i/y": 1, "i/z": 1}
	of := func(key string, p Period, start time.Time) int64 {
		if p != Day || !start.Equal(Day.Start(t0)) {
			t.Fatalf("bound asked for %s %v %v", key, p, start)
		}
		return bound[key]
	}
	for key, want := range map[string]int64{"i/x": 5, "i/y": 3, "i/z": 0} {
		if r := raiseOf(c, key, of); r != want {
			t.Errorf("raise of %s to %d with %d bound, want %d", key, r, bound[key], want)
		}
	}
}

// A refund the other store made lowers what it is known to hold, so a
// report below the refused call's is followed, and a later smaller report
// still cannot go under what it holds without the refund.
func TestObserveRefundedLowersTheFloor(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	item := func(used int64) []Item { return []Item{{Key: []byte("i/x"), Period: Day, Used: used}} }
	c.Observe(item(7), t0)
	c.ObserveRefunded([]Item{{Key: []byte("i/x"), Period: Day, N: 4}}, t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 3 {
		t.Fatalf("Used after 7 reported and 4 refunded: %d, want 3", got)
	}
	c.Observe(item(4), t0)
	c.Observe(item(1), t0) // the store lost its data
	if got := c.Observed(t0); len(got) != 1 || got[0].N != 4 {
		t.Fatalf("Observed = %v, want i/x 4", got)
	}
}

// A refund the other store made never takes what it is known to hold
// below the calls counted here since its report: those are kept (their
// makers push them there), so the observed figure never drops below
// what is kept (the Count.Kept invariant), and counts added there later
// go on from it.
func TestObserveRefundedNeverGoesBelowTheKeptCalls(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	c.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 1}}, t0)
	for range 3 { // while the other store is unreachable
		add(c, "i/x", Day, 1, t0)
	}
	c.ObserveRefunded([]Item{{Key: []byte("i/x"), Period: Day, N: 2}}, t0)
	if got := c.Observed(t0); len(got) != 1 || got[0].N != 3 || got[0].Kept != 3 {
		t.Fatalf("Observed = %v after a refund of 2, want i/x 3 of which 3 kept", got)
	}
	c.ObserveAdded([]Item{{Key: []byte("i/x"), Period: Day, N: 10}}, t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 13 {
		t.Fatalf("Used after 10 more counted there: %d, want 13", got)
	}
}
