package quota

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// pausedStorage is a writer's view of fakeStorage while it pauses past its
// lock: the lock it took was broken and others push meanwhile. Its Lock
// and Unlock succeed without holding anything, and beforeStore runs once,
// inside its store, before the write, as the others' pushes during the
// pause; afterLoad runs once, after its next load.
type pausedStorage struct {
	*fakeStorage
	beforeStore func()
	afterLoad   func()
}

func (s *pausedStorage) Load(ctx context.Context, key string) ([]byte, error) {
	data, err := s.fakeStorage.Load(ctx, key)
	if f := s.afterLoad; f != nil {
		s.afterLoad = nil
		f()
	}
	return data, err
}

func (s *pausedStorage) Lock(context.Context, string) error   { return nil }
func (s *pausedStorage) Unlock(context.Context, string) error { return nil }

func (s *pausedStorage) Store(ctx context.Context, key string, value []byte) error {
	if f := s.beforeStore; f != nil {
		s.beforeStore = nil
		f()
	}
	return s.fakeStorage.Store(ctx, key, value)
}

// repushCounter returns a Counter on st that records what it pushes again.
func repushCounter(st Storage, clk *fakeClock, repushed *[]int64) *Counter {
	return New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: []Period{Day},
		LockTimeout: 5e9, OnRepush: func(_ string, n int64) { *repushed = append(*repushed, n) }})
}

// trio is two Counters on one storage and a third whose writes pause
// there (see pausedStorage), each recording what it pushes again, after
// the first pushed 100 for k.
type trio struct {
	st         *fakeStorage
	clk        *fakeClock
	paused     *pausedStorage
	a, b, c    *Counter
	ra, rb, rc []int64
}

func newTrio(t *testing.T) *trio {
	t.Helper()
	tr := &trio{st: newFakeStorage(), clk: newFakeClock(t0)}
	clk := tr.clk
	tr.paused = &pausedStorage{fakeStorage: tr.st}
	tr.a, tr.b = repushCounter(tr.st, clk, &tr.ra), repushCounter(tr.st, clk, &tr.rb)
	tr.c = repushCounter(tr.paused, clk, &tr.rc)
	add(tr.a, "k", Day, 100, t0)
	flushAll(t, tr.a)
	return tr
}

func flushAll(t *testing.T, cs ...*Counter) {
	t.Helper()
	for i, c := range cs {
		if err := c.Flush(t.Context()); err != nil {
			t.Fatalf("flush %d: %v", i, err)
		}
	}
}

// TestPushOverwrittenByAPausedWriterIsPushedAgain: a writer paused between
// its load and its store (a frozen VM, past the lock that others then
// broke) stores its merge over the pushes made meanwhile; their makers
// find their pushes missing from the object's history at their next flush
// and push them again, so the stored total is the sum once more.
func TestPushOverwrittenByAPausedWriterIsPushedAgain(t *testing.T) {
	tr := newTrio(t)
	st, paused, a, b, c := tr.st, tr.paused, tr.a, tr.b, tr.c
	add(c, "k", Day, 10, t0)
	add(a, "k", Day, 20, t0)
	add(b, "k", Day, 5, t0)
	add(b, "other", Day, 3, t0)
	paused.beforeStore = func() { flushAll(t, a, b) }
	flushAll(t, c)
	if got := st.counts(objKey(Day, t0))["k"]; got != 110 {
		t.Fatalf("stored after the paused write = %d, want 110 (the others' 25 overwritten)", got)
	}
	flushAll(t, a, b, c, a, b, c, a) // finding it, pushing it again, reading it
	want := map[string]int64{"k": 135, "other": 3}
	got := st.counts(objKey(Day, t0))
	if got["k"] != want["k"] || got["other"] != want["other"] {
		t.Errorf("stored = %v, want %v: the overwritten pushes pushed again", got, want)
	}
	for i, ctr := range []*Counter{a, b, c} {
		if u := ctr.Used([]byte("k"), Day, t0); u != 135 {
			t.Errorf("counter %d: Used(k) = %d, want 135", i, u)
		}
	}
	if !slices.Equal(tr.ra, []int64{20}) || !slices.Equal(tr.rb, []int64{8}) || len(tr.rc) != 0 {
		t.Errorf("pushed again: a %v, b %v, c %v; want [20], [8] and none", tr.ra, tr.rb, tr.rc)
	}
	flushAll(t, a, b, c)
	if got := st.counts(objKey(Day, t0)); got["k"] != 135 || len(tr.ra)+len(tr.rb)+len(tr.rc) != 2 {
		t.Errorf("after one more round: stored %v, pushed again a %v b %v c %v; want 135 and nothing more", got, tr.ra, tr.rb, tr.rc)
	}
}

