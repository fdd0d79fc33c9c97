package quota

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Probe takes and releases the lock of the first period's object: a
// storage that cannot take it marks the Counter degraded, one whose lock
// another instance holds changes nothing, and a healthy one leaves no lock
// behind, without waiting for a held lock.
func TestProbeFindsAStorageThatCannotWrite(t *testing.T) {
	for _, tt := range []struct {
		rule      string
		fail      string // the failing operation, if any
		heldElse  bool   // another instance holds the lock
		loadFails bool   // a Load failed before the probe
		degraded  bool
		wantCalls []bool
	}{
		{rule: "a storage that writes stays healthy"},
		{rule: "a lock that cannot be taken marks it degraded", fail: "Lock", degraded: true, wantCalls: []bool{true}},
		{rule: "a lock that cannot be released marks it degraded", fail: "Unlock", degraded: true, wantCalls: []bool{true}},
		{rule: "a lock held elsewhere says nothing", heldElse: true},
		{rule: "a probe that passes leaves a failed load degraded", loadFails: true, degraded: true, wantCalls: []bool{true}},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			st := newFakeStorage()
			st.stuck = true
			tr := &transitions{}
			c := New(Config{Storage: st, Prefix: testPrefix, Clock: newFakeClock(t0).Now, OnDegraded: tr.record, Periods: []Period{Month, Day}})
			key := objKey(Month, t0)
			if tt.loadFails {
				st.setFail("Load", errDown)
				if c.Load(t.Context()) == nil {
					t.Fatal("Load on a failing storage succeeded")
				}
				st.setFail("Load", nil)
			}
			if tt.heldElse {
				if err := st.Lock(t.Context(), key); err != nil {
					t.Fatal(err)
				}
			}
			var locked []string
			st.hook = func(op, name string) {
				if op == "Lock" {
					locked = append(locked, name)
				}
			}
			if tt.fail != "" {
				st.setFail(tt.fail, errDown)
			}
			// A held lock is tried once, briefly: the probe must not wait
			// for its caller's context (a zone's start would wait for its
			// load timeout), which here ends by cancellation, an error.
			ctx, cancel := context.WithCancel(t.Context())
			defer time.AfterFunc(5*time.Second, cancel).Stop()
			err := c.Probe(ctx)
			if failed := tt.fail != ""; failed != (err != nil) || failed && !errors.Is(err, errDown) {
				t.Fatalf("Probe: %v, want an error: %v", err, failed)
			}
			if s := c.State(); s.Degraded != tt.degraded || err != nil && s.LastError != err.Error() {
				t.Fatalf("state %+v after Probe: %v, want degraded %v", s, err, tt.degraded)
			}
			if got := tr.get(); !slices.Equal(got, tt.wantCalls) {
				t.Fatalf("OnDegraded calls %v, want %v", got, tt.wantCalls)
			}
			if !slices.Equal(locked, []string{key}) {
				t.Fatalf("locks tried %q, want the first period's object %q", locked, key)
			}
			if tt.fail == "" && !tt.heldElse {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				if st.Lock(ctx, key) != nil {
					t.Fatal("Probe left its lock held")
				}
			}
		})
	}
}

// Probe does nothing without a storage.
func TestProbeWithoutStorage(t *testing.T) {
	c := New(Config{Clock: newFakeClock(t0).Now})
	if err := c.Probe(t.Context()); err != nil || c.State().Degraded {
		t.Fatalf("Probe without storage: %v, %+v", err, c.State())
	}
}
