package quota

import (
	"context"
	"math"
	"testing"
	"time"
)

type usage struct {
	key string
	p   Period
}

func TestTryAdd(t *testing.T) {
	tests := []struct {
		rule       string
		before     []Item // charged first, must fit
		items      []Item
		wantFailed int
		wantOK     bool
		wantUsed   map[usage]int64
	}{
		{
			rule:       "within limit is counted",
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 3}},
			wantFailed: -1, wantOK: true,
			wantUsed: map[usage]int64{{"k", Day}: 3},
		},
		{
			rule:       "exactly reaching the limit is allowed",
			before:     []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 2}},
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 3}},
			wantFailed: -1, wantOK: true,
			wantUsed: map[usage]int64{{"k", Day}: 5},
		},
		{
			// A batch's cost saturates at math.MaxInt64: used + N would
			// wrap to a negative count that fits.
			rule:       "a cost that overflows the count is refused",
			before:     []Item{{Key: []byte("k"), Period: Day, Limit: 5000, N: 1}},
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 5000, N: math.MaxInt64}},
			wantFailed: 0, wantOK: false,
			wantUsed: map[usage]int64{{"k", Day}: 1},
		},
		{
			rule: "the same key twice, together past the largest count",
			items: []Item{
				{Key: []byte("k"), Period: Day, Limit: math.MaxInt64, N: math.MaxInt64 - 1},
				{Key: []byte("k"), Period: Day, Limit: math.MaxInt64, N: 2},
			},
			wantFailed: 1, wantOK: false,
			wantUsed: map[usage]int64{{"k", Day}: 0},
		},
		{
			rule:       "over the limit is refused and not counted",
			before:     []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 3}},
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 3}},
			wantFailed: 0, wantOK: false,
			wantUsed: map[usage]int64{{"k", Day}: 3},
		},
		{
			rule:   "all or nothing: day fits, month exhausted, nothing counted",
			before: []Item{{Key: []byte("k"), Period: Month, Limit: 10, N: 10}},
			items: []Item{
				{Key: []byte("k"), Period: Day, Limit: 100, N: 1},
				{Key: []byte("k"), Period: Month, Limit: 10, N: 1},
			},
			wantFailed: 1, wantOK: false,
			wantUsed: map[usage]int64{{"k", Day}: 0, {"k", Month}: 10},
		},
		{
			rule: "more items than the check keeps counts for, keys old and new, repeated",
			before: []Item{
				{Key: []byte("t/a"), Period: Day, Limit: 50, N: 1},
				{Key: []byte("t/e"), Period: Day, Limit: 50, N: 5},
			},
			items: []Item{
				{Key: []byte("t/a"), Period: Day, Limit: 50, N: 1},
				{Key: []byte("t/b"), Period: Day, Limit: 50, N: 2},
				{Key: []byte("t/a"), Period: Day, Limit: 50, N: 3},
				{Key: []byte("t/b"), Period: Day, Limit: 50, N: 4},
				{Key: []byte("t/e"), Period: Day, Limit: 50, N: 5},
				{Key: []byte("t/f"), Period: Day, Limit: 50, N: 6},
				{Key: []byte("t/f"), Period: Day, Limit: 50, N: 7},
				{Key: []byte("t/a"), Period: Day, Limit: 50, N: 8},
			},
			wantFailed: -1, wantOK: true,
			wantUsed: map[usage]int64{{"t/a", Day}: 13, {"t/b", Day}: 6, {"t/e", Day}: 10, {"t/f", Day}: 13},
		},
		{
			rule: "all or nothing: several keys all fit, all counted",
			items: []Item{
				{Key: []byte("i/a"), Period: Day, Limit: 5, N: 1},
				{Key: []byte("g/b"), Period: Day, Limit: 5, N: 2},
				{Key: []byte("i/a"), Period: Month, Limit: 50, N: 1},
			},
			wantFailed: -1, wantOK: true,
			wantUsed: map[usage]int64{{"i/a", Day}: 1, {"g/b", Day}: 2, {"i/a", Month}: 1},
		},
		{
			rule: "the same key twice in one call adds up",
			items: []Item{
				{Key: []byte("k"), Period: Day, Limit: 5, N: 3},
				{Key: []byte("k"), Period: Day, Limit: 5, N: 3},
			},
			wantFailed: 1, wantOK: false,
			wantUsed: map[usage]int64{{"k", Day}: 0},
		},
		{
			rule: "the same key twice in one call fitting together",
			items: []Item{
				{Key: []byte("k"), Period: Day, Limit: 5, N: 1},
				{Key: []byte("k"), Period: Day, Limit: 5, N: 2},
			},
			wantFailed: -1, wantOK: true,
			wantUsed: map[usage]int64{{"k", Day}: 3},
		},
		{
			rule:       "zero N only checks",
			before:     []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 5}},
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 0}},
			wantFailed: -1, wantOK: true,
			wantUsed: map[usage]int64{{"k", Day}: 5},
		},
		{
			rule:       "zero limit refuses everything",
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 0, N: 1}},
			wantFailed: 0, wantOK: false,
		},
		{
			rule:       "empty call succeeds",
			wantFailed: -1, wantOK: true,
		},
		{
			rule:       "invalid period is refused",
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: 1}, {Key: []byte("k"), Period: 0, Limit: 5, N: 1}},
			wantFailed: 1, wantOK: false,
			wantUsed: map[usage]int64{{"k", Day}: 0},
		},
		{
			rule:       "key with a space is refused",
			items:      []Item{{Key: []byte("a b"), Period: Day, Limit: 5, N: 1}},
			wantFailed: 0, wantOK: false,
		},
		{
			rule:       "key with a newline is refused",
			items:      []Item{{Key: []byte("a\nb"), Period: Day, Limit: 5, N: 1}},
			wantFailed: 0, wantOK: false,
		},
		{
			rule:       "empty key is refused",
			items:      []Item{{Key: []byte(""), Period: Day, Limit: 5, N: 1}},
			wantFailed: 0, wantOK: false,
		},
		{
			rule:       "negative N is refused",
			items:      []Item{{Key: []byte("k"), Period: Day, Limit: 5, N: -1}},
			wantFailed: 0, wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			c := New(Config{Clock: newFakeClock(t0).Now})
			if _, ok := c.TryAdd(tt.before, t0); !ok {
				t.Fatal("setup TryAdd refused")
			}
			running := map[usage]int64{} // Used before the call, then each item added
			for _, it := range tt.items {
				if u := (usage{string(it.Key), it.Period}); it.Period.Valid() {
					running[u] = c.Used(it.Key, it.Period, t0)
				}
			}
			failed, ok := c.TryAdd(tt.items, t0)
			if failed != tt.wantFailed || ok != tt.wantOK {
				t.Errorf("TryAdd = %d, %v; want %d, %v", failed, ok, tt.wantFailed, tt.wantOK)
			}
			for _, it := range tt.items {
				u := usage{string(it.Key), it.Period}
				if !ok && tt.items[failed].Period.Valid() && tt.items[failed].N >= 0 && validKey(tt.items[failed].Key) && it.Used != running[u] {
					t.Errorf("refused call, item %s %s: Used = %d, want %d (the count it found)", it.Key, it.Period, it.Used, running[u])
				}
				running[u] += it.N
				if ok && it.Used != running[u] {
					t.Errorf("item %s %s: Used = %d, want %d (the count once it and the items before it are added)", it.Key, it.Period, it.Used, running[u])
				}
			}
			for u, want := range tt.wantUsed {
				if got := c.Used([]byte(u.key), u.p, t0); got != want {
					t.Errorf("Used(%s, %s) = %d, want %d", u.key, u.p, got, want)
				}
			}
		})
	}
}

