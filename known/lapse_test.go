package known

import (
	"slices"
	"testing"
	"time"
)

// OnLapse hears of every key the Set drops unasked: found expired by
// Proven or Sweep, or evicted beyond the maximum; not of a Forget.
func TestOnLapseHearsOfKeysDroppedUnasked(t *testing.T) {
	const ttl = 10 * time.Second
	s := New[[16]byte](2, ttl, hashFP)
	var lapsed, evictions []int
	s.OnLapse(func(key [16]byte, _ time.Time, evicted bool) {
		for i := range 10 {
			if key == fp(i) {
				lapsed = append(lapsed, i)
				if evicted {
					evictions = append(evictions, i)
				}
			}
		}
	})
	s.Prove(fp(1), t0)
	s.Prove(fp(2), t0.Add(time.Second))
	s.Prove(fp(3), t0.Add(2*time.Second)) // evicts 1, the least recently used
	if !slices.Equal(lapsed, []int{1}) {
		t.Fatalf("after an eviction: lapsed %v, want [1]", lapsed)
	}
	s.Forget(fp(2))
	if !slices.Equal(lapsed, []int{1}) {
		t.Fatalf("after a Forget: lapsed %v, want still [1]", lapsed)
	}
	s.Prove(fp(4), t0.Add(3*time.Second))
	if s.Proven(fp(3), t0.Add(2*time.Second+ttl)) {
		t.Fatal("3 proven a TTL after its last use")
	}
	if !slices.Equal(lapsed, []int{1, 3}) {
		t.Fatalf("after Proven found 3 expired: lapsed %v, want [1 3]", lapsed)
	}
	if n := s.Sweep(t0.Add(3*time.Second + ttl)); n != 1 {
		t.Fatalf("Sweep removed %d, want 1", n)
	}
	if !slices.Equal(lapsed, []int{1, 3, 4}) {
		t.Fatalf("after a Sweep: lapsed %v, want [1 3 4]", lapsed)
	}
	if !slices.Equal(evictions, []int{1}) {
		t.Fatalf("evictions %v, want [1]: the others expired", evictions)
	}
}
