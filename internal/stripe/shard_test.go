package stripe

import (
	"testing"
	"time"
)

func TestShardIndexesFitTheCount(t *testing.T) {
	for _, size := range []int{1, 7, 8, 100, 1000, 100000, 1 << 30} {
		n := Count(size)
		if n < 1 || n > Max || n&(n-1) != 0 {
			t.Fatalf("Count(%d) = %d: not a power of two within 1..%d", size, n, Max)
		}
		if idx := Mix(12345) >> Shift(n); idx >= uint64(n) {
			t.Fatalf("index %d out of %d shards", idx, n)
		}
	}
}

func TestClockRoundTrips(t *testing.T) {
	var c Clock
	t0 := time.Unix(1000, 0)
	if c.Since(t0) != 0 {
		t.Fatal("the first time seen is the epoch")
	}
	t1 := t0.Add(1500 * time.Millisecond)
	if got := c.Time(c.Since(t1)); !got.Equal(t1) {
		t.Fatalf("round trip gave %v, want %v", got, t1)
	}
}
