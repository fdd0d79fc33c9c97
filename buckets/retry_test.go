package buckets

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestRetryAfterWaitSucceeds checks the promise behind wait on random
// schedules: a request refused with wait w is admitted at now+w, when nothing
// else has used the bucket meanwhile.
func TestRetryAfterWaitSucceeds(t *testing.T) {
	rates := []rate.Limit{0.001, 0.3, 1, 3, 7, 1000, 1e6}
	tests := []struct {
		name string
		seed uint64
	}{
		{"a refused request is admitted when retried after its wait (schedule 1)", 1},
		{"a refused request is admitted when retried after its wait (schedule 2)", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(tt.seed, 0))
			s := New(8, HashFingerprint)
			now := t0
			refusals := 0
			for i := range 20000 {
				lim := Limit{Rate: rates[rnd.IntN(len(rates))], Burst: 1 + rnd.IntN(1000)}
				key := fp(i % 4)
				now = now.Add(time.Duration(rnd.Int64N(int64(10 * time.Millisecond))))
				n := 1 + rnd.IntN(lim.Burst)
				_, wait, ok, _ := s.Reserve(key, lim, n, now)
				if ok {
					continue
				}
				refusals++
				if _, _, ok, _ := s.Reserve(key, lim, n, now.Add(wait)); !ok {
					t.Fatalf("step %d: n=%d %+v refused with wait %v, and again after it", i, n, lim, wait)
				}
				now = now.Add(wait)
			}
			if refusals < 1000 {
				t.Fatalf("only %d refusals: not a useful schedule", refusals)
			}
		})
	}
}
