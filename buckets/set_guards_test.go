package buckets

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// A negative Burst is treated as 0 (see Limit): a bucket moved to one and
// back holds no debt below empty: under burst 0 it earns nothing, and back
// under 5 its first token comes 1/rate later.
func TestANegativeBurstLeavesNoDebt(t *testing.T) {
	s := New(8, HashFingerprint)
	run(t, s, []step{
		{key: 1, lim: Limit{Rate: 1, Burst: 5}, n: 1, ok: true},
		{key: 1, lim: Limit{Rate: 1, Burst: -5}, n: 1, wait: anyWait},
		{at: time.Second, key: 1, lim: Limit{Rate: 1, Burst: 5}, n: 1, wait: time.Second},
		{at: 2 * time.Second, key: 1, lim: Limit{Rate: 1, Burst: 5}, n: 1, ok: true},
	})
}

// Wait under a Rate of rate.Inf admits everything, whatever the Burst (0
// with rate.Inf is how rate.Limiter says unlimited), as Reserve does.
func TestWaitUnderAnInfiniteRateIsZero(t *testing.T) {
	s := New(8, HashFingerprint)
	for _, burst := range []int{0, 1} {
		if wait, ok := s.Wait(fp(1), Limit{Rate: rate.Inf, Burst: burst}, 5, t0); !ok || wait != 0 {
			t.Errorf("Wait(n=5) under rate.Inf, burst %d = %v, %v; want 0, true", burst, wait, ok)
		}
	}
}

// A bucket full at a limits change may go at once, unused since (see
// untilDroppable): only one not full then waits for the longest refill.
func TestABucketFullAtTheChangeIsSweptAtOnce(t *testing.T) {
	s := New(10, HashFingerprint)
	lim := Limit{Rate: 1, Burst: 2}
	if _, _, ok, _ := s.Reserve(fp(1), lim, 1, t0); !ok {
		t.Fatal("reservation refused")
	}
	s.Advance(t0.Add(5*time.Second), 20*time.Minute, 1.0/60, 2) // full by then
	if n := s.Sweep(t0.Add(6 * time.Second)); n != 1 {
		t.Errorf("Sweep dropped %d buckets, want the one full at the change", n)
	}
}

// A Rebase when no limit is in force (slowest 0: the layer is off in every
// holder) keeps the slowest rate and largest burst of the last change: a
// bucket unused since that change is credited at them by the next one.
func TestRebaseWithoutLimitsKeepsTheSlowestRate(t *testing.T) {
	s := New(10, HashFingerprint)
	lim := Limit{Rate: 1, Burst: 5}
	if _, _, ok, _ := s.Reserve(fp(1), lim, 5, t0); !ok {
		t.Fatal("draining reservation refused")
	}
	s.Advance(t0, time.Minute, 1, 5)
	s.Rebase(t0.Add(time.Second), [][16]byte{fp(2)}, 0, 0)
	s.Advance(t0.Add(3*time.Second), time.Minute, 1, 5)
	if got, _ := s.Tokens(fp(1), t0.Add(3*time.Second)); got != 3 {
		t.Errorf("Tokens after the second change = %v, want 3 (3s at the slowest rate, 1/s)", got)
	}
}

// Acquire of less than one unit counts nothing and keeps no key.
func TestGaugeAcquireOfNothingKeepsNoKey(t *testing.T) {
	g := NewGauge(HashFingerprint)
	for _, n := range []int{0, -1} {
		if g.Acquire(fp(1), n, 5) {
			t.Errorf("Acquire(n=%d) = true, want false", n)
		}
	}
	if g.Len() != 0 || g.Count(fp(1)) != 0 {
		t.Errorf("Len = %d, Count = %d after refused Acquires; want 0, 0", g.Len(), g.Count(fp(1)))
	}
}

// Wait and TokensUnder treat a negative Burst as 0 too: Wait, which moves
// the bucket to the limit it is given, leaves it no debt, and TokensUnder
// finds no level below empty.
func TestWaitAndTokensUnderANegativeBurst(t *testing.T) {
	s := New(8, HashFingerprint)
	five, negative := Limit{Rate: 1, Burst: 5}, Limit{Rate: 1, Burst: -5}
	if _, _, ok, _ := s.Reserve(fp(1), five, 1, t0); !ok {
		t.Fatal("reservation refused")
	}
	if got, ok := s.TokensUnder(fp(1), negative, t0); !ok || got != 0 {
		t.Errorf("TokensUnder a negative burst = %v, %v; want 0, true", got, ok)
	}
	if _, ok := s.Wait(fp(1), negative, 1, t0); ok {
		t.Error("Wait under a negative burst admits")
	}
	run(t, s, []step{
		{at: time.Second, key: 1, lim: five, n: 1, wait: time.Second},
		{at: 2 * time.Second, key: 1, lim: five, n: 1, ok: true},
	})
}

// TokensUnder applies the limit it is given: a lower burst caps the level
// Tokens reports, and the bucket itself is left as it is.
func TestTokensUnderALowerBurstIsCapped(t *testing.T) {
	s := New(8, HashFingerprint)
	if _, _, ok, _ := s.Reserve(fp(1), Limit{Rate: 1, Burst: 5}, 1, t0); !ok {
		t.Fatal("reservation refused")
	}
	if got, ok := s.TokensUnder(fp(1), Limit{Rate: 1, Burst: 2}, t0); !ok || got != 2 {
		t.Errorf("TokensUnder burst 2 = %v, %v; want 2, true", got, ok)
	}
	if got, _ := s.Tokens(fp(1), t0); got != 4 {
		t.Errorf("Tokens after TokensUnder = %v, want 4 (the bucket untouched)", got)
	}
}
