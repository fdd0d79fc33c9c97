package quota

import (
	"context"
	"strings"
	"testing"
)

// A flush whose counts fail to push fails, and leaves the Counter
// degraded, whatever then (SaveKnown's step) does: then does not run, and
// its success cannot cover the counts' failure.
func TestFlushThenDoesNotRunOrHideAFailedPush(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	c := newTestCounter(st, clk, Day)
	add(c, "k", Day, 3, t0)
	st.setFail("Store", errDown)
	ran := false
	err := c.FlushThen(t.Context(), func(context.Context) error { ran = true; return nil })
	if err == nil {
		t.Fatal("FlushThen with a failing Store = nil, want the push's error")
	}
	if ran {
		t.Error("then ran after the counts failed to push")
	}
	if !c.State().Degraded {
		t.Error("State().Degraded = false after a failed push")
	}
}

// Counts of a period older than the previous one, left pending by flushes
// that failed until then, are dropped, never pushed: their object is
// garbage and no lock of it is taken.
func TestCountsOfAPeriodBeforeThePreviousAreNotPushed(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	c := newTestCounter(st, clk, Day)
	add(c, "k", Day, 3, t0)
	st.setFail("*", errDown)
	if err := c.Flush(t.Context()); err == nil {
		t.Fatal("Flush with storage down = nil")
	}
	st.setFail("*", nil)
	later := t0.AddDate(0, 0, 2)
	clk.Set(later)
	var touched []string
	st.setHook(func(op, key string) {
		if strings.HasSuffix(key, objectName(Day, Day.Start(t0))) && op != "Delete" {
			touched = append(touched, op)
		}
	})
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(touched) > 0 || st.has(objKey(Day, t0)) {
		t.Errorf("the object of %s, two days before, was touched (%v) or stored", t0.Format("2006-01-02"), touched)
	}
}
