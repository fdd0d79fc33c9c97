package known

import (
	"testing"
	"time"
)

// op is what a step does.
type op int

const (
	prove  op = iota // Prove(key)
	proven           // Proven(key) must return want
	forget           // Forget(key)
	sweep            // Sweep must return removed
)

type step struct {
	at      time.Duration
	op      op
	key     int
	want    bool
	removed int
}

func TestSet(t *testing.T) {
	const ttl = 10 * time.Second
	tests := []struct {
		name    string
		max     int
		ttl     time.Duration
		steps   []step
		wantLen int
	}{
		{"a proved key is proven", 3, ttl, []step{
			{op: prove, key: 1},
			{op: proven, key: 1, want: true},
		}, 1},
		{"an unknown key is not proven", 3, ttl, []step{
			{op: prove, key: 1},
			{op: proven, key: 2, want: false},
		}, 1},
		{"a forgotten key is not proven", 3, ttl, []step{
			{op: prove, key: 1},
			{op: forget, key: 1},
			{op: proven, key: 1, want: false},
		}, 0},
		{"forgetting an unknown key does nothing", 3, ttl, []step{
			{op: prove, key: 1},
			{op: forget, key: 2},
			{op: proven, key: 1, want: true},
		}, 1},
		{"a key is proven until just before ttl after its last use", 3, ttl, []step{
			{op: prove, key: 1},
			{at: ttl - 1, op: proven, key: 1, want: true},
		}, 1},
		{"a key expires ttl after its last use and is removed", 3, ttl, []step{
			{op: prove, key: 1},
			{at: ttl, op: proven, key: 1, want: false},
		}, 0},
		{"a use refreshes the ttl", 3, ttl, []step{
			{op: prove, key: 1},
			{at: 6 * time.Second, op: proven, key: 1, want: true},
			{at: 15 * time.Second, op: proven, key: 1, want: true},
			{at: 25 * time.Second, op: proven, key: 1, want: false},
		}, 0},
		{"proving again refreshes the ttl", 3, ttl, []step{
			{op: prove, key: 1},
			{at: 6 * time.Second, op: prove, key: 1},
			{at: 15 * time.Second, op: proven, key: 1, want: true},
		}, 1},
		{"an expired key is proven again by Prove", 3, ttl, []step{
			{op: prove, key: 1},
			{at: time.Minute, op: prove, key: 1},
			{at: time.Minute, op: proven, key: 1, want: true},
		}, 1},
		{"a ttl <= 0 never expires", 3, 0, []step{
			{op: prove, key: 1},
			{at: 1000 * time.Hour, op: proven, key: 1, want: true},
		}, 1},
		{"time running backwards expires nothing and keeps the last use", 3, ttl, []step{
			{at: time.Minute, op: prove, key: 1},
			{at: 0, op: proven, key: 1, want: true},
			{at: time.Minute + ttl - 1, op: proven, key: 1, want: true},
		}, 1},
		{"the least recently used key is dropped beyond max", 3, ttl, []step{
			{op: prove, key: 1},
			{op: prove, key: 2},
			{op: prove, key: 3},
			{op: prove, key: 4},
			{op: proven, key: 1, want: false},
			{op: proven, key: 2, want: true},
			{op: proven, key: 3, want: true},
			{op: proven, key: 4, want: true},
		}, 3},
		{"a use protects a key from eviction", 3, ttl, []step{
			{op: prove, key: 1},
			{op: prove, key: 2},
			{op: prove, key: 3},
			{op: proven, key: 1, want: true},
			{op: prove, key: 4},
			{op: proven, key: 2, want: false},
			{op: proven, key: 1, want: true},
		}, 3},
		{"proving a present key evicts nothing", 3, ttl, []step{
			{op: prove, key: 1},
			{op: prove, key: 2},
			{op: prove, key: 3},
			{op: prove, key: 1},
			{op: proven, key: 2, want: true},
			{op: proven, key: 3, want: true},
		}, 3},
		{"a max below 1 keeps one key", 0, ttl, []step{
			{op: prove, key: 1},
			{op: prove, key: 2},
			{op: proven, key: 1, want: false},
			{op: proven, key: 2, want: true},
		}, 1},
		{"Sweep drops only expired keys", 3, ttl, []step{
			{op: prove, key: 1},
			{at: 5 * time.Second, op: prove, key: 2},
			{at: 7 * time.Second, op: prove, key: 3},
			{at: 9 * time.Second, op: proven, key: 1, want: true},
			{at: 15 * time.Second, op: sweep, removed: 1},
			{at: 15 * time.Second, op: proven, key: 3, want: true},
			{at: 15 * time.Second, op: proven, key: 1, want: true},
		}, 2},
		{"Sweep with no ttl drops nothing", 3, 0, []step{
			{op: prove, key: 1},
			{at: 1000 * time.Hour, op: sweep, removed: 0},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.max, tt.ttl, hashFP)
			for i, st := range tt.steps {
				now := t0.Add(st.at)
				switch st.op {
				case prove:
					s.Prove(fp(st.key), now)
				case proven:
					if got := s.Proven(fp(st.key), now); got != st.want {
						t.Fatalf("step %d: Proven(key %d) at %v = %v, want %v", i, st.key, st.at, got, st.want)
					}
				case forget:
					s.Forget(fp(st.key))
				case sweep:
					if got := s.Sweep(now); got != st.removed {
						t.Fatalf("step %d: Sweep() at %v = %d, want %d", i, st.at, got, st.removed)
					}
				}
				checkInvariants(t, s)
			}
			if got := s.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
		})
	}
}

