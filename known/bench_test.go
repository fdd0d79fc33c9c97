package known

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func BenchmarkProven(b *testing.B) {
	b.Run("existing key", func(b *testing.B) {
		s := New(100_000, time.Hour, hashFP)
		for i := range 100_000 {
			s.Prove(fp(i), t0)
		}
		key, now := fp(42), t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			s.Proven(key, now)
		}
	})
	b.Run("unknown key", func(b *testing.B) {
		s := New(100_000, time.Hour, hashFP)
		key, now := fp(-1), t0
		b.ReportAllocs()
		for b.Loop() {
			s.Proven(key, now)
		}
	})
}

// BenchmarkProveFlood proves a new key each time into a full set: every
// Prove evicts the least recently used entry of its shard.
func BenchmarkProveFlood(b *testing.B) {
	s := New(100_000, time.Hour, hashFP)
	i, now := 0, t0
	b.ReportAllocs()
	for b.Loop() {
		i++
		now = now.Add(time.Microsecond)
		s.Prove(fp(i), now)
	}
}

// BenchmarkBytesPerEntry reports the heap held per entry by a full Set (the
// benchmark time itself is meaningless). Run with -benchtime=1x.
func BenchmarkBytesPerEntry(b *testing.B) {
	for _, n := range []int{100_000, 300_000} {
		b.Run(fmt.Sprintf("fingerprint keys/%d", n), func(b *testing.B) {
			var before, after runtime.MemStats
			var s *Set[[16]byte]
			for b.Loop() {
				s = nil
				runtime.GC()
				runtime.ReadMemStats(&before)
				s = New(n, time.Hour, hashFP)
				for i := range n {
					s.Prove(fp(i), t0)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
			}
			runtime.KeepAlive(s)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/entry")
		})
	}
}
