package quota

import (
	"context"
	"testing"
	"time"
)

// Totals copies only what was read from storage; SeedTotals takes a copy
// of the current periods, and only until storage is read.
func TestTotalsAndSeedTotals(t *testing.T) {
	st, clk := newFakeStorage(), newFakeClock(t0)
	c := newTestCounter(st, clk, Day)
	if _, ok := c.Totals(t0); ok {
		t.Fatal("totals offered before storage was read")
	}
	c.SeedTotals([]Count{
		{Key: "i/a", Period: Day, Start: Day.Start(t0), N: 7},
		{Key: "i/old", Period: Day, Start: Day.Start(t0.Add(-24 * time.Hour)), N: 9},
	}, t0)
	if got := c.Used([]byte("i/a"), Day, t0); got != 7 {
		t.Fatalf("seeded count %d, want 7", got)
	}
	if got := c.Used([]byte("i/old"), Day, t0); got != 0 {
		t.Fatalf("a count of yesterday seeded as today's: %d", got)
	}
	add(c, "i/b", Day, 2, t0)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.Used([]byte("i/a"), Day, t0); got != 0 {
		t.Fatalf("after storage was read the seed still counts: %d", got)
	}
	cs, ok := c.Totals(t0)
	if !ok || len(cs) != 1 || cs[0].Key != "i/b" || cs[0].N != 2 {
		t.Fatalf("Totals = %v, %v; want i/b 2 as stored", cs, ok)
	}
	c.SeedTotals([]Count{{Key: "i/b", Period: Day, Start: Day.Start(t0), N: 50}}, t0)
	if got := c.Used([]byte("i/b"), Day, t0); got != 2 {
		t.Fatalf("a seed after storage was read changed the count to %d", got)
	}
}

// Any copy of the current period's totals is a lower bound on them: of
// several copies seeded, in one call or in several, in any order, the
// largest wins.
func TestSeedTotalsKeepsTheLargestCopy(t *testing.T) {
	tests := []struct {
		rule  string
		calls [][]int64 // the N of each copy, by SeedTotals call
	}{
		{"the larger of two copies in one call wins", [][]int64{{50, 10}}},
		{"a smaller copy seeded later lowers nothing", [][]int64{{50}, {10}}},
		{"a larger copy seeded later raises the count", [][]int64{{10}, {50}}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			c := newTestCounter(newFakeStorage(), newFakeClock(t0), Day)
			for _, ns := range tt.calls {
				var cs []Count
				for _, n := range ns {
					cs = append(cs, Count{Key: "i/x", Period: Day, Start: Day.Start(t0), N: n})
				}
				c.SeedTotals(cs, t0)
			}
			if got := c.Used([]byte("i/x"), Day, t0); got != 50 {
				t.Fatalf("seeded count %d, want 50", got)
			}
		})
	}
}