// TestPushOverwrittenAfterItsMakerReadItIsPushedAgain: the pushes made
// while a writer pauses inside its store may have been read back by their
// makers many times before the paused writer's store lands over them: they
// are still found missing, and pushed again.
func TestPushOverwrittenAfterItsMakerReadItIsPushedAgain(t *testing.T) {
	tr := newTrio(t)
	st, paused, a, b, c := tr.st, tr.paused, tr.a, tr.b, tr.c
	add(c, "k", Day, 5, t0)
	add(b, "k", Day, 10, t0)
	paused.beforeStore = func() {
		flushAll(t, b)
		add(a, "k", Day, 1, t0)
		flushAll(t, a, b, a, b, a, b) // pushed, and read back again and again
		if got := st.counts(objKey(Day, t0))["k"]; got != 111 {
			t.Fatalf("stored during the pause = %d, want 111", got)
		}
	}
	flushAll(t, c)
	flushAll(t, a, b, c, a, b, c)
	if got := st.counts(objKey(Day, t0))["k"]; got != 116 {
		t.Errorf("stored = %d, want 116: the overwritten pushes pushed again", got)
	}
	if !slices.Equal(tr.ra, []int64{1}) || !slices.Equal(tr.rb, []int64{10}) || len(tr.rc) != 0 {
		t.Errorf("pushed again: a %v, b %v, c %v; want [1], [10] and none", tr.ra, tr.rb, tr.rc)
	}
}

// TestAPushPausedPastItsLeaseIsNotStored: a writer that finds, before its
// store, that more than pushLease went by since it took the lock (it
// paused, and another instance may have broken the lock and pushed) stores
// nothing: its flush fails, its deltas stay pending, and its next flush
// adds them to what the others pushed meanwhile. Nothing is overwritten,
// so nothing is pushed again.
func TestAPushPausedPastItsLeaseIsNotStored(t *testing.T) {
	tr := newTrio(t)
	st, paused, a, c, clk := tr.st, tr.paused, tr.a, tr.c, tr.clk
	add(c, "k", Day, 10, t0)
	add(a, "k", Day, 20, t0)
	paused.afterLoad = func() {
		clk.Set(clk.Now().Add(pushLease + time.Second))
		flushAll(t, a)
	}
	if err := c.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("the paused push: %v, want it not stored", err)
	}
	if got := st.counts(objKey(Day, t0))["k"]; got != 120 {
		t.Fatalf("stored after the paused push = %d, want the other's 120 left alone", got)
	}
	flushAll(t, c, a)
	if got := st.counts(objKey(Day, t0))["k"]; got != 130 {
		t.Errorf("stored = %d, want 130", got)
	}
	if u := c.Used([]byte("k"), Day, t0); u != 130 || len(tr.ra)+len(tr.rc) != 0 {
		t.Errorf("Used(k) = %d, pushed again a %v c %v; want 130 and nothing pushed again", u, tr.ra, tr.rc)
	}
}

// TestPushesNoHistoryCanTellAboutAreNotPushedAgain: an object a version
// without history stored (which keeps the counts it read but not the
// history), and one whose history no longer reaches back to a push, cannot
// tell whether the push is in it: it is taken as stored, never pushed
// twice.
func TestPushesNoHistoryCanTellAboutAreNotPushedAgain(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	var ra, rb []int64
	a, b := repushCounter(st, clk, &ra), repushCounter(st, clk, &rb)
	add(a, "k", Day, 7, t0)
	flushAll(t, a)
	st.put(objKey(Day, t0), "k 7\nx 1\n") // an older version's push of x
	add(b, "y", Day, 1, t0)
	flushAll(t, b, a) // b's push starts a new history
	if len(rb) != 0 {
		t.Fatalf("b pushed again %v", rb)
	}
	if got := st.counts(objKey(Day, t0))["k"]; got != 7 || len(ra) != 0 {
		t.Fatalf("after an older version's write: stored %d, pushed again %v; want 7 and nothing", got, ra)
	}

	add(a, "k", Day, 1, t0)
	flushAll(t, a)
	for i := range historyLen + 10 {
		add(b, fmt.Sprintf("b%d", i), Day, 1, t0)
		flushAll(t, b)
	}
	flushAll(t, a)
	if got := st.counts(objKey(Day, t0))["k"]; got != 8 || len(ra) != 0 || len(rb) != 0 {
		t.Errorf("after %d pushes of another: stored %d, pushed again %v %v; want 8 and nothing", historyLen+10, got, ra, rb)
	}
}

