package buckets

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestGauge(t *testing.T) {
	type call struct {
		release bool
		key     int
		n       int // units; 0 means 1
		max     int
		want    bool // for Acquire
	}
	tests := []struct {
		name      string
		calls     []call
		wantCount map[int]int
		wantLen   int
	}{
		{"a key admits up to max in flight", []call{
			{key: 1, max: 2, want: true},
			{key: 1, max: 2, want: true},
			{key: 1, max: 2, want: false},
		}, map[int]int{1: 2}, 1},
		{"Release frees a slot", []call{
			{key: 1, max: 1, want: true},
			{key: 1, max: 1, want: false},
			{release: true, key: 1},
			{key: 1, max: 1, want: true},
		}, map[int]int{1: 1}, 1},
		{"keys are counted separately", []call{
			{key: 1, max: 1, want: true},
			{key: 2, max: 1, want: true},
		}, map[int]int{1: 1, 2: 1}, 2},
		{"a key with nothing in flight is forgotten", []call{
			{key: 1, max: 3, want: true},
			{key: 1, max: 3, want: true},
			{release: true, key: 1},
			{release: true, key: 1},
		}, map[int]int{1: 0}, 0},
		{"a lower max applies to work already in flight", []call{
			{key: 1, max: 3, want: true},
			{key: 1, max: 3, want: true},
			{key: 1, max: 1, want: false},
		}, map[int]int{1: 2}, 1},
		{"max <= 0 admits nothing", []call{
			{key: 1, max: 0, want: false},
			{key: 1, max: -1, want: false},
		}, map[int]int{1: 0}, 0},
		{"an unbalanced Release is ignored", []call{
			{release: true, key: 1},
			{key: 1, max: 1, want: true},
			{key: 1, max: 1, want: false},
		}, map[int]int{1: 1}, 1},
		{"several units at once fit only whole", []call{
			{key: 1, n: 3, max: 4, want: true},
			{key: 1, n: 2, max: 4, want: false},
			{key: 1, n: 1, max: 4, want: true},
			{key: 1, n: 5, max: 4, want: false},
		}, map[int]int{1: 4}, 1},
		{"more units than max never fit", []call{
			{key: 1, n: 3, max: 2, want: false},
		}, map[int]int{1: 0}, 0},
		{"releasing several units", []call{
			{key: 1, n: 3, max: 3, want: true},
			{release: true, key: 1, n: 2},
			{key: 1, n: 2, max: 3, want: true},
			{release: true, key: 1, n: 9},
		}, map[int]int{1: 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGauge(HashFingerprint)
			for i, c := range tt.calls {
				n := max(c.n, 1)
				if c.release {
					g.Release(fp(c.key), n)
				} else if got := g.Acquire(fp(c.key), n, c.max); got != c.want {
					t.Fatalf("call %d: Acquire(key %d, %d, %d) = %v, want %v", i, c.key, n, c.max, got, c.want)
				}
			}
			for k, want := range tt.wantCount {
				if got := g.Count(fp(k)); got != want {
					t.Errorf("Count(key %d) = %d, want %d", k, got, want)
				}
			}
			if got := g.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
		})
	}
}

func TestGaugeNeverExceedsMaxUnderContention(t *testing.T) {
	const goroutines, rounds, max = 8, 500, 3
	g := NewGauge(HashFingerprint)
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				if !g.Acquire(fp(7), 1, max) {
					continue
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inFlight.Add(-1)
				g.Release(fp(7), 1)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > max || p < 1 {
		t.Errorf("peak in flight = %d, want 1..%d", p, max)
	}
	if g.Len() != 0 || g.Count(fp(7)) != 0 {
		t.Errorf("after all releases: Len() = %d, Count = %d, want 0, 0", g.Len(), g.Count(fp(7)))
	}
}
