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
	// A smaller figure than counted here leaves the local count.
	c.Observe(item(1), t0)
	if got := c.Used([]byte("i/x"), Day, t0); got != 2 {
		t.Fatalf("Used after observing 1 with 2 counted here: %d", got)
	}
	c.Observe(item(7), t0.Add(24*time.Hour))
	if got := c.Used([]byte("i/x"), Day, t0); got != 2 {
		t.Fatalf("an observation of the next day changed today's count to %d", got)
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

// Observed gives back, for a copy, what each observed key's count holds
// beyond the counts made here (those reach storage by themselves), and
// nothing for keys only counted here. A start that reads the copy back
// adds it to the counts it finds in storage, the larger copy winning.
func TestObservedCopiesWhatObserveRecorded(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	add(c, "i/x", Day, 3, t0)
	c.Observe([]Item{{Key: []byte("i/x"), Period: Day, Used: 10}}, t0)
	add(c, "i/x", Day, 2, t0)
	add(c, "i/local", Day, 5, t0)
	got := c.Observed(t0)
	if len(got) != 1 || got[0].Key != "i/x" || got[0].N != 7 || !got[0].Start.Equal(Day.Start(t0)) {
		t.Fatalf("Observed = %v, want i/x 7 of today: 10 reported, 3 of them counted here", got)
	}
	restarted := New(Config{Clock: newFakeClock(t0).Now})
	add(restarted, "i/x", Day, 5, t0) // what storage holds: the 3, and the 2 counted after
	restarted.ObserveExtra([]Item{{Key: []byte("i/x"), Period: Day, N: 7}}, t0)
	restarted.ObserveExtra([]Item{{Key: []byte("i/x"), Period: Day, N: 4}}, t0) // another process's smaller copy
	if got := restarted.Used([]byte("i/x"), Day, t0); got != 12 {
		t.Fatalf("Used after a start read the copy back: %d, want 12", got)
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
	for _, n := range c.Counts(t0) {
		got[n.Key] = n.N
	}
	if got["i/redis-only"] != 5 || got["i/local"] != 2 || len(got) != 2 {
		t.Fatalf("Counts = %v, want i/redis-only 5 and i/local 2", got)
	}
}

// Counts other instances push to storage after the other store last
// reported are taken out of what it was observed to hold beyond the local
// counts: it held them already (an outage's counts were pushed to it
// before they reached storage), and they are not counted twice. This
// Counter's own pushes, and a first read of storage (the observed count
// then came from a copy kept beside storage's), take nothing out.
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
	c.ObserveExtra([]Item{{Key: []byte("i/x"), Period: Day, N: 2}}, t0)
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(c); got != 7 {
		t.Fatalf("Used %d after a first read of 5 beside an observed 2, want 7", got)
	}
}
