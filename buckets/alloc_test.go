package buckets

import (
	"net/netip"
	"testing"
	"time"
)

func TestHotPathsDoNotAllocate(t *testing.T) {
	lim := Limit{Rate: 1e6, Burst: 1000}
	fps := New(1024, HashFingerprint)
	prefixes := New(1024, HashPrefix)
	gauge := NewGauge(HashFingerprint)
	prefix := netip.MustParsePrefix("2001:db8::/64")
	now := t0
	fps.Reserve(fp(1), lim, 1, now)
	prefixes.Reserve(prefix, lim, 1, now)
	gauge.Acquire(fp(1), 1, 10)
	tests := []struct {
		name string
		f    func()
	}{
		{"Reserve on an existing key does not allocate", func() {
			now = now.Add(time.Millisecond)
			fps.Reserve(fp(1), lim, 1, now)
		}},
		{"Reserve on an existing prefix key does not allocate", func() {
			now = now.Add(time.Millisecond)
			prefixes.Reserve(prefix, lim, 1, now)
		}},
		{"Reserve then Cancel does not allocate", func() {
			now = now.Add(time.Millisecond)
			res, _, _, _ := fps.Reserve(fp(1), lim, 1, now)
			res.Cancel(now)
		}},
		{"a refusal does not allocate", func() {
			fps.Reserve(fp(1), lim, 2000, now)
		}},
		{"Tokens does not allocate", func() {
			fps.Tokens(fp(1), now)
		}},
		{"Gauge Acquire and Release on a present key do not allocate", func() {
			gauge.Acquire(fp(1), 1, 10)
			gauge.Release(fp(1), 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if allocs := testing.AllocsPerRun(1000, tt.f); allocs != 0 {
				t.Fatalf("%v allocations per call, want 0", allocs)
			}
		})
	}
}
