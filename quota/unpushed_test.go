package quota

import (
	"errors"
	"testing"
	"time"
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

// AddUnpushed takes what can still refuse something and drops the rest.
func TestAddUnpushedDropsWhatCanNoLongerCount(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		rule string
		u    Count
		keep bool
	}{
		{"today's count is taken", Count{Key: "i/a", Period: Day, Start: Day.Start(t0), N: 2}, true},
		{"yesterday's count is taken: it may still be pushed", Count{Key: "i/a", Period: Day, Start: Day.Start(t0.Add(-day)), N: 2}, true},
		{"a count older than the previous period is dropped", Count{Key: "i/a", Period: Day, Start: Day.Start(t0.Add(-2 * day)), N: 2}, false},
		{"a count of a period not begun is dropped", Count{Key: "i/a", Period: Day, Start: Day.Start(t0.Add(day)), N: 2}, false},
		{"a zero count is dropped", Count{Key: "i/a", Period: Day, Start: Day.Start(t0), N: 0}, false},
		{"an unknown period is dropped", Count{Key: "i/a", Period: Period(9), Start: Day.Start(t0), N: 2}, false},
		{"a key that storage cannot hold is dropped", Count{Key: "i/a b", Period: Day, Start: Day.Start(t0), N: 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			c := newTestCounter(newFakeStorage(), newFakeClock(t0))
			c.AddUnpushed([]Count{tt.u})
			got := c.Unpushed()
			if !tt.keep {
				if len(got) != 0 {
					t.Fatalf("Unpushed = %+v, want nothing", got)
				}
				return
			}
			if len(got) != 1 || got[0] != tt.u {
				t.Fatalf("Unpushed = %+v, want %+v", got, tt.u)
			}
		})
	}
}
