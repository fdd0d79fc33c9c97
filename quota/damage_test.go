package quota

import (
	"strings"
	"testing"
)

// damageMet is what a Counter reported of the damage it met.
type damageMet struct {
	counts   int64
	restored bool
}

// damageCounter returns a Counter on st that records the damage it meets.
func damageCounter(st Storage, clk *fakeClock, seen *[]damageMet) *Counter {
	return New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: []Period{Day}, LockTimeout: 5e9,
		OnDamage: func(_ string, _ int, counts int64, restored bool) { *seen = append(*seen, damageMet{counts, restored}) }})
}

// damagePair is two Counters on one storage, recording the damage they
// meet, and the key of their object of t0's day.
type damagePair struct {
	st     *fakeStorage
	a, b   *Counter
	da, db []damageMet
	key    string
}

func newDamagePair() *damagePair {
	p := &damagePair{st: newFakeStorage(), key: objKey(Day, t0)}
	clk := newFakeClock(t0)
	p.a, p.b = damageCounter(p.st, clk, &p.da), damageCounter(p.st, clk, &p.db)
	return p
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
// truncated one, a count that is no number), its whole content, or itself
// is no reason to hand a tenant its quota again: a Counter that read it
// keeps what it had read, logs it once, and its next flush restores the
// object from it, even with nothing counted (a graceful stop's flush
// included). Another Counter that read it too pushes on top of the
// restored object without restoring it twice, nor taking its own pushes
// that the damage cut from the history as overwritten.
func TestDamagedObjectKeepsTheCountsReadBefore(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(st *fakeStorage, key, history string)
	}{
		{"truncated mid-line", func(st *fakeStorage, key, h string) { st.put(key, h+"x 5\ni/tru") }},
		{"a count that is no number", func(st *fakeStorage, key, h string) { st.put(key, h+"x 5\nk abc\n") }},
		{"emptied", func(st *fakeStorage, key, _ string) { st.put(key, "") }},
		{"cut after its lineage line", func(st *fakeStorage, key, h string) { st.put(key, h[:strings.IndexByte(h, '\n')+1]) }},
		{"cut inside its history", func(st *fakeStorage, key, h string) { st.put(key, h[:len(h)-3]) }},
		{"deleted", func(st *fakeStorage, key, _ string) {
			if err := st.Delete(t.Context(), key); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newDamagePair()
			st, a, b, key := p.st, p.a, p.b, p.key
			add(a, "k", Day, 50, t0)
			add(a, "x", Day, 5, t0)
			flushAll(t, a, b)
			c.damage(st, key, storedHistory(st, key))
			for range 3 { // reads between flushes: the damage is met once
				for _, ctr := range []*Counter{a, b} {
					if err := ctr.Refresh(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if u := b.Used([]byte("k"), Day, t0); u != 50 {
				t.Fatalf("b read the damaged object: Used(k) = %d, want the 50 it read before", u)
			}
			if len(p.db) != 1 || p.db[0].restored || p.db[0].counts < 50 {
				t.Fatalf("b met the damage: %v, want it once, keeping 50 or more", p.db)
			}
			flushAll(t, b) // nothing counted: the flush restores
			if got := st.counts(key); got["k"] != 50 || got["x"] != 5 {
				t.Fatalf("stored after b's flush = %v, want k 50 and x 5 restored", got)
			}
			if len(p.db) != 2 || !p.db[1].restored || p.db[1].counts < 50 {
				t.Fatalf("b met the damage: %v, want a restoring of 50 or more after the first", p.db)
			}
			add(a, "x", Day, 1, t0)
			flushAll(t, a, b)
			if got := st.counts(key); got["k"] != 50 || got["x"] != 6 {
				t.Errorf("stored after a's push = %v, want k 50 and x 6: restored once", got)
			}
			for i, ctr := range []*Counter{a, b} {
				if u := ctr.Used([]byte("k"), Day, t0); u != 50 {
					t.Errorf("counter %d: Used(k) = %d, want 50", i, u)
				}
			}
			if len(p.da) != 1 || p.da[0].restored || len(p.db) != 2 {
				t.Errorf("damage met: a %v, b %v; want a's read once, and none more", p.da, p.db)
			}
			h := storedHistory(st, key)
			flushAll(t, a, b)
			if storedHistory(st, key) != h {
				t.Errorf("a flush with nothing counted pushed, once the object was restored")
			}
		})
	}

	// A zone moved to another storage counts on from what it holds, the
	// move landing between flushes or during one (whose read is of the
	// storage left).
	for _, during := range []bool{false, true} {
		st := &pausedStorage{fakeStorage: newFakeStorage()}
		clk := newFakeClock(t0)
		var seen []damageMet
		a := damageCounter(st, clk, &seen)
		add(a, "k", Day, 50, t0)
		flushAll(t, a)
		moved := func() {
			if err := st.Delete(t.Context(), objKey(Day, t0)); err != nil {
				t.Fatal(err)
			}
			a.StorageMoved()
		}
		if during {
			st.afterLoad = moved
			flushAll(t, a)
		} else {
			moved()
		}
		flushAll(t, a, a)
		if u := a.Used([]byte("k"), Day, t0); u != 0 || len(seen) != 0 {
			t.Errorf("another storage (moved during a flush: %v), without the object: Used(k) = %d, damage %v; want 0 and none", during, u, seen)
		}
	}
}

// TestRepairedObjectCutShortIsRestoredOnce: the pushes that repaired an
// object are not pushed again when the object is later cut short, which
// loses its history's newest entries as an overwrite would: it is damage,
// restored as the larger count, never added.
func TestRepairedObjectCutShortIsRestoredOnce(t *testing.T) {
	p := newDamagePair()
	st, a, b, key := p.st, p.a, p.b, p.key
	add(a, "k", Day, 5, t0)
	flushAll(t, a, b)
	for range 2 {
		h := storedHistory(st, key)
		st.put(key, h+"k xx\n"+endLine)
		flushAll(t, a, b, a, b)
		if got := st.counts(key)["k"]; got != 5 {
			t.Fatalf("after a repair: stored %d, want 5", got)
		}
	}
	st.put(key, storedHistory(st, key)[:40])
	flushAll(t, a, b, a, b, a, b)
	if got := st.counts(key)["k"]; got != 5 {
		t.Errorf("after the cut: stored %d, want 5, restored once", got)
	}
}

// TestAnObjectRolledBackIsDamage: an object put back as an older copy of
// itself (a restored backup), or that lost its history's newest lines,
// has the lineage its Counters read but not the pushes they read last. It
// is damage, restored to what they had read, not an overwrite whose lost
// pushes its makers push again: those would be the pushes of a copy's
// own past counted twice, or only the last few pushed again (a Counter
// watches its last keepSent) and the older ones lost.
func TestAnObjectRolledBackIsDamage(t *testing.T) {
	for _, c := range []struct {
		name string
		back func(st *fakeStorage, key, old string)
	}{
		{"an older copy put back", func(st *fakeStorage, key, old string) { st.put(key, old) }},
		{"its newest history lines removed", func(st *fakeStorage, key, _ string) {
			h, rest := splitHistory([]byte(st.raw(key)))
			lines := strings.SplitAfter(string(h.append(nil)), "\n")
			st.put(key, strings.Join(lines[:len(lines)-4], "")+string(rest))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newDamagePair()
			st, a, b, key := p.st, p.a, p.b, p.key
			var repushed int64
			for _, ctr := range []*Counter{a, b} {
				ctr.onRepush = func(_ string, n int64) { repushed += n }
			}
			add(a, "k", Day, 2, t0)
			flushAll(t, a, b)
			old := st.raw(key)
			for i := range 9 {
				add([]*Counter{a, b}[i%2], "k", Day, 2, t0)
				flushAll(t, a, b)
			}
			c.back(st, key, old)
			flushAll(t, a, b, a, b)
			if got := st.counts(key)["k"]; got != 20 || repushed != 0 {
				t.Fatalf("stored k = %d, %d pushed again; want the 20 read before, restored, none pushed again", got, repushed)
			}
			for i, ctr := range []*Counter{a, b} {
				if u := ctr.Used([]byte("k"), Day, t0); u != 20 {
					t.Errorf("counter %d: Used(k) = %d, want 20", i, u)
				}
			}
			if len(p.da)+len(p.db) == 0 {
				t.Errorf("no damage met")
			}
			add(b, "k", Day, 1, t0)
			flushAll(t, b, a, b, a)
			if got := st.counts(key)["k"]; got != 21 {
				t.Errorf("stored k = %d after one more call, want 21", got)
			}
		})
	}
}

// TestACopyFromBeforeARepairPutBackIsDamageToAll: an older copy put back
// after another damage was repaired (the repair starting a new lineage)
// is in a lineage an instance that has not flushed since may have read
// further than the copy holds. The first to push on it starts a new
// lineage, so that instance too takes it as damage, rather than finding
// its pushes after the copy missing from a branch of the old lineage and
// pushing them again on top of a floor that holds them.
func TestACopyFromBeforeARepairPutBackIsDamageToAll(t *testing.T) {
	st, key := newFakeStorage(), objKey(Day, t0)
	clk := newFakeClock(t0)
	var seen []damageMet
	a, b, c := damageCounter(st, clk, &seen), damageCounter(st, clk, &seen), damageCounter(st, clk, &seen)
	var repushed int64
	for _, ctr := range []*Counter{a, b, c} {
		ctr.onRepush = func(_ string, n int64) { repushed += n }
	}
	var total int64
	count := func(ctr *Counter, k string) {
		add(ctr, k, Day, 1, t0)
		total++
	}
	round := func() { // each counts a call and pushes it
		for _, ctr := range []*Counter{a, b, c} {
			count(ctr, "k")
			flushAll(t, ctr)
		}
	}
	round()
	copied := st.raw(key)
	round()
	round()
	whole := st.raw(key)
	st.put(key, whole[:len(whole)/2]) // cut short: a and b repair it
	count(a, "k")
	flushAll(t, a, b)
	count(b, "k")
	flushAll(t, b, a)
	st.put(key, copied) // c, which has not flushed since, read further
	count(a, "k")
	flushAll(t, a)
	count(c, "k")
	flushAll(t, c, b, a, c, b, a)
	// Damage restores what each instance read, the larger per identity:
	// the counts no instance read before the damage may be left out, and
	// none is counted twice.
	if got := st.counts(key)["k"]; got > total || got < 9 || repushed != 0 {
		t.Fatalf("stored k = %d, %d pushed again; want at most the %d counted, at least the 9 read before the damage, none pushed again", got, repushed, total)
	}
}
