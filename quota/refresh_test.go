package quota

import (
	"errors"
	"testing"
)

func TestRefreshAdoptsOthersCountsAndLeavesDegradedAlone(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	a := New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: []Period{Day}})
	tr := &transitions{}
	b := New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, OnDegraded: tr.record, Periods: []Period{Day}})
	add(a, "k", Day, 4, t0)
	if err := a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := b.Used([]byte("k"), Day, t0); got != 4 {
		t.Fatalf("after a refresh the other instance's 4 are seen as %d", got)
	}
	// A failed read neither marks the store degraded nor, later, healthy:
	// only flushes, which push pending counts, decide that.
	add(b, "k", Day, 1, t0)
	st.setFail("*", errDown)
	if err := b.Refresh(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("refresh error %v", err)
	}
	if b.State().Degraded || len(tr.get()) != 0 {
		t.Fatal("a failed refresh marked the store degraded")
	}
	if err := b.Flush(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("flush error %v", err)
	}
	st.setFail("*", nil)
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !b.State().Degraded {
		t.Fatal("a successful refresh declared the store healthy before the pending count was pushed")
	}
	if got := b.Used([]byte("k"), Day, t0); got != 5 {
		t.Fatalf("used %d after refresh, want 4 stored + 1 pending", got)
	}
}
