package quota

import (
	"fmt"
	"maps"
	"testing"
)

func TestFlushSumsAcrossInstances(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	var cs []*Counter
	for i := range 3 {
		c := newTestCounter(st, clk, Day)
		add(c, "shared", Day, int64(i+1), t0)
		add(c, fmt.Sprintf("own%d", i), Day, 10, t0)
		cs = append(cs, c)
	}
	for round := range 2 { // the second round lets the first flushers adopt
		for i, c := range cs {
			if err := c.Flush(t.Context()); err != nil {
				t.Fatalf("round %d, counter %d: %v", round, i, err)
			}
		}
	}
	want := map[string]int64{"shared": 6, "own0": 10, "own1": 10, "own2": 10}
	if got := st.counts(objKey(Day, t0)); !maps.Equal(got, want) {
		t.Errorf("stored = %v, want %v (the sum, never the max)", got, want)
	}
	for i, c := range cs {
		for k, v := range want {
			if got := c.Used([]byte(k), Day, t0); got != v {
				t.Errorf("counter %d: Used(%s) = %d, want %d", i, k, got, v)
			}
		}
		if s := c.State(); s.Pending != 0 || s.Tracked != 4 {
			t.Errorf("counter %d: State = %+v", i, s)
		}
	}
}

func TestIdleCounterSeesOthers(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	busy := newTestCounter(st, clk, Day, Month)
	idle := newTestCounter(st, clk, Day, Month)
	add(busy, "k", Day, 7, t0)
	add(busy, "k", Month, 9, t0)
	if err := busy.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	st.takeOps()
	if err := idle.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := idle.Used([]byte("k"), Day, t0); got != 7 {
		t.Errorf("idle Used(day) = %d, want 7", got)
	}
	if got := idle.Used([]byte("k"), Month, t0); got != 9 {
		t.Errorf("idle Used(month) = %d, want 9", got)
	}
	ops, _ := st.takeOps()
	if ops["Lock"] != 0 || ops["Store"] != 0 || ops["Load"] != 2 {
		t.Errorf("idle flush ops = %v, want 2 reads without lock or store", ops)
	}
}

func TestRestartContinuesFromFlushed(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	first := newTestCounter(st, clk, Day)
	add(first, "k", Day, 42, t0)
	if err := first.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	restarted := newTestCounter(st, clk, Day)
	if err := restarted.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := restarted.Used([]byte("k"), Day, t0); got != 42 {
		t.Fatalf("after restart Used = %d, want 42", got)
	}
	items := []Item{{Key: []byte("k"), Period: Day, Limit: 43, N: 1}}
	if _, ok := restarted.TryAdd(items, t0); !ok {
		t.Error("43rd request refused")
	}
	if _, ok := restarted.TryAdd(items, t0); ok {
		t.Error("44th request allowed over a limit of 43")
	}
}

func TestRefundAfterFlushPushesNegativeDelta(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	a := newTestCounter(st, clk, Day)
	b := newTestCounter(st, clk, Day)
	key := objKey(Day, t0)
	steps := []struct {
		rule   string
		do     func()
		flush  *Counter
		stored int64
	}{
		{"a counts 5", func() { add(a, "k", Day, 5, t0) }, a, 5},
		{"b counts 4", func() { add(b, "k", Day, 4, t0) }, b, 9},
		{"a refunds 2 after its push", func() { a.Refund([]Item{{Key: []byte("k"), Period: Day, N: 2}}, t0) }, a, 7},
		{"b refunds all it counted", func() { b.Refund([]Item{{Key: []byte("k"), Period: Day, N: 4}}, t0) }, b, 3},
		{"a refunds the rest: the line disappears", func() { a.Refund([]Item{{Key: []byte("k"), Period: Day, N: 3}}, t0) }, a, 0},
	}
	for _, s := range steps {
		s.do()
		if err := s.flush.Flush(t.Context()); err != nil {
			t.Fatalf("%s: %v", s.rule, err)
		}
		if got := st.counts(key)["k"]; got != s.stored {
			t.Fatalf("%s: stored = %d, want %d", s.rule, got, s.stored)
		}
		if got := s.flush.Used([]byte("k"), Day, t0); got != s.stored {
			t.Fatalf("%s: Used = %d, want %d", s.rule, got, s.stored)
		}
	}
}

func TestFlushOpsConstantInKeys(t *testing.T) {
	var first map[string]int
	for _, n := range []int{10, 10_000} {
		t.Run(fmt.Sprintf("%d keys", n), func(t *testing.T) {
			st := newFakeStorage()
			clk := newFakeClock(t0)
			c := newTestCounter(st, clk, Day, Month)
			if err := c.Flush(t.Context()); err != nil { // first flush also lists for cleanup
				t.Fatal(err)
			}
			for i := range n {
				k := fmt.Sprintf("i/%032x", i)
				add(c, k, Day, 1, t0)
				add(c, k, Month, 1, t0)
			}
			st.takeOps()
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			ops, _ := st.takeOps()
			want := map[string]int{"Lock": 2, "Load": 2, "Store": 2, "Unlock": 2}
			if !maps.Equal(ops, want) {
				t.Errorf("ops = %v, want %v", ops, want)
			}
			if first == nil {
				first = ops
			} else if !maps.Equal(first, ops) {
				t.Errorf("ops depend on the number of keys: %v vs %v", first, ops)
			}
			if got := len(st.counts(objKey(Day, t0))); got != n {
				t.Errorf("stored %d keys, want %d", got, n)
			}
		})
	}
}

func TestMalformedStoredLinesAreSkipped(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	key := objKey(Day, t0)
	st.put(key, "a 5\nnot a line\nb x\n\nc 7\n")
	c := newTestCounter(st, clk, Day)
	if err := c.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a, cc := c.Used([]byte("a"), Day, t0), c.Used([]byte("c"), Day, t0); a != 5 || cc != 7 {
		t.Errorf("Used a, c = %d, %d; want 5, 7", a, cc)
	}
	add(c, "a", Day, 1, t0)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatalf("one bad line failed the flush: %v", err)
	}
	want := map[string]int64{"a": 6, "c": 7}
	if got := st.counts(key); !maps.Equal(got, want) {
		t.Errorf("stored = %v, want %v", got, want)
	}
	if s := c.State(); s.Malformed != 4 || s.Degraded {
		t.Errorf("State = %+v, want 4 malformed lines, healthy", s)
	}
}
