package buckets

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestReserve(t *testing.T) {
	twoPerSecond := Limit{Rate: 2, Burst: 2}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a bucket refuses after its burst and allows again after 1/rate", []step{
			{key: 1, lim: twoPerSecond, n: 1, ok: true},
			{key: 1, lim: twoPerSecond, n: 1, ok: true},
			{key: 1, lim: twoPerSecond, n: 1, wait: 500 * time.Millisecond},
			{at: 499 * time.Millisecond, key: 1, lim: twoPerSecond, n: 1, wait: time.Millisecond},
			{at: 500 * time.Millisecond, key: 1, lim: twoPerSecond, n: 1, ok: true},
			{at: 500 * time.Millisecond, key: 1, lim: twoPerSecond, n: 1, wait: 500 * time.Millisecond},
		}},
		{"a refusal takes nothing", []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 3}, n: 2, ok: true},
			{key: 1, lim: Limit{Rate: 1, Burst: 3}, n: 2, wait: time.Second},
			{key: 1, lim: Limit{Rate: 1, Burst: 3}, n: 1, ok: true},
		}},
		{"keys have separate buckets", []step{
			{key: 1, lim: twoPerSecond, n: 2, ok: true},
			{key: 2, lim: twoPerSecond, n: 2, ok: true},
			{key: 1, lim: twoPerSecond, n: 1, wait: 500 * time.Millisecond},
		}},
		{"raising the rate keeps a drained bucket drained", []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 5}, n: 5, ok: true},
			{key: 1, lim: Limit{Rate: 100, Burst: 5}, n: 1, wait: 10 * time.Millisecond},
			{at: 10 * time.Millisecond, key: 1, lim: Limit{Rate: 100, Burst: 5}, n: 1, ok: true},
		}},
		{"raising the burst hands out no fresh tokens", []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 2}, n: 2, ok: true},
			{key: 1, lim: Limit{Rate: 1, Burst: 10}, n: 1, wait: time.Second},
		}},
		{"a key moved to another rate earns its old one until the move, keeping its level", []step{
			{key: 1, lim: Limit{Rate: 2, Burst: 10}, n: 10, ok: true},
			{at: 500 * time.Millisecond, key: 1, lim: Limit{Rate: 4, Burst: 10}, n: 1, ok: true},
			{at: 500 * time.Millisecond, key: 1, lim: Limit{Rate: 4, Burst: 10}, n: 1, wait: 250 * time.Millisecond},
		}},
		{"a key moved to a slower rate keeps what its old one earned", []step{
			{key: 1, lim: Limit{Rate: 4, Burst: 10}, n: 10, ok: true},
			{at: 500 * time.Millisecond, key: 1, lim: Limit{Rate: 1, Burst: 10}, n: 2, ok: true},
			{at: 500 * time.Millisecond, key: 1, lim: Limit{Rate: 1, Burst: 10}, n: 1, wait: time.Second},
		}},
		{"lowering the burst caps the level", []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 10}, n: 1, ok: true},
			{key: 1, lim: Limit{Rate: 1, Burst: 2}, n: 2, ok: true},
			{key: 1, lim: Limit{Rate: 1, Burst: 2}, n: 1, wait: time.Second},
		}},
		{"n above the burst is refused with the wait until the burst fits", []step{
			{key: 1, lim: Limit{Rate: 2, Burst: 4}, n: 5, wait: time.Nanosecond}, // a new bucket is full
			{key: 1, lim: Limit{Rate: 2, Burst: 4}, n: 4, ok: true},
			{key: 1, lim: Limit{Rate: 2, Burst: 4}, n: 5, wait: 2 * time.Second},
			{at: 500 * time.Millisecond, key: 1, lim: Limit{Rate: 2, Burst: 4}, n: 5, wait: 1500 * time.Millisecond},
		}},
		{"n above a zero burst is refused", []step{
			{key: 1, lim: Limit{Rate: 4, Burst: 0}, n: 1, wait: time.Nanosecond},
			{key: 1, lim: Limit{Rate: 4, Burst: -3}, n: 1, wait: time.Nanosecond},
		}},
		{"n above the burst of a drained bucket at rate 0 waits forever", []step{
			{key: 1, lim: Limit{Rate: 0, Burst: 4}, n: 4, ok: true},
			{key: 1, lim: Limit{Rate: 0, Burst: 4}, n: 5, wait: rate.InfDuration},
		}},
		{"n <= 0 is always ok", []step{
			{key: 1, lim: Limit{Rate: 0, Burst: 0}, n: 0, ok: true},
			{key: 1, lim: Limit{Rate: 0, Burst: 0}, n: -3, ok: true},
			{key: 1, lim: Limit{Rate: 1, Burst: 1}, n: 1, ok: true},
			{key: 1, lim: Limit{Rate: 1, Burst: 1}, n: 0, ok: true},
			{op: peek, key: 1, tokens: 0},
		}},
		{"rate 0 hands out the burst once", []step{
			{key: 1, lim: Limit{Rate: 0, Burst: 2}, n: 2, ok: true},
			{at: time.Hour, key: 1, lim: Limit{Rate: 0, Burst: 2}, n: 1, wait: rate.InfDuration},
		}},
		{"rate.Inf is unlimited and keeps no bucket", []step{
			{key: 1, lim: Limit{Rate: rate.Inf, Burst: 0}, n: 1000, ok: true},
			{key: 1, lim: Limit{Rate: rate.Inf, Burst: 0}, n: 1000, ok: true},
			{op: peek, key: 1, absent: true},
		}},
		{"switching to rate.Inf and back starts from a full bucket, as rate.Limiter does", []step{
			{key: 1, lim: twoPerSecond, n: 2, ok: true},
			{key: 1, lim: Limit{Rate: rate.Inf}, n: 5, ok: true},
			{key: 1, lim: twoPerSecond, n: 2, ok: true},
		}},
		{"Cancel returns tokens so the next request sees them", []step{
			{key: 1, lim: twoPerSecond, n: 2, ok: true},
			{op: cancel, of: 0},
			{key: 1, lim: twoPerSecond, n: 2, ok: true},
		}},
		{"a later Cancel still returns the tokens", []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 10}, n: 10, ok: true},
			{at: 3 * time.Second, op: cancel, of: 0},
			{at: 3 * time.Second, op: peek, key: 1, tokens: 10},
		}},
		{"Cancel never fills a bucket past its burst", []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 10}, n: 4, ok: true},
			{at: 2 * time.Second, op: cancel, of: 0},
			{at: 2 * time.Second, op: peek, key: 1, tokens: 10},
		}},
		{"Cancel of a reservation whose bucket was dropped credits no newer bucket", []step{
			{key: 1, lim: twoPerSecond, n: 1, ok: true},
			{key: 1, lim: Limit{Rate: rate.Inf}, n: 1, ok: true}, // drops the bucket
			{key: 1, lim: twoPerSecond, n: 2, ok: true},          // a new bucket, drained
			{op: cancel, of: 0},
			{op: peek, key: 1, tokens: 0},
		}},
		{"cancelling a zero Reservation does nothing", []step{
			{key: 1, lim: twoPerSecond, n: 2, ok: true},
			{key: 1, lim: twoPerSecond, n: 0, ok: true},
			{op: cancel, of: 1},
			{op: peek, key: 1, tokens: 0},
		}},
		{"time running backwards earns nothing", []step{
			{at: time.Second, key: 1, lim: twoPerSecond, n: 2, ok: true},
			{at: 0, key: 1, lim: twoPerSecond, n: 1, wait: anyWait},
			{at: 1500 * time.Millisecond, key: 1, lim: twoPerSecond, n: 1, ok: true},
			{at: 1500 * time.Millisecond, key: 1, lim: twoPerSecond, n: 1, wait: anyWait},
		}},
		{"Tokens reports the level and absence", []step{
			{op: peek, key: 1, absent: true},
			{key: 1, lim: Limit{Rate: 4, Burst: 8}, n: 8, ok: true},
			{at: 500 * time.Millisecond, op: peek, key: 1, tokens: 2},
			{at: time.Hour, op: peek, key: 1, tokens: 8},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run(t, New(1000, HashFingerprint), tt.steps)
		})
	}
}