// TestWatchedPushesAreBounded: a Counter watches its last keepSent pushes
// to an object, no more than keepSentCounts keys of them, but for its last
// push until it reads the object again, however many it pushed.
func TestWatchedPushesAreBounded(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	var repushed []int64
	c := repushCounter(st, clk, &repushed)
	watched := func() (pushes, keys int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, b := range c.buckets {
			for _, p := range b.sent {
				pushes, keys = pushes+1, keys+len(p.deltas)
			}
		}
		return pushes, keys
	}
	for i := range 3 * keepSent {
		add(c, fmt.Sprintf("k%d", i), Day, 1, t0)
		flushAll(t, c)
	}
	if n, _ := watched(); n != keepSent {
		t.Fatalf("after %d pushes of a key: %d watched, want %d", 3*keepSent, n, keepSent)
	}
	for i := range 3 {
		for k := range keepSentCounts/2 + 1 {
			add(c, fmt.Sprintf("b%d-%d", i, k), Day, 1, t0)
		}
		flushAll(t, c)
	}
	if n, keys := watched(); n != 2 || keys != 2*(keepSentCounts/2+1) {
		t.Fatalf("after pushes of %d keys: %d watched, %d keys; want the last and the one before it", keepSentCounts/2+1, n, keys)
	}
	for k := range keepSentCounts + 1 {
		add(c, fmt.Sprintf("c%d", k), Day, 1, t0)
	}
	flushAll(t, c)
	if n, keys := watched(); n != 2 || keys != keepSentCounts+1+keepSentCounts/2+1 {
		t.Fatalf("after a push of %d keys: %d watched, %d keys; want that push and the one before", keepSentCounts+1, n, keys)
	}
	flushAll(t, c) // a read
	if n, _ := watched(); n != 0 {
		t.Fatalf("after a read: %d watched, want none: the last push is over the bound", n)
	}
	if len(repushed) != 0 {
		t.Fatalf("pushed again: %v", repushed)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	h, gen := history{}.next("w1")
	if gen != 1 || h.lineage == "" {
		t.Fatalf("first push: gen %d, lineage %q", gen, h.lineage)
	}
	for i := range historyLen + 5 {
		h, gen = h.next(fmt.Sprintf("w%d", i+2))
	}
	if len(h.entries) != historyLen || gen != historyLen+6 || h.entries[historyLen-1].gen != gen {
		t.Fatalf("after %d pushes: %d entries, gen %d", historyLen+6, len(h.entries), gen)
	}
	data := append(h.append(nil), "k 3\n"...)
	got, rest := splitHistory(data)
	if got.lineage != h.lineage || !slices.Equal(got.entries, h.entries) || string(rest) != "k 3\n" {
		t.Errorf("splitHistory read %+v and %q", got, rest)
	}
	// An object a push stored ends with the end line; one with a history
	// and without it was cut short: one malformed line more.
	for _, c := range []struct {
		data, counts string
		lineage      string
		cut          int
	}{
		{string(h.append(nil)) + endLine, "", h.lineage, 0},
		{string(h.append(nil)) + "k 3\n" + endLine, "k 3\n", h.lineage, 0},
		{string(h.append(nil)) + "k 3\n", "k 3\n", h.lineage, 1},
		{string(h.append(nil)), "", h.lineage, 1},
		{"k 3\n", "k 3\n", "", 0},
	} {
		got, counts, cut := splitObject([]byte(c.data))
		if string(counts) != c.counts || got.lineage != c.lineage || cut != c.cut {
			t.Errorf("splitObject(%q) = %+v, %q, %d; want lineage %q, counts %q, %d", c.data, got, counts, cut, c.lineage, c.counts, c.cut)
		}
	}
	for _, bad := range []string{"# w 1 x\nk 3\n", "# lineage a\n# w x y\nk 3\n", "# other\nk 3\n"} {
		if got, rest := splitHistory([]byte(bad)); got.lineage != "" || string(rest) != bad {
			t.Errorf("splitHistory(%q) = %+v, %q; want no history and the data as is", bad, got, rest)
		}
	}
}
