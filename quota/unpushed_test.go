package quota

import (
	"errors"
	"testing"
)

// Counts a stopping process could not push are handed to the next one,
// which counts them again and pushes them once storage answers: nothing is
// lost, and nothing is counted twice.
func TestUnpushedCountsCarryOverToTheNextProcess(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	c := newTestCounter(st, clk)
	items := []Item{{Key: []byte("i/a"), Period: Day, Limit: 100, N: 3}}
	if _, ok := c.TryAdd(items, t0); !ok {
		t.Fatal("TryAdd refused")
	}
	st.fail["*"] = errors.New("storage down")
	if err := c.Flush(t.Context()); err == nil {
		t.Fatal("Flush succeeded on a failing storage")
	}
	saved := c.Unpushed()
	if len(saved) != 1 || saved[0].N != 3 || saved[0].Key != "i/a" || saved[0].Period != Day || !saved[0].Start.Equal(Day.Start(t0)) {
		t.Fatalf("Unpushed = %+v, want i/a 3 in today", saved)
	}

	next := newTestCounter(st, clk)
	next.AddUnpushed(saved)
	if used := next.Used([]byte("i/a"), Day, t0); used != 3 {
		t.Fatalf("the next process counts %d, want the 3 carried over", used)
	}
	delete(st.fail, "*")
	if err := next.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := st.counts(objKey(Day, t0))["i/a"]; got != 3 {
		t.Fatalf("storage holds %d, want 3", got)
	}
	if left := next.Unpushed(); len(left) != 0 {
		t.Fatalf("still unpushed after a flush: %+v", left)
	}
}