func TestCapacity(t *testing.T) {
	oneASecond := Limit{Rate: 1, Burst: 1}
	tests := []struct {
		name     string
		capacity int
		steps    []step
		wantLen  int
	}{
		{"a new key at capacity evicts a full bucket", 2, []step{
			{key: 1, lim: oneASecond, n: 1, ok: true},
			{key: 2, lim: oneASecond, n: 1, ok: true},
			{at: time.Second, key: 3, lim: oneASecond, n: 1, ok: true},
		}, 2},
		{"a drained bucket survives cap pressure", 2, []step{
			{key: 1, lim: oneASecond, n: 1, ok: true},
			{key: 2, lim: oneASecond, n: 1, ok: true},
			{key: 3, lim: oneASecond, n: 1, full: true, wait: time.Second},
			{key: 1, lim: oneASecond, n: 1, wait: time.Second},
			{key: 2, lim: oneASecond, n: 1, wait: time.Second},
		}, 2},
		{"a partly refilled bucket is not evicted", 1, []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 2}, n: 2, ok: true},
			{at: time.Second, key: 2, lim: oneASecond, n: 1, full: true, wait: time.Second},
			{at: time.Second, op: peek, key: 1, tokens: 1},
			{at: 2 * time.Second, key: 2, lim: oneASecond, n: 1, ok: true},
			{at: 2 * time.Second, op: peek, key: 1, absent: true},
		}, 1},
		{"a new key refused at capacity is not charged to another key", 1, []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 5}, n: 1, ok: true},
			{key: 2, lim: Limit{Rate: 1, Burst: 5}, n: 1, full: true, wait: time.Second},
			{op: peek, key: 1, tokens: 4},
			{op: peek, key: 2, absent: true},
		}, 1},
		{"an existing key is served at capacity", 1, []step{
			{key: 1, lim: Limit{Rate: 1, Burst: 5}, n: 1, ok: true},
			{key: 2, lim: Limit{Rate: 1, Burst: 5}, n: 1, full: true, wait: anyWait},
			{key: 1, lim: Limit{Rate: 1, Burst: 5}, n: 1, ok: true},
		}, 1},
		{"a request above the burst is refused without taking a slot", 1, []step{
			{key: 1, lim: oneASecond, n: 2, wait: time.Nanosecond},
			{key: 2, lim: oneASecond, n: 1, ok: true},
		}, 1},
		{"a bucket at rate 0 is never evicted", 1, []step{
			{key: 1, lim: Limit{Rate: 0, Burst: 1}, n: 1, ok: true},
			{at: 24 * time.Hour, key: 2, lim: oneASecond, n: 1, full: true, wait: rate.InfDuration},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.capacity, HashFingerprint)
			run(t, s, tt.steps)
			if got := s.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
		})
	}
}

