package known

import (
	"testing"
	"time"
)

// A Sweep over many shards tells OnLapse of each expired key once.
func TestSweepTellsOfEachLapsedKeyOnce(t *testing.T) {
	const ttl = 10 * time.Second
	s := New[[16]byte](512, ttl, hashFP) // many shards
	heard := map[[16]byte]int{}
	s.OnLapse(func(key [16]byte, _ time.Time, _ bool) { heard[key]++ })
	const n = 200
	for i := range n {
		s.Prove(fp(i), t0)
	}
	if got := s.Sweep(t0.Add(ttl)); got != n {
		t.Fatalf("Sweep removed %d, want %d", got, n)
	}
	calls := 0
	for _, c := range heard {
		calls += c
	}
	if len(heard) != n || calls != n {
		t.Errorf("OnLapse heard %d keys in %d calls, want %d in %d", len(heard), calls, n, n)
	}
}