// A Refund after a Flush leaves a negative pending count; the next TryAdd
// of the key brings it back to zero, and nothing may be left pending then:
// no count of zero for State, Unpushed or the next Flush to carry. A
// second item of the same key in that call must still be counted.
func TestTryAddDropsAPendingCountItBringsToZero(t *testing.T) {
	c := newTestCounter(newFakeStorage(), newFakeClock(t0), Day)
	it := []Item{{Key: []byte("k"), Period: Day, Limit: 10, N: 1}}
	if _, ok := c.TryAdd(it, t0); !ok {
		t.Fatal("first TryAdd refused")
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Refund(it, t0) // pending -1
	if _, ok := c.TryAdd(it, t0); !ok {
		t.Fatal("second TryAdd refused")
	}
	if st := c.State(); st.Pending != 0 || len(c.Unpushed()) != 0 {
		t.Fatalf("after the counts cancelled out: State().Pending = %d, Unpushed = %+v; want nothing pending", st.Pending, c.Unpushed())
	}
	if n := c.Used([]byte("k"), Day, t0); n != 1 {
		t.Fatalf("used %d, want 1", n)
	}

	c.Refund(it, t0) // pending -1 again
	two := []Item{it[0], it[0]}
	if _, ok := c.TryAdd(two, t0); !ok {
		t.Fatal("TryAdd of the key twice refused")
	}
	if n := c.Used([]byte("k"), Day, t0); n != 2 {
		t.Fatalf("used %d after the key twice, want 2", n)
	}
	if st := c.State(); st.Pending != 1 {
		t.Fatalf("State().Pending = %d, want 1", st.Pending)
	}
}

// Add counts work already done whatever its size, but at most MaxAdd
// per item: a saturated batch cost added to a count would wrap it to a
// negative one, which every later call fits.
func TestCountsGrowByAtMostMaxAddAtOnce(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	if !add(c, "k", Day, 1, t0) {
		t.Fatal("add refused")
	}
	c.Add([]Item{{Key: []byte("k"), Period: Day, Limit: 5000, N: math.MaxInt64}}, t0)
	c.Add([]Item{{Key: []byte("k"), Period: Day, Limit: 5000, N: math.MaxInt64}}, t0)
	if got := c.Used([]byte("k"), Day, t0); got != 1+2*MaxAdd {
		t.Fatalf("Used = %d, want %d", got, 1+2*MaxAdd)
	}
	if _, ok := c.TryAdd([]Item{{Key: []byte("k"), Period: Day, Limit: 5000, N: 1}}, t0); ok {
		t.Fatal("a call fits a count past its limit")
	}
	// A count without a limit (one kept for a tier that may limit it)
	// fits any N, and grows by MaxAdd at most too.
	for range 2 {
		if _, ok := c.TryAdd([]Item{{Key: []byte("u"), Period: Month, Limit: math.MaxInt64, N: math.MaxInt64 / 2}}, t0); !ok {
			t.Fatal("an item without a limit refused")
		}
	}
	if got := c.Used([]byte("u"), Month, t0); got != 2*MaxAdd {
		t.Fatalf("Used = %d, want %d", got, 2*MaxAdd)
	}
}

func TestRefund(t *testing.T) {
	tests := []struct {
		rule        string
		add, refund int64
		wantUsed    int64
		wantPending int
	}{
		{"full refund leaves nothing pending", 3, 3, 0, 0},
		{"partial refund", 3, 1, 2, 1},
		{"refund without add goes negative", 0, 2, -2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			c := New(Config{Clock: newFakeClock(t0).Now})
			if tt.add > 0 && !add(c, "k", Day, tt.add, t0) {
				t.Fatal("add refused")
			}
			c.Refund([]Item{{Key: []byte("k"), Period: Day, N: tt.refund}, {Key: []byte("bad key"), Period: Day, N: 1}, {Key: []byte("k"), N: 1}}, t0)
			if got := c.Used([]byte("k"), Day, t0); got != tt.wantUsed {
				t.Errorf("Used = %d, want %d", got, tt.wantUsed)
			}
			if got := c.State().Pending; got != tt.wantPending {
				t.Errorf("Pending = %d, want %d", got, tt.wantPending)
			}
		})
	}
}