func TestSetCapacity(t *testing.T) {
	lim := Limit{Rate: 1, Burst: 1}
	tests := []struct {
		name            string
		from, to        int
		fill            int
		newKeyAfterFill bool
	}{
		{"growing the capacity makes room for new keys at once", 4, 5, 4, true},
		{"shrinking the capacity refuses new keys until buckets refill", 4, 2, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.from, HashFingerprint)
			for i := range tt.fill {
				if _, _, ok, _ := s.Reserve(fp(i), lim, 1, t0); !ok {
					t.Fatalf("fill key %d refused", i)
				}
			}
			s.SetCapacity(tt.to)
			if _, _, ok, _ := s.Reserve(fp(-1), lim, 1, t0); ok != tt.newKeyAfterFill {
				t.Fatalf("new key after SetCapacity(%d): ok=%v, want %v", tt.to, ok, tt.newKeyAfterFill)
			}
			if got := s.Len(); got != tt.fill && got != tt.fill+1 {
				t.Fatalf("Len() = %d, want no bucket dropped", got)
			}
			// Once everything has refilled, a sweep and new keys settle at the new capacity.
			later := t0.Add(time.Hour)
			s.Sweep(later)
			for i := range 2 * tt.to {
				s.Reserve(fp(1000+i), lim, 1, later)
			}
			if got := s.Len(); got != tt.to {
				t.Fatalf("Len() after refill = %d, want %d", got, tt.to)
			}
		})
	}
}

// A capacity lowered far below the one the shards were chosen for leaves
// few buckets in few shards: a new key refused for want of room is still
// told how long until one of them is full, not an unknown wait, however
// far its shard is from theirs.
func TestShrunkCapacityRefusalSaysWhenRoomComes(t *testing.T) {
	s := New(100000, HashFingerprint)
	s.SetCapacity(1)
	lim := Limit{Rate: 0.1, Burst: 2} // an empty bucket is full after 20s
	if _, _, ok, _ := s.Reserve(fp(0), lim, 2, t0); !ok {
		t.Fatal("draining the one bucket was refused")
	}
	held := s.shardIndex(fp(0))
	for k := 1; k < 1000; k++ {
		if d := (held - s.shardIndex(fp(k)) + len(s.shards)) % len(s.shards); d <= evictOthers {
			continue // its shard or one close after it would examine the bucket anyway
		}
		_, wait, ok, full := s.Reserve(fp(k), lim, 1, t0)
		if ok || !full || wait != 20*time.Second {
			t.Fatalf("new key %d: ok=%v full=%v wait=%v, want refused as full with the 20s the bucket takes to refill", k, ok, full, wait)
		}
		return
	}
	t.Fatal("no key found far from the bucket's shard")
}

