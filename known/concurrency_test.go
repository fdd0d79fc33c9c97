package known

import (
	"sync"
	"testing"
	"time"
)

func TestConcurrentUseKeepsTheSetConsistent(t *testing.T) {
	const goroutines, ops, max, keys = 8, 2000, 50, 200
	s := New(max, time.Second, hashFP)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range ops {
				k := (g*7919 + i*31) % keys
				now := t0.Add(time.Duration(i) * time.Millisecond)
				switch i % 10 {
				case 0:
					s.Forget(fp(k))
				case 1:
					s.Sweep(now)
				case 2:
					s.Each(func([16]byte, time.Time) {})
				case 3:
					s.Restore(fp(k), now.Add(-time.Second/2), now)
				case 4, 5, 6:
					s.Prove(fp(k), now)
				default:
					s.Proven(fp(k), now)
				}
			}
		})
	}
	wg.Wait()
	checkInvariants(t, s)
	if got := s.Len(); got > max {
		t.Fatalf("Len() = %d, want <= %d", got, max)
	}
}
