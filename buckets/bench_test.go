package buckets

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func BenchmarkReserve(b *testing.B) {
	lim := Limit{Rate: 1e6, Burst: 1000}
	b.Run("existing key", func(b *testing.B) {
		s := New(1<<16, HashFingerprint)
		key, now := fp(1), t0
		s.Reserve(key, lim, 1, now)
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			s.Reserve(key, lim, 1, now)
		}
	})
	b.Run("existing key, reserve and cancel", func(b *testing.B) {
		s := New(1<<16, HashFingerprint)
		key, now := fp(1), t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			res, _, _, _ := s.Reserve(key, lim, 1, now)
			res.Cancel(now)
		}
	})
	b.Run("existing prefix key", func(b *testing.B) {
		s := New(1<<16, HashPrefix)
		key, now := netip.MustParsePrefix("2001:db8:1:2::/64"), t0
		s.Reserve(key, lim, 1, now)
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			s.Reserve(key, lim, 1, now)
		}
	})
	b.Run("existing keys, parallel", func(b *testing.B) {
		s := New(1<<16, HashFingerprint)
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			key, now := fp(int(next.Add(1))), t0
			for pb.Next() {
				now = now.Add(time.Microsecond)
				s.Reserve(key, lim, 1, now)
			}
		})
	})
	// Every key is new; the set is at capacity after the first 64Ki, and each
	// new key then evicts a bucket that has refilled.
	b.Run("new keys at capacity", func(b *testing.B) {
		s := New(1<<16, HashFingerprint)
		lim := Limit{Rate: 1000, Burst: 10}
		i, now := 0, t0
		b.ReportAllocs()
		for b.Loop() {
			i++
			now = now.Add(time.Millisecond)
			s.Reserve(fp(i), lim, 1, now)
		}
	})
	// A flood of new keys against a full set of drained buckets: each is
	// refused after examining a few buckets.
	b.Run("new keys refused at capacity", func(b *testing.B) {
		s := New(1<<16, HashFingerprint)
		lim := Limit{Rate: 1, Burst: 10}
		for i := range 1 << 16 {
			s.Reserve(fp(-i), lim, 1, t0)
		}
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			s.Reserve(fp(i), lim, 1, t0)
		}
	})
}

func BenchmarkGauge(b *testing.B) {
	g := NewGauge(HashFingerprint)
	key := fp(1)
	g.Acquire(key, 1, 100) // keep the key present
	b.ReportAllocs()
	for b.Loop() {
		g.Acquire(key, 1, 100)
		g.Release(key, 1)
	}
}

// BenchmarkBytesPerBucket reports the heap held per bucket by a Set filled to
// capacity (the benchmark time itself is meaningless). Run with -benchtime=1x.
func BenchmarkBytesPerBucket(b *testing.B) {
	for _, n := range []int{100_000, 300_000} {
		b.Run(fmt.Sprintf("fingerprint keys/%d", n), func(b *testing.B) {
			reportBytesPer(b, n, func() any {
				s := New(n, HashFingerprint)
				for i := range n {
					s.Reserve(fp(i), Limit{Rate: 1, Burst: 10}, 1, t0)
				}
				return s
			})
		})
		b.Run(fmt.Sprintf("prefix keys/%d", n), func(b *testing.B) {
			reportBytesPer(b, n, func() any {
				s := New(n, HashPrefix)
				for i := range n {
					a := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
					s.Reserve(netip.PrefixFrom(netip.AddrFrom16(a), 64), Limit{Rate: 1, Burst: 10}, 1, t0)
				}
				return s
			})
		})
	}
}

func reportBytesPer(b *testing.B, n int, build func() any) {
	var before, after runtime.MemStats
	var held any
	for b.Loop() {
		held = nil
		runtime.GC()
		runtime.ReadMemStats(&before)
		held = build()
		runtime.GC()
		runtime.ReadMemStats(&after)
	}
	runtime.KeepAlive(held)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/entry")
}

// BenchmarkRateLimiterAllowN is the reference point: a single rate.Limiter,
// no map, no sharding.
func BenchmarkRateLimiterAllowN(b *testing.B) {
	lim := rate.NewLimiter(1e6, 1000)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		lim.AllowN(now, 1)
	}
}
