package quota

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/cputime"
)

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("i/%032x", i)
	}
	return keys
}

// BenchmarkFlush100k measures one Flush pushing 100k pending keys into an
// object that already holds them, against the in-memory fake storage.
func BenchmarkFlush100k(b *testing.B) {
	const n = 100_000
	keys := benchKeys(n)
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0), Day)
	fill := func() {
		for _, k := range keys {
			add(c, k, Day, 1, t0)
		}
	}
	fill()
	if err := c.Flush(b.Context()); err != nil { // creates the object, lists once
		b.Fatal(err)
	}
	var ops, written int64
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fill()
		st.takeOps()
		cpu0, _ := cputime.Process()
		b.StartTimer()
		if err := c.Flush(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu1, _ := cputime.Process()
		cpu += cpu1 - cpu0
		o, w := st.takeOps()
		for _, v := range o {
			ops += int64(v)
		}
		written += w
		b.StartTimer()
	}
	b.ReportMetric(float64(written)/float64(b.N), "stored-B/op")
	b.ReportMetric(float64(ops)/float64(b.N), "storage-ops/op")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// BenchmarkTryAdd measures TryAdd of one day and one month item for a key
// already tracked.
func BenchmarkTryAdd(b *testing.B) {
	c := newTestCounter(newFakeStorage(), newFakeClock(t0), Day, Month)
	items := []Item{
		{Key: []byte("i/0123456789abcdef0123456789abcdef"), Period: Day, Limit: 1 << 62, N: 1},
		{Key: []byte("i/0123456789abcdef0123456789abcdef"), Period: Month, Limit: 1 << 62, N: 1},
	}
	if _, ok := c.TryAdd(items, t0); !ok {
		b.Fatal("refused")
	}
	b.ReportAllocs()
	for b.Loop() {
		c.TryAdd(items, t0)
	}
}

// BenchmarkMemoryPerKey reports the heap held per tracked key after 100k
// keys were counted and flushed.
func BenchmarkMemoryPerKey(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		keys := benchKeys(n) // freed below: the counter then holds its own copy
		st := newFakeStorage()
		clk := newFakeClock(t0)
		c := newTestCounter(st, clk, Day)
		for _, k := range keys {
			add(c, k, Day, 1, t0)
		}
		for range 2 { // the second flush re-reads every key from storage
			if err := c.Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		st.put(objKey(Day, t0), "") // do not count the storage's copy
		keys = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.State().Tracked != n {
			b.Fatal("not all keys tracked")
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/key")
		runtime.KeepAlive(c)
		runtime.KeepAlive(st)
	}
}
