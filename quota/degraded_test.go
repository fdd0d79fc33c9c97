package quota

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// transitions records OnDegraded calls.
type transitions struct {
	mu    sync.Mutex
	calls []bool
}

func (tr *transitions) record(degraded bool, err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if degraded != (err != nil) {
		panic("OnDegraded: degraded and err disagree")
	}
	tr.calls = append(tr.calls, degraded)
}

func (tr *transitions) get() []bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.calls)
}

func TestStorageFailureFailsOpenAndLosesNothing(t *testing.T) {
	tests := []struct {
		rule string
		op   string // failing operation
	}{
		{"every operation fails", "*"},
		{"lock fails", "Lock"},
		{"load fails (not ErrNotExist)", "Load"},
		{"store fails", "Store"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			st := newFakeStorage()
			clk := newFakeClock(t0)
			tr := &transitions{}
			c := New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, OnDegraded: tr.record, Periods: []Period{Day}})
			key := objKey(Day, t0)
			add(c, "k", Day, 3, t0)
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}

			st.setFail(tt.op, errDown)
			add(c, "k", Day, 2, t0)
			for i := range 3 {
				if err := c.Flush(t.Context()); !errors.Is(err, errDown) {
					t.Fatalf("failing flush %d: err = %v", i, err)
				}
				if !add(c, "k", Day, 1, t0) {
					t.Fatal("TryAdd refused while degraded")
				}
			}
			if held := st.heldLocks(); len(held) != 0 {
				t.Errorf("locks left held after failures: %v", held)
			}
			s := c.State()
			if !s.Degraded || s.Failures != 3 || s.Pending != 1 || s.LastError == "" || !s.LastErrorTime.Equal(t0) {
				t.Errorf("degraded State = %+v", s)
			}
			if got := c.Used([]byte("k"), Day, t0); got != 8 {
				t.Errorf("Used while degraded = %d, want 8", got)
			}
			if got := tr.get(); !slices.Equal(got, []bool{true}) {
				t.Errorf("OnDegraded calls while failing = %v, want [true]", got)
			}
			if got := st.counts(key)["k"]; got != 3 {
				t.Errorf("stored while failing = %d, want 3", got)
			}

			st.setFail(tt.op, nil)
			if err := c.Flush(t.Context()); err != nil {
				t.Fatalf("flush after recovery: %v", err)
			}
			if got := st.counts(key)["k"]; got != 8 {
				t.Errorf("stored after recovery = %d, want 8 (every count of the outage)", got)
			}
			if got := c.Used([]byte("k"), Day, t0); got != 8 {
				t.Errorf("Used after recovery = %d, want 8", got)
			}
			s = c.State()
			if s.Degraded || s.Pending != 0 || s.Flushes != 2 || s.LastError == "" {
				t.Errorf("recovered State = %+v", s)
			}
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := tr.get(); !slices.Equal(got, []bool{true, false}) {
				t.Errorf("OnDegraded calls = %v, want [true false]", got)
			}
		})
	}
}

func TestUnlockFailureKeepsPushedDeltas(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	c := newTestCounter(st, clk, Day)
	key := objKey(Day, t0)
	add(c, "k", Day, 3, t0)
	st.setFail("Unlock", errDown)
	if err := c.Flush(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("err = %v, want the unlock error", err)
	}
	if !c.State().Degraded {
		t.Error("unlock failure not reported as degraded")
	}
	st.setFail("Unlock", nil)
	add(c, "k", Day, 1, t0)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := st.counts(key)["k"]; got != 4 {
		t.Errorf("stored = %d, want 4 (the stored deltas must not be pushed twice)", got)
	}
}

func TestLoadFailureDegradesButCounts(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	tr := &transitions{}
	c := New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, OnDegraded: tr.record})
	st.setFail("Load", errDown)
	if err := c.Load(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("Load err = %v", err)
	}
	if !add(c, "k", Day, 1, t0) || !c.State().Degraded {
		t.Errorf("after failed Load: State = %+v", c.State())
	}
	st.setFail("Load", nil)
	if err := c.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := tr.get(); !slices.Equal(got, []bool{true, false}) {
		t.Errorf("OnDegraded calls = %v", got)
	}
	if got := c.Used([]byte("k"), Day, t0); got != 1 {
		t.Errorf("Used = %d, want 1 (Load keeps pending counts)", got)
	}
}

// A lock whose Unlock failed is still held (certmagic's file storage keeps
// its file fresh while it exists): the next flushes release it before
// pushing, fail while they cannot, and push everything once they can,
// instead of waiting on this instance's own lock forever.
func TestFailedUnlockIsReleasedByTheNextFlush(t *testing.T) {
	st := newFakeStorage()
	st.stuck = true
	clk := newFakeClock(t0)
	c := New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: []Period{Day}, LockTimeout: 100 * time.Millisecond})
	key := objKey(Day, t0)
	add(c, "k", Day, 3, t0)
	st.setFail("Unlock", errDown)
	if err := c.Flush(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("err = %v, want the unlock error", err)
	}
	add(c, "k", Day, 1, t0)
	if err := c.Flush(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("flush while the unlock still fails: err = %v, want the unlock error", err)
	}
	if held := st.heldLocks(); !slices.Equal(held, []string{key}) {
		t.Fatalf("locks held = %v, want %s", held, key)
	}
	st.setFail("Unlock", nil)
	add(c, "k", Day, 1, t0)
	if err := c.Flush(t.Context()); err != nil {
		t.Fatalf("flush once storage answers: %v", err)
	}
	if got := st.counts(key)["k"]; got != 5 {
		t.Errorf("stored = %d, want 5", got)
	}
	if held := st.heldLocks(); len(held) != 0 {
		t.Errorf("locks held after the flush = %v", held)
	}
	if c.State().Degraded {
		t.Error("still degraded")
	}
}

