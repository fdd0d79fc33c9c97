package buckets

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestMatchesRateLimiter replays random schedules, with live limit changes,
// against a rate.Limiter and a bucket of a Set: they must take the same
// decisions and hold the same tokens at every step.
func TestMatchesRateLimiter(t *testing.T) {
	rates := []rate.Limit{0, 0.5, 1, 3, 7, 100}
	tests := []struct {
		name  string
		seed  uint64
		moves bool // the key moves to other limits (a tier), with no Advance
	}{
		{"a bucket decides as rate.Limiter.AllowN does (schedule 1)", 1, false},
		{"a bucket decides as rate.Limiter.AllowN does (schedule 2)", 2, false},
		{"a bucket decides as rate.Limiter.AllowN does (schedule 3)", 3, false},
		{"a key moving between limits decides as rate.Limiter.SetLimitAt has it (schedule 4)", 4, true},
		{"a key moving between limits decides as rate.Limiter.SetLimitAt has it (schedule 5)", 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(tt.seed, 0))
			lim := Limit{Rate: 3, Burst: 5}
			ref := rate.NewLimiter(lim.Rate, lim.Burst)
			s := New(8, HashFingerprint)
			now := t0
			// Both start with one token taken: from then on the bucket exists
			// (absent would mean full at whatever Limit comes next).
			ref.AllowN(now, 1)
			s.Reserve(fp(0), lim, 1, now)
			admitted := 0
			rates := rates
			if tt.moves {
				// Config never sets a rate of 0; a bucket without a rate
				// is one Rebase left to learn its next limit.
				rates = rates[1:]
			}
			for i := range 5000 {
				now = now.Add(time.Duration(rnd.Int64N(int64(time.Second))))
				if next := (Limit{Rate: rates[rnd.IntN(len(rates))], Burst: rnd.IntN(11)}); rnd.IntN(10) == 0 && next != lim {
					lim = next // as the Set does: retune only on a change
					if !tt.moves {
						s.Advance(now, time.Hour, next.Rate, next.Burst) // as a zone does at a config change
					}
					ref.SetLimitAt(now, lim.Rate)
					ref.SetBurstAt(now, lim.Burst)
				}
				n := 1 + rnd.IntN(lim.Burst+2)
				want := ref.AllowN(now, n)
				_, _, got, _ := s.Reserve(fp(0), lim, n, now)
				if got != want {
					t.Fatalf("step %d: Reserve(n=%d, %+v) ok=%v, rate.Limiter says %v", i, n, lim, got, want)
				}
				tokens, _ := s.Tokens(fp(0), now)
				if wantTokens := ref.TokensAt(now); tokens != wantTokens {
					t.Fatalf("step %d: Tokens = %v, rate.Limiter has %v", i, tokens, wantTokens)
				}
				if got {
					admitted++
				}
			}
			if admitted == 0 || admitted == 5000 {
				t.Fatalf("schedule admitted %d of 5000: not a useful comparison", admitted)
			}
		})
	}
}