func TestSweep(t *testing.T) {
	tests := []struct {
		name        string
		sweepAt     time.Duration
		wantRemoved int
		wantLeft    []int
	}{
		{"Sweep removes nothing while every bucket is drained", 0, 0, []int{1, 2, 3}},
		{"Sweep removes only full buckets", 2 * time.Second, 1, []int{2, 3}},
		{"a partly refilled bucket is not swept", 10 * time.Second, 2, []int{3}},
		{"Sweep removes every bucket once all have refilled", time.Minute, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(100, HashFingerprint)
			// Key i refills completely i*i*2 seconds after t0: 2s, 8s, 18s.
			for i := 1; i <= 3; i++ {
				s.Reserve(fp(i), Limit{Rate: 1, Burst: 2 * i * i}, 2*i*i, t0)
			}
			if got := s.Sweep(t0.Add(tt.sweepAt)); got != tt.wantRemoved {
				t.Errorf("Sweep() = %d, want %d", got, tt.wantRemoved)
			}
			if got := s.Len(); got != len(tt.wantLeft) {
				t.Errorf("Len() = %d, want %d", got, len(tt.wantLeft))
			}
			for _, i := range tt.wantLeft {
				if _, ok := s.Tokens(fp(i), t0.Add(tt.sweepAt)); !ok {
					t.Errorf("key %d was swept while not full", i)
				}
			}
		})
	}
}

func TestFloodStaysWithinCapacity(t *testing.T) {
	const capacity, flood = 10_000, 300_000
	lim := Limit{Rate: 1, Burst: 10}
	s := New(capacity, HashFingerprint)
	admitted, atCapacity := 0, 0
	for i := range flood {
		_, _, ok, full := s.Reserve(fp(i), lim, 1, t0)
		switch {
		case ok:
			admitted++
		case full:
			atCapacity++
		default:
			t.Fatalf("key %d refused for another reason than capacity", i)
		}
	}
	if got := s.Len(); got > capacity || got != admitted {
		t.Fatalf("Len() = %d after %d admitted, want <= %d", got, admitted, capacity)
	}
	if admitted < capacity*9/10 {
		t.Errorf("only %d of %d slots used before refusing", admitted, capacity)
	}
	// Every admitted key kept its (drained) bucket through the flood.
	for i := range flood {
		if tokens, ok := s.Tokens(fp(i), t0); ok && tokens != 9 {
			t.Fatalf("key %d has %v tokens, want 9", i, tokens)
		}
	}
	// A second later everything has refilled: new keys get in by eviction.
	if _, _, ok, _ := s.Reserve(fp(-1), lim, 1, t0.Add(time.Second)); !ok {
		t.Fatalf("new key refused after the flood's buckets refilled")
	}
}

// The capacity is the Set's: however keys spread over the shards, every new
// key is taken in until the Set holds capacity buckets, and the next is
// refused (every bucket drained, none to evict).
func TestCapacityIsTheSetsNotAShards(t *testing.T) {
	const capacity = 1000 // 64 shards
	lim := Limit{Rate: 1, Burst: 100}
	s := New(capacity, HashFingerprint)
	for i := range capacity {
		if _, _, ok, _ := s.Reserve(fp(i), lim, 1, t0); !ok {
			t.Fatalf("new key %d refused while the Set holds %d of %d buckets", i, s.Len(), capacity)
		}
	}
	_, wait, ok, full := s.Reserve(fp(capacity), lim, 1, t0)
	if ok || !full || wait != time.Second {
		t.Fatalf("key beyond capacity: ok %v, full %v, wait %v; want refused as full, a bucket refilled in 1s", ok, full, wait)
	}
	if got := s.Len(); got != capacity {
		t.Fatalf("Len() = %d, want %d", got, capacity)
	}
}

