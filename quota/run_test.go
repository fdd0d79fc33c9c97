package quota

import (
	"context"
	"testing"
	"time"
)

// waitFor fails the test when ch does not deliver within a generous bound.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestRunFlushesOnExit(t *testing.T) {
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0), Day)
	add(c, "k", Day, 3, t0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx, time.Hour); close(done) }()
	cancel()
	waitFor(t, done, "Run to return")
	if got := st.counts(objKey(Day, t0))["k"]; got != 3 {
		t.Errorf("stored after Run exit = %d, want 3", got)
	}
	if c.Interval() != time.Hour {
		t.Errorf("Interval = %v", c.Interval())
	}
}

func TestSetIntervalIsLive(t *testing.T) {
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0), Day)
	stored := make(chan struct{}, 1)
	st.setHook(func(op, _ string) {
		if op == "Store" {
			select {
			case stored <- struct{}{}:
			default:
			}
		}
	})
	add(c, "k", Day, 1, t0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	c.SetInterval(time.Hour)
	go func() { c.Run(ctx, 0); close(done) }()
	c.SetInterval(time.Millisecond) // Run waits an hour: this must cut it short
	waitFor(t, stored, "a periodic flush after SetInterval")
	cancel()
	waitFor(t, done, "Run to return")

	tests := []struct {
		rule string
		set  time.Duration
		want time.Duration
	}{
		{"positive interval is used", 5 * time.Second, 5 * time.Second},
		{"zero restores the default", 0, DefaultInterval},
		{"negative restores the default", -time.Second, DefaultInterval},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			c.SetInterval(tt.set)
			if got := c.Interval(); got != tt.want {
				t.Errorf("Interval = %v, want %v", got, tt.want)
			}
		})
	}
}
