package quota

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRollover(t *testing.T) {
	utc := func(y int, m time.Month, d, h, mi, s int) time.Time {
		return time.Date(y, m, d, h, mi, s, 0, time.UTC)
	}
	tests := []struct {
		rule          string
		p             Period
		before, after time.Time
		oldObj        string
		newObj        string
	}{
		{"day at midnight UTC", Day, utc(2026, 11, 29, 23, 59, 59), utc(2026, 11, 30, 0, 0, 0), "day-2026-11-29", "day-2026-11-30"},
		{"month end Nov 30 23:59:59 to Dec 1", Month, utc(2026, 11, 30, 23, 59, 59), utc(2026, 12, 1, 0, 0, 1), "month-2026-11", "month-2026-12"},
		{"day at month end", Day, utc(2026, 11, 30, 23, 59, 59), utc(2026, 12, 1, 0, 0, 0), "day-2026-11-30", "day-2026-12-01"},
		{"month at year end", Month, utc(2026, 12, 31, 23, 59, 59), utc(2027, 1, 1, 0, 0, 0), "month-2026-12", "month-2027-01"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			st := newFakeStorage()
			clk := newFakeClock(tt.before)
			c := newTestCounter(st, clk, tt.p)
			item := []Item{{Key: []byte("k"), Period: tt.p, Limit: 3, N: 1}}
			for range 3 {
				if _, ok := c.TryAdd(item, tt.before); !ok {
					t.Fatal("refused within the limit")
				}
			}
			if _, ok := c.TryAdd(item, tt.before); ok {
				t.Fatal("allowed over the limit")
			}
			if reset := tt.p.Next(tt.before); !reset.Equal(tt.p.Start(tt.after)) {
				t.Errorf("Next(before) = %v, want the start of the new period %v", reset, tt.p.Start(tt.after))
			}

			clk.Set(tt.after)
			if _, ok := c.TryAdd(item, tt.after); !ok {
				t.Fatal("refused in the new period")
			}
			if got := c.Used([]byte("k"), tt.p, tt.before); got != 3 {
				t.Errorf("old period Used before flush = %d, want 3", got)
			}
			if got := c.Used([]byte("k"), tt.p, tt.after); got != 1 {
				t.Errorf("new period Used = %d, want 1", got)
			}
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			oldKey, newKey := testPrefix+"/quota/"+tt.oldObj, testPrefix+"/quota/"+tt.newObj
			if got := st.counts(oldKey)["k"]; got != 3 {
				t.Errorf("old object %s = %d, want 3 (pushed after the rollover)", tt.oldObj, got)
			}
			if got := st.counts(newKey)["k"]; got != 1 {
				t.Errorf("new object %s = %d, want 1", tt.newObj, got)
			}
			if s := c.State(); s.Tracked != 1 || s.Pending != 0 {
				t.Errorf("old period still in memory: %+v", s)
			}

			// A late refund of a request made before the rollover goes to
			// the old object.
			c.Refund(item, tt.before)
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := st.counts(oldKey)["k"]; got != 2 {
				t.Errorf("old object after late refund = %d, want 2", got)
			}
			if s := c.State(); s.Tracked != 1 {
				t.Errorf("old period kept after its late push: %+v", s)
			}
		})
	}
}

func TestRolloverWhileDegradedKeepsOldDeltas(t *testing.T) {
	st := newFakeStorage()
	before := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	clk := newFakeClock(before)
	c := newTestCounter(st, clk, Day)
	add(c, "k", Day, 5, before)
	st.setFail("*", errDown)
	if err := c.Flush(t.Context()); err == nil {
		t.Fatal("flush should fail")
	}
	after := before.Add(2 * time.Minute)
	clk.Set(after)
	add(c, "k", Day, 1, after)
	if err := c.Flush(t.Context()); err == nil {
		t.Fatal("flush should fail")
	}
	st.setFail("*", nil)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := st.counts(objKey(Day, before))["k"]; got != 5 {
		t.Errorf("old day = %d, want 5", got)
	}
	if got := st.counts(objKey(Day, after))["k"]; got != 1 {
		t.Errorf("new day = %d, want 1", got)
	}
}

// Counts of a period older than the previous one, left pending by flushes
// that failed until then, are dropped, never pushed: their object is
// garbage, and neither written nor locked nor read.
func TestPeriodsOlderThanPreviousAreDiscarded(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	c := newTestCounter(st, clk, Day)
	add(c, "k", Day, 5, t0)
	st.setFail("*", errDown)
	_ = c.Flush(t.Context())
	st.setFail("*", nil)
	later := t0.Add(48 * time.Hour)
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
	if st.has(objKey(Day, t0)) || len(touched) > 0 {
		t.Errorf("a period older than the previous one was written or touched (%v)", touched)
	}
	if s := c.State(); s.Tracked != 0 || s.Pending != 0 {
		t.Errorf("State = %+v, want nothing tracked", s)
	}
}

// A count for an ended period that arrives while the flush pushing that
// period runs (a late refund, or a call stamped before the rollover) keeps
// the period in memory until a later flush has pushed it too.
func TestAnEndedPeriodKeepsCountsMadeDuringItsPush(t *testing.T) {
	st := newFakeStorage()
	before := time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
	clk := newFakeClock(before)
	c := newTestCounter(st, clk, Day)
	add(c, "k", Day, 3, before)
	clk.Set(before.Add(2 * time.Second))
	var once sync.Once
	st.setHook(func(op, _ string) {
		if op == "Store" {
			once.Do(func() { c.Refund([]Item{{Key: []byte("k"), Period: Day, Limit: 10, N: 1}}, before) })
		}
	})
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := st.counts(objKey(Day, before))["k"]; got != 3 {
		t.Fatalf("old day after the first push = %d, want 3", got)
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := st.counts(objKey(Day, before))["k"]; got != 2 {
		t.Errorf("old day = %d, want 2: the refund made during its push was lost", got)
	}
}