func TestAdvanceBanksTheOldRateUpToALimitChange(t *testing.T) {
	s := New[uint8](2, func(k uint8) uint64 { return uint64(k) })
	t0 := time.Unix(1000, 0)
	slow := Limit{Rate: 1, Burst: 10}
	if _, _, ok, _ := s.Reserve(0, slow, 10, t0); !ok {
		t.Fatal("draining reservation refused")
	}
	// Two seconds at 1/s earn 2 tokens; then the limit becomes 100/s.
	s.Advance(t0.Add(2*time.Second), 0, 100, 10)
	fast := Limit{Rate: 100, Burst: 10}
	// 50ms at the new rate earn 5 more: 7 in all, never a fresh burst of 10.
	at := t0.Add(2*time.Second + 50*time.Millisecond)
	if _, _, ok, _ := s.Reserve(0, fast, 7, at); !ok {
		t.Fatal("the refill banked before the change plus the new rate after it should admit 7")
	}
	if _, _, ok, _ := s.Reserve(0, fast, 1, at); ok {
		t.Fatal("a limit change handed out a fresh burst")
	}
}

// Rebase retunes the buckets of the keys given only: they bank the refill
// of their old rate up to the change and earn the new rate from then on;
// another key keeps earning at its own rate as if nothing happened.
func TestRebaseRetunesOnlyTheKeysGiven(t *testing.T) {
	s := New[uint8](4, func(k uint8) uint64 { return uint64(k) })
	t0 := time.Unix(1000, 0)
	slow, fast := Limit{Rate: 1, Burst: 10}, Limit{Rate: 100, Burst: 10}
	for _, k := range []uint8{0, 1} {
		if _, _, ok, _ := s.Reserve(k, slow, 10, t0); !ok {
			t.Fatal("draining reservation refused")
		}
	}
	// A first change of every limit, then one of key 0's alone.
	s.Advance(t0, 10*time.Second, 1, 10)
	s.Rebase(t0.Add(2*time.Second), []uint8{0}, 1, 10)
	at := t0.Add(2*time.Second + 50*time.Millisecond)
	if _, _, ok, _ := s.Reserve(0, fast, 7, at); !ok {
		t.Fatal("key 0: 2 tokens banked at 1/s and 5 earned at 100/s since should admit 7")
	}
	if _, _, ok, _ := s.Reserve(0, fast, 1, at); ok {
		t.Fatal("key 0: the new rate was credited before its change")
	}
	// Key 1 was not retuned: 4s at its own rate of 1/s.
	if _, _, ok, _ := s.Reserve(1, slow, 4, t0.Add(4*time.Second)); !ok {
		t.Fatal("key 1 lost refill to a change of key 0's limits")
	}
}

// A bucket Rebase left without a rate, awaiting its next use, is credited
// the time until a later change (Rebase or Advance) at the slowest rate in
// force, which Rebase lowers to its keys' new limits: not nothing.
func TestRebasedBucketIsCreditedByTheNextChange(t *testing.T) {
	s := New[uint8](4, func(k uint8) uint64 { return uint64(k) })
	t0 := time.Unix(1000, 0)
	lim := Limit{Rate: 2, Burst: 10}
	s.Advance(t0.Add(-time.Second), 10*time.Second, 2, 10)
	for _, k := range []uint8{0, 1} {
		if _, _, ok, _ := s.Reserve(k, lim, 10, t0); !ok {
			t.Fatal("draining reservation refused")
		}
	}
	s.Rebase(t0, []uint8{0, 1}, 1, 10) // overrides of 1/s for both (or of tenant off)
	at := t0.Add(4 * time.Second)
	s.Rebase(at, []uint8{0}, 1, 10)      // key 0's override goes
	s.Advance(at, 10*time.Second, 2, 10) // then every limit changes
	for _, k := range []uint8{0, 1} {
		if _, _, ok, _ := s.Reserve(k, lim, 4, at); !ok {
			t.Fatalf("key %d: 4s at the slowest 1/s should have earned 4", k)
		}
		if _, _, ok, _ := s.Reserve(k, lim, 1, at); ok {
			t.Fatalf("key %d earned more than 4s at 1/s", k)
		}
	}
}

