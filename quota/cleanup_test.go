package quota

import (
	"testing"
	"time"
)

func TestCleanupKeepsCurrentAndPrevious(t *testing.T) {
	dir := testPrefix + "/quota/"
	st := newFakeStorage()
	objects := []struct {
		name     string
		wantKept bool
	}{
		{"day-2026-11-30", true},  // current
		{"day-2026-11-29", true},  // previous
		{"day-2026-11-28", false}, // ended before the previous day
		{"day-2025-01-01", false},
		{"month-2026-11", true},  // current
		{"month-2026-10", true},  // previous
		{"month-2026-09", false}, // ended before the previous month
		{".tmp_12345", true},     // certmagic temp file
		{"garbage", true},
		{"day-notadate", true},
		{"month-2026-13", true},
		{"day-2026-11-28.bak", true},
		{"sub/day-2020-01-01", true}, // not a direct child
	}
	for _, o := range objects {
		st.put(dir+o.name, "k 1\n")
	}
	st.put("outside/day-2020-01-01", "k 1\n")
	st.junk = []string{dir + "listed-but-absent", "outside/day-2020-01-01"}
	st.vanish = []string{dir + "day-2020-01-02", dir + "month-2020-01"} // listed, gone
	clk := newFakeClock(t0)
	c := newTestCounter(st, clk, Day)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatalf("flush with junk and vanishing objects: %v", err)
	}
	for _, o := range objects {
		t.Run(o.name, func(t *testing.T) {
			if got := st.has(dir + o.name); got != o.wantKept {
				t.Errorf("kept = %v, want %v", got, o.wantKept)
			}
		})
	}
	if s := c.State(); s.Degraded || s.CleanupFailures != 0 {
		t.Errorf("State = %+v", s)
	}
	if !st.has("outside/day-2020-01-01") {
		t.Error("deleted outside the quota directory")
	}

	tests := []struct {
		rule     string
		at       time.Time
		wantList int
	}{
		{"same day: no second listing", t0.Add(time.Hour), 0},
		{"next day: list again", t0.Add(24 * time.Hour), 1},
		{"still the next day", t0.Add(25 * time.Hour), 0},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			clk.Set(tt.at)
			st.takeOps()
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if ops, _ := st.takeOps(); ops["List"] != tt.wantList {
				t.Errorf("List ops = %d, want %d", ops["List"], tt.wantList)
			}
		})
	}
}

func TestCleanupFailureDoesNotDegrade(t *testing.T) {
	tests := []struct {
		rule string
		op   string
	}{
		{"list fails", "List"},
		{"delete fails", "Delete"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			st := newFakeStorage()
			st.put(testPrefix+"/quota/day-2020-01-01", "k 1\n")
			clk := newFakeClock(t0)
			c := newTestCounter(st, clk, Day)
			st.setFail(tt.op, errDown)
			if err := c.Flush(t.Context()); err != nil {
				t.Fatalf("cleanup failure failed the flush: %v", err)
			}
			if s := c.State(); s.Degraded || s.CleanupFailures != 1 {
				t.Errorf("State = %+v", s)
			}
			st.setFail(tt.op, nil)
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if st.has(testPrefix + "/quota/day-2020-01-01") {
				t.Error("cleanup not retried on the next flush")
			}
		})
	}
}

// A flush that failed does not clean up: storage that cannot take the
// counts is not sent deletes as well, nor counted twice as failing.
func TestAFailedFlushSkipsCleanup(t *testing.T) {
	st := newFakeStorage()
	st.put(testPrefix+"/quota/day-2020-01-01", "k 1\n")
	c := newTestCounter(st, newFakeClock(t0), Day)
	add(c, "k", Day, 1, t0)
	st.setFail("Store", errDown)
	if err := c.Flush(t.Context()); err == nil {
		t.Fatal("Flush succeeded on a failing storage")
	}
	if ops, _ := st.takeOps(); ops["List"]+ops["Delete"] != 0 {
		t.Errorf("a failed flush listed or deleted: %v", ops)
	}
	if !st.has(testPrefix + "/quota/day-2020-01-01") {
		t.Error("a failed flush cleaned up")
	}
}
