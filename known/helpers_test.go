package known

import (
	"encoding/binary"
	"testing"
	"time"
)

// t0 is an arbitrary start; every test computes its times from it.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// fp makes a distinct 16-byte key for each i.
func fp(i int) [16]byte {
	var k [16]byte
	binary.LittleEndian.PutUint64(k[:], uint64(i))
	binary.LittleEndian.PutUint64(k[8:], ^uint64(i))
	return k
}

// hashFP is a weak hash (the first 8 bytes); the Set mixes it.
func hashFP(k [16]byte) uint64 {
	return binary.LittleEndian.Uint64(k[:])
}

// checkInvariants verifies every shard's list against its map and free chain.
func checkInvariants[K comparable](t *testing.T, s *Set[K]) {
	t.Helper()
	total := 0
	defer func() {
		if int64(total) != s.count.Load() {
			t.Fatalf("shards hold %d entries, the Set counts %d", total, s.count.Load())
		}
	}()
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		live, prev := 0, int32(none)
		for i := sh.head; i != none; i = sh.entries[i].next {
			e := sh.entries[i]
			if e.prev != prev {
				t.Fatalf("shard %d: entry %d has prev %d, want %d", n, i, e.prev, prev)
			}
			if j, ok := sh.index[e.key]; !ok || j != i {
				t.Fatalf("shard %d: entry %d is not indexed", n, i)
			}
			live, prev = live+1, i
		}
		if prev != sh.tail {
			t.Fatalf("shard %d: list ends at %d, tail is %d", n, prev, sh.tail)
		}
		free := 0
		for i := sh.free; i != none; i = sh.entries[i].next {
			free++
		}
		total += live
		if live != len(sh.index) || live+free != len(sh.entries) {
			t.Fatalf("shard %d: %d listed, %d indexed, %d free, %d slots", n, live, len(sh.index), free, len(sh.entries))
		}
		sh.mu.Unlock()
	}
}