// An override of another key, pushed and removed again, leaves no trace
// on a key's credit: after the removal the slowest rate in force is the
// other limits' again, and a bucket idle across the next change earns it.
func TestRemovedOverrideOfAnotherKeyCreditsNothingLess(t *testing.T) {
	s := New[uint8](4, func(k uint8) uint64 { return uint64(k) })
	t0 := time.Unix(1000, 0)
	lim := Limit{Rate: 1, Burst: 10}
	s.Advance(t0.Add(-time.Second), 10*time.Second, lim.Rate, lim.Burst)
	if _, _, ok, _ := s.Reserve(0, lim, 10, t0); !ok {
		t.Fatal("draining reservation refused")
	}
	s.Advance(t0, 10*time.Second, lim.Rate, lim.Burst)           // a change: key 0 is now idle since one
	s.Rebase(t0.Add(time.Second), []uint8{1}, 1.0/60, lim.Burst) // key 1 gets an override of 1/m
	s.Rebase(t0.Add(2*time.Second), []uint8{1}, lim.Rate, lim.Burst)
	at := t0.Add(4 * time.Second)
	s.Advance(at, 10*time.Second, lim.Rate, lim.Burst)
	if _, _, ok, _ := s.Reserve(0, lim, 4, at); !ok {
		t.Fatal("key 0 lost the refill of its 1/s to another key's removed override of 1/m")
	}
}

func TestReserveReportsTokensLeft(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New[uint8](100, func(k uint8) uint64 { return uint64(k) })
	lim := Limit{Rate: 1, Burst: 10}
	for _, want := range []float64{7, 4} {
		res, _, ok, _ := s.Reserve(1, lim, 3, now)
		if !ok || res.Left() != want {
			t.Fatalf("Reserve = %v, Left %v; want ok, Left %v", ok, res.Left(), want)
		}
		if tokens, _ := s.Tokens(1, now); tokens != res.Left() {
			t.Errorf("Left %v differs from Tokens %v", res.Left(), tokens)
		}
	}
	res, _, ok, _ := s.Reserve(1, lim, 1, now.Add(2*time.Second))
	if !ok || res.Left() != 5 {
		t.Errorf("after 2s of refill: ok %v, Left %v; want 5", ok, res.Left())
	}
}

// Wait decides as Reserve would, and takes nothing: no bucket is created,
// no token is taken.
func TestWaitTakesNothing(t *testing.T) {
	lim := Limit{Rate: 1, Burst: 2}
	s := New(10, HashFingerprint)
	if wait, ok := s.Wait(fp(1), lim, 2, t0); !ok || wait != 0 || s.Len() != 0 {
		t.Fatalf("Wait on a new key = %v, %v with %d buckets; want ok, and none created", wait, ok, s.Len())
	}
	if _, _, ok, _ := s.Reserve(fp(1), lim, 2, t0); !ok {
		t.Fatal("Reserve of the burst refused")
	}
	for range 2 {
		if wait, ok := s.Wait(fp(1), lim, 1, t0); ok || wait != time.Second {
			t.Fatalf("Wait on a drained bucket = %v, %v; want 1s", wait, ok)
		}
	}
	if _, ok := s.Wait(fp(1), lim, 3, t0); ok {
		t.Fatal("Wait for more than the burst fits")
	}
	if tokens, _ := s.Tokens(fp(1), t0.Add(time.Second)); tokens != 1 {
		t.Fatalf("bucket holds %v tokens a second later, want 1: Wait took some", tokens)
	}
}

// A key whose request comes under other limits moves to them when Wait
// decides it, as when Reserve does, whether it fits or not: drained at
// 1 token per 6s, then asked under 1/s, it is told 1s and has the token
// then, not a sixth of one earned at its old rate.
func TestWaitMovesTheKeyToItsLimits(t *testing.T) {
	slow, fast := Limit{Rate: 1.0 / 6, Burst: 2}, Limit{Rate: 1, Burst: 1}
	s := New(10, HashFingerprint)
	if _, _, ok, _ := s.Reserve(fp(1), slow, 2, t0); !ok {
		t.Fatal("draining reservation refused")
	}
	wait, ok := s.Wait(fp(1), fast, 1, t0)
	if ok || wait != time.Second {
		t.Fatalf("Wait under the new limits = %v, %v; want 1s", wait, ok)
	}
	if _, _, ok, _ := s.Reserve(fp(1), fast, 1, t0.Add(wait)); !ok {
		t.Fatal("refused after the wait Wait named")
	}
}