func TestUsedUnknown(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	add(c, "k", Day, 1, t0)
	tests := []struct {
		rule string
		key  string
		p    Period
		at   time.Time
	}{
		{"unknown key", "other", Day, t0},
		{"other period kind", "k", Month, t0},
		{"other day", "k", Day, t0.Add(24 * time.Hour)},
		{"invalid period", "k", 0, t0},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := c.Used([]byte(tt.key), tt.p, tt.at); got != 0 {
				t.Errorf("Used = %d, want 0", got)
			}
		})
	}
}

func TestNoStorageFoldsLocally(t *testing.T) {
	clk := newFakeClock(t0)
	c := New(Config{Clock: clk.Now})
	add(c, "k", Day, 4, t0)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := c.State()
	if got := c.Used([]byte("k"), Day, t0); got != 4 || st.Pending != 0 || st.Tracked != 1 || st.Flushes != 1 {
		t.Errorf("Used = %d, State = %+v", got, st)
	}
	clk.Set(t0.Add(24 * time.Hour))
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := c.State(); st.Tracked != 0 {
		t.Errorf("ended day still tracked: %+v", st)
	}
}

// With day and month both exhausted, the refusal must name the month: the
// same call fits again only at its reset, not at the day's.
func TestTryAddReportsTheQuotaThatResetsLast(t *testing.T) {
	mid := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	c := New(Config{Clock: newFakeClock(mid).Now})
	full := []Item{
		{Key: []byte("k"), Period: Day, Limit: 3, N: 3},
		{Key: []byte("k"), Period: Month, Limit: 3, N: 3},
	}
	if _, ok := c.TryAdd(full, mid); !ok {
		t.Fatal("setup TryAdd refused")
	}
	for _, items := range [][]Item{
		{{Key: []byte("k"), Period: Day, Limit: 3, N: 1}, {Key: []byte("k"), Period: Month, Limit: 3, N: 1}},
		{{Key: []byte("k"), Period: Month, Limit: 3, N: 1}, {Key: []byte("k"), Period: Day, Limit: 3, N: 1}},
	} {
		failed, ok := c.TryAdd(items, mid)
		if ok || failed < 0 || items[failed].Period != Month {
			t.Fatalf("TryAdd(%v) = %d, %v; want the month item refused", items, failed, ok)
		}
	}
}

