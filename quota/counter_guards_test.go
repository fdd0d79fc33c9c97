package quota

import (
	"testing"
	"time"
)

// Items of N 0 (a free call) count nothing: no pending key, no key
// tracked, nothing for a flush to push.
func TestZeroItemsCountNothing(t *testing.T) {
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0), Day)
	items := []Item{{Key: []byte("free"), Period: Day, Limit: 10, N: 0}}
	for _, step := range []struct {
		name string
		do   func([]Item, time.Time)
	}{{"TryAdd", func(it []Item, now time.Time) {
		if _, ok := c.TryAdd(it, now); !ok {
			t.Fatal("TryAdd of N 0 refused")
		}
	}}, {"Add", c.Add}, {"Refund", c.Refund}} {
		step.do(items, t0)
		if s := c.State(); s.Pending != 0 || s.Tracked != 0 {
			t.Errorf("State after %s of N 0 = Pending %d, Tracked %d; want 0, 0", step.name, s.Pending, s.Tracked)
		}
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ops, _ := st.takeOps(); ops["Store"] != 0 {
		t.Errorf("a flush with nothing counted stored %d objects", ops["Store"])
	}
}

// A refund made while the push of its charge fails cancels it: nothing is
// left pending (a zero delta would be pushed for nothing).
func TestARefundDuringAFailedPushLeavesNothingPending(t *testing.T) {
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0), Day)
	items := []Item{{Key: []byte("k"), Period: Day, Limit: 10, N: 1}}
	if _, ok := c.TryAdd(items, t0); !ok {
		t.Fatal("TryAdd refused")
	}
	st.setFail("Store", errDown)
	st.setHook(func(op, _ string) {
		if op == "Store" {
			c.Refund(items, t0)
		}
	})
	if err := c.Flush(t.Context()); err == nil {
		t.Fatal("Flush with Store failing = nil")
	}
	if s := c.State(); s.Pending != 0 {
		t.Errorf("State().Pending = %d after the charge and its refund, want 0", s.Pending)
	}
}

// Without storage, a key whose count a refund brings back to zero is no
// longer tracked after a flush.
func TestLocalFlushForgetsAKeyRefundedToZero(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now, Periods: []Period{Day}})
	items := []Item{{Key: []byte("k"), Period: Day, Limit: 10, N: 1}}
	if _, ok := c.TryAdd(items, t0); !ok {
		t.Fatal("TryAdd refused")
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Refund(items, t0)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := c.State(); s.Tracked != 0 {
		t.Errorf("State().Tracked = %d, want 0", s.Tracked)
	}
}

// An invalid Period is ignored wherever one is taken: in Config.Periods,
// by Used and by AnyCounted (it has no bucket, and indexes none).
func TestInvalidPeriodsAreIgnored(t *testing.T) {
	st := newFakeStorage()
	c := New(Config{Storage: st, Prefix: testPrefix, Clock: newFakeClock(t0).Now, Periods: []Period{Day, 0, 7}})
	add(c, "k", Day, 1, t0)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ops, _ := st.takeOps(); ops["Store"] != 1 {
		t.Errorf("Flush stored %d objects, want 1 (the day's)", ops["Store"])
	}
	for _, p := range []Period{0, 7} {
		if got := c.Used([]byte("k"), p, t0); got != 0 {
			t.Errorf("Used(period %d) = %d, want 0", p, got)
		}
		if c.AnyCounted([]Item{{Key: []byte("k"), Period: p}}, t0) {
			t.Errorf("AnyCounted(period %d) = true, want false", p)
		}
	}
}