// A bucket not used since a limits change does not know its new limits:
// it is not dropped as full on the old rate's word (its next use under a
// slower rate would find it recreated full, a fresh burst), only once it
// was full at the change or the longest refill of the limits now in force
// has passed.
func TestStaleBucketIsNotDroppedOnTheOldRatesWord(t *testing.T) {
	s := New(10, HashFingerprint)
	fast := Limit{Rate: 10, Burst: 20}
	if _, _, ok, _ := s.Reserve(fp(1), fast, 20, t0); !ok {
		t.Fatal("draining reservation refused")
	}
	// Limits change: the slowest one in force now fills in 20 minutes.
	s.Advance(t0, 20*time.Minute, 1.0/60, 20)
	if n := s.Sweep(t0.Add(5 * time.Second)); n != 0 {
		t.Fatalf("Sweep dropped %d buckets full only at the old rate", n)
	}
	slow := Limit{Rate: 1.0 / 60, Burst: 20}
	if _, _, ok, _ := s.Reserve(fp(1), slow, 20, t0.Add(5*time.Second)); ok {
		t.Fatal("a drained bucket got a fresh burst after a limit change")
	}
	// Unused since the change, it goes once any limit would have filled it.
	s2 := New(10, HashFingerprint)
	s2.Reserve(fp(2), fast, 20, t0)
	s2.Advance(t0, 20*time.Minute, 1.0/60, 20)
	if n := s2.Sweep(t0.Add(20*time.Minute + time.Second)); n != 1 {
		t.Fatalf("Sweep dropped %d stale buckets after the longest refill, want 1", n)
	}
}

// A second limit change credits a bucket unused since the first one at the
// slowest rate in force between them, not at the rate it was last used
// with: a tenant drained at 10/s, then moved to 1/m, does not come back
// full after an unrelated change 2s later. And the time to reclaim a stale
// bucket is the limits' now in force, not the slowest ever.
func TestSecondChangeCreditsTheSlowestRateInForce(t *testing.T) {
	s := New(10, HashFingerprint)
	fast, slow := Limit{Rate: 10, Burst: 10}, Limit{Rate: 1.0 / 60, Burst: 10}
	s.Advance(t0, time.Second, fast.Rate, 10) // the limits in force at the start
	if _, _, ok, _ := s.Reserve(fp(1), fast, 10, t0.Add(time.Millisecond)); !ok {
		t.Fatal("draining reservation refused")
	}
	s.Advance(t0.Add(2*time.Millisecond), 10*time.Minute, slow.Rate, 10) // to 1/m, right after
	s.Advance(t0.Add(3*time.Second), 10*time.Minute, slow.Rate, 10)      // an unrelated change
	if n := s.Sweep(t0.Add(3 * time.Second)); n != 0 {
		t.Fatalf("Sweep dropped %d buckets: credited at the old rate", n)
	}
	if _, _, ok, _ := s.Reserve(fp(1), slow, 2, t0.Add(4*time.Second)); ok {
		t.Fatal("a drained bucket got refilled at the old rate across a second change")
	}
	// Back to a fast rate: the stale bucket goes once a limit in force
	// fills it (1s), not after the slow rate's 10 minutes.
	s.Advance(t0.Add(6*time.Second), time.Second, fast.Rate, 10)
	if n := s.Sweep(t0.Add(8 * time.Second)); n != 1 {
		t.Fatalf("Sweep dropped %d stale buckets past the refill of the limits in force, want 1", n)
	}
}

// A bucket unused since a change that raised the burst refills past the
// burst it was last used with: a second change credits it up to the
// largest burst then in force, so it is neither cut back to its old burst
// nor dropped as full there, to come back with a fresh, larger burst.
func TestSecondChangeCreditsUpToTheLargestBurstInForce(t *testing.T) {
	s := New(10, HashFingerprint)
	small, raised, slowed := Limit{Rate: 1.0 / 60, Burst: 5}, Limit{Rate: 1, Burst: 50}, Limit{Rate: 1.0 / 60, Burst: 50}
	s.Advance(t0, 5*time.Minute, small.Rate, small.Burst) // the limits in force at the start
	if _, _, ok, _ := s.Reserve(fp(1), small, 5, t0.Add(time.Millisecond)); !ok {
		t.Fatal("draining reservation refused")
	}
	s.Advance(t0.Add(time.Second), 50*time.Second, raised.Rate, raised.Burst)
	at := t0.Add(7 * time.Second) // 6s at 1/s since: 6 tokens
	s.Advance(at, 50*time.Minute, slowed.Rate, slowed.Burst)
	if n := s.Sweep(at.Add(time.Second)); n != 0 {
		t.Fatalf("Sweep dropped %d buckets holding 6 of a burst of 50", n)
	}
	if _, _, ok, _ := s.Reserve(fp(1), slowed, 6, at.Add(time.Second)); !ok {
		t.Fatal("the 6 tokens earned between the changes were lost")
	}
	if _, _, ok, _ := s.Reserve(fp(1), slowed, 1, at.Add(time.Second)); ok {
		t.Fatal("a drained bucket got more than it earned after two limit changes")
	}
}