// Fits reports what TryAdd would and counts nothing.
func TestFitsCountsNothing(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	items := []Item{{Key: []byte("k"), Period: Day, Limit: 2, N: 2}}
	for range 3 {
		if failed, ok := c.Fits(items, t0); !ok || failed != -1 || items[0].Used != 2 {
			t.Fatalf("Fits = %d, %v (Used %d); want it to fit with Used 2", failed, ok, items[0].Used)
		}
	}
	if used := c.Used([]byte("k"), Day, t0); used != 0 {
		t.Fatalf("Used = %d after Fits, want 0", used)
	}
	items[0].N = 3
	if failed, ok := c.Fits(items, t0); ok || failed != 0 {
		t.Fatalf("Fits over the limit = %d, %v; want item 0 refused", failed, ok)
	}
}

// On a month's last day the day and the month reset together; the month is
// the quota reported.
func TestTryAddReportsTheMonthOnItsLastDay(t *testing.T) {
	last := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := New(Config{Clock: newFakeClock(last).Now})
	if _, ok := c.TryAdd([]Item{{Key: []byte("k"), Period: Day, Limit: 1, N: 1}, {Key: []byte("k"), Period: Month, Limit: 1, N: 1}}, last); !ok {
		t.Fatal("setup TryAdd refused")
	}
	items := []Item{{Key: []byte("k"), Period: Day, Limit: 1, N: 1}, {Key: []byte("k"), Period: Month, Limit: 1, N: 1}}
	if failed, ok := c.TryAdd(items, last); ok || items[failed].Period != Month {
		t.Fatalf("TryAdd = %d, %v; want the month item refused", failed, ok)
	}
}

// Counts lists every key counted in the current periods, with what this
// instance knows of it, counted here or adopted.
func TestCountsListsTheCurrentPeriods(t *testing.T) {
	c := New(Config{Periods: []Period{Day, Month}})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	items := []Item{{Key: []byte("i/a"), Period: Day, Limit: 10, N: 2}, {Key: []byte("i/a"), Period: Month, Limit: 10, N: 2}}
	if _, ok := c.TryAdd(items, now); !ok {
		t.Fatal("TryAdd refused")
	}
	if _, ok := c.TryAdd(items[:1], now); !ok {
		t.Fatal("TryAdd refused")
	}
	got := map[Period]int64{}
	for _, n := range c.Counts(now, nil) {
		if n.Key != "i/a" || !n.Start.Equal(n.Period.Start(now)) {
			t.Fatalf("unexpected count %+v", n)
		}
		got[n.Period] = n.N
	}
	if got[Day] != 4 || got[Month] != 2 || len(got) != 2 {
		t.Fatalf("Counts = %v, want day 4 and month 2", got)
	}
	if n := len(c.Counts(now.AddDate(0, 2, 0), nil)); n != 0 {
		t.Fatalf("%d counts in periods nothing was counted in", n)
	}
}

func TestAnyCounted(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	add(c, "k", Day, 1, t0)
	item := func(key string, p Period) Item { return Item{Key: []byte(key), Period: p, Limit: 10, N: 1} }
	tests := []struct {
		rule  string
		items []Item
		at    time.Time
		want  bool
	}{
		{"counted key", []Item{item("k", Day)}, t0, true},
		{"counted key after an uncounted one", []Item{item("other", Day), item("k", Day)}, t0, true},
		{"unknown key", []Item{item("other", Day)}, t0, false},
		{"other period kind", []Item{item("k", Month)}, t0, false},
		{"other day", []Item{item("k", Day)}, t0.Add(24 * time.Hour), false},
		{"invalid period", []Item{item("k", 0)}, t0, false},
		{"no items", nil, t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := c.AnyCounted(tt.items, tt.at); got != tt.want {
				t.Errorf("AnyCounted = %v, want %v", got, tt.want)
			}
		})
	}
	if st := c.State(); st.Tracked != 1 {
		t.Fatalf("AnyCounted created entries: %d tracked, want 1", st.Tracked)
	}
}