func TestSetLimits(t *testing.T) {
	tests := []struct {
		name       string
		max        int
		ttl        time.Duration
		checkAt    time.Duration
		wantProven []int // of keys 1..4, proved at 1s..4s
	}{
		{"shrinking max evicts the least recently used at once", 2, time.Hour, 5 * time.Second, []int{3, 4}},
		{"growing max keeps every key", 100, time.Hour, 5 * time.Second, []int{1, 2, 3, 4}},
		{"a shorter ttl expires keys by their last use", 4, 3 * time.Second, 5 * time.Second, []int{3, 4}},
		{"a longer ttl keeps keys the old one would have expired", 4, 2 * time.Hour, 90 * time.Minute, []int{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(4, time.Hour, hashFP)
			for k := 1; k <= 4; k++ {
				s.Prove(fp(k), t0.Add(time.Duration(k)*time.Second))
			}
			s.SetLimits(tt.max, tt.ttl)
			checkInvariants(t, s)
			var got []int
			for k := 1; k <= 4; k++ {
				if s.Proven(fp(k), t0.Add(tt.checkAt)) {
					got = append(got, k)
				}
			}
			if len(got) != len(tt.wantProven) {
				t.Fatalf("proven keys %v, want %v", got, tt.wantProven)
			}
			for i := range got {
				if got[i] != tt.wantProven[i] {
					t.Fatalf("proven keys %v, want %v", got, tt.wantProven)
				}
			}
		})
	}
}

func TestFloodStaysWithinMax(t *testing.T) {
	const max, flood = 1000, 300_000
	s := New(max, time.Hour, hashFP)
	for i := range flood {
		s.Prove(fp(i), t0.Add(time.Duration(i)))
	}
	if got := s.Len(); got != max {
		t.Fatalf("Len() = %d after a flood of %d, want %d", got, flood, max)
	}
	if !s.Proven(fp(flood-1), t0.Add(flood)) {
		t.Errorf("the most recently proved key was evicted")
	}
	if s.Proven(fp(0), t0.Add(flood)) {
		t.Errorf("the least recently proved key survived the flood")
	}
	checkInvariants(t, s)
	// Shrinking gives back the memory of a larger past.
	s.SetLimits(10, time.Hour)
	slots := 0
	for n := range s.shards {
		slots += len(s.shards[n].entries)
	}
	if slots > 10 {
		t.Fatalf("%d slots kept after shrinking to 10", slots)
	}
	checkInvariants(t, s)
}

// The maximum is the whole Set's: however keys spread over the shards,
// nothing goes while the Set holds at most max, and beyond it the least
// recently used key of the Set goes, whichever shard it is in.
func TestMaxIsTheSetsNotAShards(t *testing.T) {
	const max = 1000 // 64 shards
	s := New(max, time.Hour, hashFP)
	for i := range max {
		s.Prove(fp(i), t0.Add(time.Duration(i)))
	}
	if got := s.Len(); got != max {
		t.Fatalf("Len() = %d after proving %d keys, want all of them kept", got, max)
	}
	// Key 0 is used again: key 1 is now the least recently used.
	now := t0.Add(max)
	if !s.Proven(fp(0), now) {
		t.Fatal("key 0 dropped below max")
	}
	for i := range 3 {
		s.Prove(fp(max+i), now.Add(time.Duration(i+1)))
	}
	later := now.Add(10)
	for i := range max + 3 {
		want := i == 0 || i > 3 // keys 1, 2 and 3 were the least recently used
		if got := s.Proven(fp(i), later); got != want {
			t.Fatalf("Proven(key %d) = %v after 3 keys beyond max, want %v", i, got, want)
		}
	}
	checkInvariants(t, s)
}

func TestProvenDoesNotAllocate(t *testing.T) {
	s := New(1000, time.Hour, hashFP)
	for i := range 1000 {
		s.Prove(fp(i), t0)
	}
	now := t0
	tests := []struct {
		name string
		f    func()
	}{
		{"Proven on a present key does not allocate", func() {
			now = now.Add(time.Millisecond)
			s.Proven(fp(500), now)
		}},
		{"Proven on an absent key does not allocate", func() {
			s.Proven(fp(-1), now)
		}},
		{"Prove on a present key does not allocate", func() {
			now = now.Add(time.Millisecond)
			s.Prove(fp(7), now)
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

func TestContains(t *testing.T) {
	const ttl = 10 * time.Second
	tests := []struct {
		name string
		run  func(s *Set[[16]byte]) bool // returns whether key 1 is proven at the end
		want bool
	}{
		{"Contains reports a proven key", func(s *Set[[16]byte]) bool {
			return s.Contains(fp(1), t0.Add(ttl-1))
		}, true},
		{"Contains does not refresh the ttl", func(s *Set[[16]byte]) bool {
			s.Contains(fp(1), t0.Add(9*time.Second))
			return s.Proven(fp(1), t0.Add(ttl))
		}, false},
		{"Contains does not protect from eviction", func(s *Set[[16]byte]) bool {
			s.Prove(fp(2), t0)
			s.Prove(fp(3), t0)
			s.Contains(fp(1), t0)
			s.Prove(fp(4), t0)
			return s.Proven(fp(1), t0)
		}, false},
		{"Contains reports an expired key as not proven", func(s *Set[[16]byte]) bool {
			return s.Contains(fp(1), t0.Add(ttl))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(3, ttl, hashFP)
			s.Prove(fp(1), t0)
			if got := tt.run(s); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			checkInvariants(t, s)
		})
	}
}