// Time running backwards earns nothing and costs nothing: a reservation
// stamped a moment before the bucket's last update (concurrent callers
// read the clock in either order) finds the level that update left.
func TestAnEarlierTimeFindsTheLevelLeft(t *testing.T) {
	s := New(10, HashFingerprint)
	lim := Limit{Rate: 1, Burst: 2}
	if _, _, ok, _ := s.Reserve(fp(1), lim, 1, t0.Add(time.Second)); !ok {
		t.Fatal("first reservation refused")
	}
	if _, wait, ok, _ := s.Reserve(fp(1), lim, 1, t0); !ok {
		t.Fatalf("a reservation stamped before the last update was refused (wait %v) with a token left", wait)
	}
}

// A limit change stamped before a stale bucket's last update (the clock
// read by the change ran behind the last request's) costs it nothing.
func TestAChangeAtAnEarlierTimeCostsAStaleBucketNothing(t *testing.T) {
	s := New(10, HashFingerprint)
	lim := Limit{Rate: 1, Burst: 2}
	s.Advance(t0, time.Second, lim.Rate, 2)
	if _, _, ok, _ := s.Reserve(fp(1), lim, 1, t0.Add(10*time.Second)); !ok {
		t.Fatal("first reservation refused")
	}
	s.Advance(t0.Add(20*time.Second), time.Second, lim.Rate, 2) // the bucket is now unused since a change
	s.Advance(t0.Add(5*time.Second), time.Second, lim.Rate, 2)  // stamped before its last update
	if _, wait, ok, _ := s.Reserve(fp(1), lim, 2, t0.Add(10*time.Second)); !ok {
		t.Fatalf("a change stamped earlier took tokens from a stale bucket (wait %v)", wait)
	}
}

// A Cancel stamped before the bucket's last update (a slow request
// cancelling late) gives its tokens back and earns nothing: last never
// moves backwards, so out-of-order times cannot earn the same interval
// twice.
func TestLateCancelEarnsNoIntervalTwice(t *testing.T) {
	lim := Limit{Rate: 1, Burst: 10}
	run(t, New(10, HashFingerprint), []step{
		{key: 1, lim: lim, n: 1, ok: true},
		{at: 10 * time.Second, key: 1, lim: lim, n: 10, ok: true}, // drains the refilled bucket
		{at: 0, op: cancel, of: 0},                                // stamped before the drain
		{at: 10 * time.Second, key: 1, lim: lim, n: 1, ok: true},  // the token given back
		{at: 10 * time.Second, key: 1, lim: lim, n: 1, wait: time.Second},
	})
}

// Cancel gives tokens back never above the burst, also to a bucket that
// refilled since the reservation: a later change that raises the burst
// then finds it full at its old burst, and a changed limit never hands
// anyone a fresh burst.
func TestLateCancelOfAFullBucketGivesNothingPastTheBurst(t *testing.T) {
	s := New(10, HashFingerprint)
	lim, raised := Limit{Rate: 1, Burst: 10}, Limit{Rate: 1, Burst: 20}
	res, _, ok, _ := s.Reserve(fp(1), lim, 5, t0)
	if !ok {
		t.Fatal("first reservation refused")
	}
	at := t0.Add(5 * time.Second) // full again
	s.Advance(at, 20*time.Second, raised.Rate, raised.Burst)
	res.Cancel(at)                                           // a slow request gives its 5 back
	s.Advance(at, 20*time.Second, raised.Rate, raised.Burst) // another change before the key's next use
	if _, _, ok, _ := s.Reserve(fp(1), raised, 10, at); !ok {
		t.Fatal("the full bucket of 10 refused 10")
	}
	if _, _, ok, _ := s.Reserve(fp(1), raised, 1, at); ok {
		t.Fatal("a late Cancel filled the bucket past its burst, kept by a raised one")
	}
}
