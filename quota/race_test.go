package quota

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestTryAddDuringSlowFlush holds a Flush inside its Store and checks that
// the deltas being pushed stay visible and that counts made meanwhile are
// neither lost nor counted twice when the flush adopts the stored total.
func TestTryAddDuringSlowFlush(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	key := objKey(Day, t0)
	c := newTestCounter(st, clk, Day)
	other := newTestCounter(st, clk, Day)
	add(other, "k", Day, 7, t0)
	if err := other.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	add(c, "k", Day, 10, t0)

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	st.setHook(func(op, _ string) {
		if op == "Store" {
			once.Do(func() { close(reached); <-release })
		}
	})
	done := make(chan error)
	go func() { done <- c.Flush(t.Context()) }()
	<-reached

	steps := []struct {
		rule     string
		items    []Item
		wantOK   bool
		wantUsed int64
	}{
		{"inflight deltas still count while the flush runs", nil, true, 10},
		{"a count during the flush is added", []Item{{Key: []byte("k"), Period: Day, Limit: 15, N: 5}}, true, 15},
		{"the limit sees inflight plus pending", []Item{{Key: []byte("k"), Period: Day, Limit: 15, N: 1}}, false, 15},
	}
	for _, s := range steps {
		if _, ok := c.TryAdd(s.items, t0); ok != s.wantOK {
			t.Errorf("%s: TryAdd ok = %v", s.rule, ok)
		}
		if got := c.Used([]byte("k"), Day, t0); got != s.wantUsed {
			t.Errorf("%s: Used = %d, want %d", s.rule, got, s.wantUsed)
		}
	}
	if s := c.State(); s.Pending != 1 || s.Tracked != 1 {
		t.Errorf("State during flush = %+v", s)
	}

	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := st.counts(key)["k"]; got != 17 {
		t.Errorf("stored = %d, want 7 + 10", got)
	}
	if got := c.Used([]byte("k"), Day, t0); got != 22 {
		t.Errorf("Used after adopt = %d, want 7 + 10 stored + 5 pending", got)
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, used := st.counts(key)["k"], c.Used([]byte("k"), Day, t0); got != 22 || used != 22 {
		t.Errorf("after second flush stored, Used = %d, %d; want 22, 22", got, used)
	}
}

// TestConcurrentTryAddAndFlushes hammers two Counters with TryAdd while they
// flush concurrently and checks that the stored total equals the number of
// successful adds.
func TestConcurrentTryAddAndFlushes(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	cs := []*Counter{newTestCounter(st, clk, Day), newTestCounter(st, clk, Day)}
	var added atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, c := range cs {
		for g := range 2 {
			wg.Go(func() {
				for i := range 2000 {
					k := fmt.Sprintf("k%d", (i+g)%3)
					if add(c, k, Day, 1, t0) {
						added.Add(1)
					}
					if i%100 == 0 {
						c.Refund([]Item{{Key: []byte(k), Period: Day, N: 1}}, t0)
						added.Add(-1)
					}
				}
			})
		}
	}
	var fg sync.WaitGroup
	for _, c := range cs {
		fg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := c.Flush(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	fg.Wait()
	for range 2 {
		for _, c := range cs {
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	var stored int64
	for _, v := range st.counts(objKey(Day, t0)) {
		stored += v
	}
	if stored != added.Load() {
		t.Errorf("stored total = %d, want %d", stored, added.Load())
	}
	for i, c := range cs {
		var used int64
		for k := range 3 {
			used += c.Used([]byte(fmt.Sprintf("k%d", k)), Day, t0)
		}
		if used != added.Load() {
			t.Errorf("counter %d: Used total = %d, want %d", i, used, added.Load())
		}
	}
}
