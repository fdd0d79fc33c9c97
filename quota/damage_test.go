package quota

import "testing"

// damageCounter returns a Counter on st that records the damage it meets.
func damageCounter(st Storage, clk *fakeClock, seen *[]int64) *Counter {
	return New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: []Period{Day},
		LockTimeout: 5e9, OnDamage: func(_ string, _ int, restored int64) { *seen = append(*seen, restored) }})
}

// storedHistory returns the history lines at the start of the object.
func storedHistory(st *fakeStorage, key string) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	data := st.objects[key]
	_, rest := splitHistory(data)
	return string(data[:len(data)-len(rest)])
}

// TestDamagedObjectKeepsTheCountsReadBefore: an object that lost lines (a
// truncated one, a count that is no number) or its whole content is no
// reason to hand a tenant its quota again: the Counters that read it keep
// what they had read, and the first to push restores the object from it,
// once. An object that is not there (a zone moved to another storage) is
// no damage.
func TestDamagedObjectKeepsTheCountsReadBefore(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(history string) string
	}{
		{"truncated mid-line", func(h string) string { return h + "x 5\ni/tru" }},
		{"a count that is no number", func(h string) string { return h + "x 5\nk abc\n" }},
		{"emptied", func(string) string { return "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStorage()
			clk := newFakeClock(t0)
			var da, db []int64
			a, b := damageCounter(st, clk, &da), damageCounter(st, clk, &db)
			key := objKey(Day, t0)
			add(a, "k", Day, 50, t0)
			add(a, "x", Day, 5, t0)
			flushAll(t, a, b)
			st.put(key, c.damage(storedHistory(st, key)))
			flushAll(t, b) // a read
			if u := b.Used([]byte("k"), Day, t0); u != 50 {
				t.Fatalf("b read the damaged object: Used(k) = %d, want the 50 it read before", u)
			}
			add(a, "x", Day, 1, t0)
			flushAll(t, a, a, b, b) // a's push finds the damage, the next restores
			if got := st.counts(key); got["k"] != 50 || got["x"] != 6 {
				t.Errorf("stored after the restoring push = %v, want k 50 and x 6", got)
			}
			for i, ctr := range []*Counter{a, b} {
				if u := ctr.Used([]byte("k"), Day, t0); u != 50 {
					t.Errorf("counter %d: Used(k) = %d, want 50", i, u)
				}
			}
			if len(da) != 1 || da[0] < 50 || len(db) != 1 {
				t.Errorf("damage met: a %v, b %v; want once each, a restoring 50 or more", da, db)
			}
		})
	}

	st := newFakeStorage()
	clk := newFakeClock(t0)
	var seen []int64
	a := damageCounter(st, clk, &seen)
	add(a, "k", Day, 50, t0)
	flushAll(t, a)
	if err := st.Delete(t.Context(), objKey(Day, t0)); err != nil {
		t.Fatal(err)
	}
	flushAll(t, a)
	if u := a.Used([]byte("k"), Day, t0); u != 0 || len(seen) != 0 {
		t.Errorf("an object gone: Used(k) = %d, damage %v; want 0 and none (counting on from the storage)", u, seen)
	}
}
