package quota

import (
	"context"
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
