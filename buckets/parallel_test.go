package buckets

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestConcurrentReserveIsExact(t *testing.T) {
	const goroutines, perGoroutine, burst = 8, 400, 1000
	tests := []struct {
		name        string
		keys        int
		cancelEvery int // cancel every cancelEvery-th admitted reservation; 0: never
	}{
		{"one hot key hands out exactly its burst", 1, 0},
		{"many keys each hand out exactly what was asked", 16, 0},
		{"tokens given back by Cancel are handed out again exactly", 1, 3},
	}
	lim := Limit{Rate: 0, Burst: burst} // no refill: every token is accounted for
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(1000, HashFingerprint)
			net := make([]atomic.Int64, tt.keys)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			go func() { // a sweeper and a reader race with the reservations
				for {
					select {
					case <-stop:
						return
					default:
						s.Sweep(t0)
						s.Len()
					}
				}
			}()
			for g := range goroutines {
				wg.Go(func() {
					for j := range perGoroutine {
						k := (g + j) % tt.keys
						res, _, ok, _ := s.Reserve(fp(k), lim, 1, t0)
						if !ok {
							continue
						}
						net[k].Add(1)
						if tt.cancelEvery > 0 && j%tt.cancelEvery == 0 {
							res.Cancel(t0)
							net[k].Add(-1)
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			for k := range tt.keys {
				tokens, _ := s.Tokens(fp(k), t0)
				if got, want := tokens, float64(burst-net[k].Load()); got != want {
					t.Errorf("key %d: %v tokens left, want %v", k, got, want)
				}
			}
			if attempts := goroutines * perGoroutine / tt.keys; tt.cancelEvery == 0 {
				if got, want := net[0].Load(), int64(min(attempts, burst)); got != want {
					t.Errorf("key 0 admitted %d, want %d", got, want)
				}
			}
		})
	}
}

// New keys taken in at once by different shards never together pass the
// capacity: the check and the count are one step. Buckets that never
// refill are never full, so none can be evicted to make room.
func TestConcurrentNewKeysNeverPassTheCapacity(t *testing.T) {
	const capacity, goroutines, rounds = 64, 16, 200
	lim := Limit{Rate: 0, Burst: 2}
	for round := range rounds {
		s := New(capacity, HashFingerprint)
		var wg sync.WaitGroup
		var most atomic.Int64
		for g := range goroutines {
			wg.Go(func() {
				for j := range capacity / goroutines * 2 {
					s.Reserve(fp(round*100000+g*1000+j), lim, 1, t0)
					for n := int64(s.Len()); n > most.Load(); {
						if most.CompareAndSwap(most.Load(), n) {
							break
						}
					}
				}
			})
		}
		wg.Wait()
		if n := s.Len(); n != capacity || most.Load() > capacity {
			t.Fatalf("round %d: %d buckets (at most %d meanwhile) in a Set of capacity %d", round, n, most.Load(), capacity)
		}
	}
}