// SaveKnown releases a lock it could not release before, too.
func TestFailedKnownUnlockIsReleasedByTheNextSave(t *testing.T) {
	st := newFakeStorage()
	st.stuck = true
	c := New(Config{Storage: st, Prefix: testPrefix, LockTimeout: 100 * time.Millisecond})
	st.setFail("Unlock", errDown)
	if err := c.SaveKnown(t.Context(), []KnownEntry{{"aa", 1}}, nil, 0, t0); !errors.Is(err, errDown) {
		t.Fatalf("err = %v, want the unlock error", err)
	}
	if err := c.SaveKnown(t.Context(), []KnownEntry{{"bb", 1}}, nil, 0, t0); !errors.Is(err, errDown) {
		t.Fatalf("save while the unlock still fails: err = %v, want the unlock error", err)
	}
	st.setFail("Unlock", nil)
	if err := c.SaveKnown(t.Context(), []KnownEntry{{"bb", 1}}, nil, 0, t0); err != nil {
		t.Fatalf("save once storage answers: %v", err)
	}
	got, err := c.LoadKnown(t.Context())
	if err != nil || len(got) != 2 {
		t.Errorf("LoadKnown = %v, %v; want aa and bb", got, err)
	}
	if held := st.heldLocks(); len(held) != 0 {
		t.Errorf("locks held = %v", held)
	}
}

// A lock every try finds held, for six lock waits running, is broken: no
// push holds one that long, but certmagic's file storage can keep a
// crashed instance's lock fresh forever. A try that takes it in between
// starts the count again.
func TestLockHeldAtEveryTryIsBroken(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	c := New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: []Period{Day}, LockTimeout: 10 * time.Millisecond})
	key := objKey(Day, t0)
	orphan := func() {
		t.Helper()
		if err := st.Lock(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	flushFails := func(step time.Duration, broken bool) {
		t.Helper()
		clk.Set(clk.Now().Add(step))
		add(c, "k", Day, 1, clk.Now())
		err := c.Flush(t.Context())
		if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "broken") != broken {
			t.Fatalf("after %v: err = %v, want a lock wait that timed out, broken %v", step, err, broken)
		}
	}
	orphan()
	flushFails(0, false)
	flushFails(40*time.Millisecond, false)
	if err := st.Unlock(t.Context(), key); err != nil { // its holder lets go: the count starts again
		t.Fatal(err)
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	orphan()
	flushFails(40*time.Millisecond, false)
	flushFails(40*time.Millisecond, false)
	flushFails(20*time.Millisecond, true)
	if held := st.heldLocks(); len(held) != 0 {
		t.Fatalf("locks held after the break: %v", held)
	}
	if err := c.Flush(t.Context()); err != nil {
		t.Fatalf("flush after the break: %v", err)
	}
	if got := st.counts(key)["k"]; got != 5 {
		t.Errorf("stored = %d, want 5", got)
	}
}

// A push that finds its lock held (another instance pushing) calls
// OnLockWait before it waits, with the counts it is about to push still
// unpushed, so that the owner keeps them where a crash during the wait
// cannot take them, and what it returned once the wait is over; a push
// that takes its lock at once calls neither.
func TestPushCallsOnLockWaitBeforeWaitingForAHeldLock(t *testing.T) {
	st := newFakeStorage()
	clk := newFakeClock(t0)
	var c *Counter
	var waits, ends int
	var kept []Count
	c = New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: []Period{Day}, LockTimeout: 5 * time.Second,
		OnLockWait: func() func() {
			waits++
			kept = c.Unpushed()
			return func() { ends++ }
		}})
	key := objKey(Day, t0)
	add(c, "k", Day, 2, t0)
	if err := c.Flush(t.Context()); err != nil || waits != 0 {
		t.Fatalf("flush with the lock free: err %v, %d waits, want none", err, waits)
	}
	add(c, "k", Day, 3, t0)
	if err := st.Lock(t.Context(), key); err != nil { // another instance's push
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Flush(t.Context()) }()
	time.Sleep(200 * time.Millisecond)
	if err := st.Unlock(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("flush after the wait: %v", err)
	}
	if waits != 1 || ends != 1 || len(kept) != 1 || kept[0].Key != "k" || kept[0].N != 3 {
		t.Fatalf("%d waits (%d ended) keeping %+v; want one, keeping the 3 calls not yet pushed", waits, ends, kept)
	}
	if got := st.counts(key)["k"]; got != 5 {
		t.Errorf("stored = %d, want 5", got)
	}
}
