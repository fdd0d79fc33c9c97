package known

import (
	"slices"
	"testing"
	"time"
)

type saved struct {
	key  [16]byte
	last time.Time
}

func snapshot(s *Set[[16]byte]) []saved {
	var out []saved
	s.Each(func(key [16]byte, last time.Time) { out = append(out, saved{key, last}) })
	return out
}

func TestEachAndRestore(t *testing.T) {
	const ttl = time.Minute
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name    string
		restore []saved // Restore each at t0+1m
		probe   int     // then Prove(probe) at t0+1m, which may evict
		want    []int   // keys proven at t0+1m afterwards, in Each order
	}{
		{"Restore skips entries that expired by now", []saved{
			{fp(1), at(0)},
			{fp(2), at(1)},
		}, 0, []int{2}},
		{"a restored entry keeps its last use for its ttl", []saved{
			{fp(1), at(30 * time.Second)},
		}, 0, []int{1}},
		{"Restore orders entries by last use whatever the input order", []saved{
			{fp(1), at(30 * time.Second)},
			{fp(2), at(10 * time.Second)},
			{fp(3), at(20 * time.Second)},
		}, 4, []int{3, 1, 4}},
		{"Restore beyond max keeps the most recently used", []saved{
			{fp(1), at(40 * time.Second)},
			{fp(2), at(10 * time.Second)},
			{fp(3), at(30 * time.Second)},
			{fp(4), at(20 * time.Second)},
		}, 0, []int{4, 3, 1}},
		{"a last use after now counts as now", []saved{
			{fp(1), at(time.Hour)},
		}, 0, []int{1}},
		{"Restore leaves a live entry as it is", []saved{
			{fp(1), at(50 * time.Second)},
			{fp(1), at(10 * time.Second)},
		}, 0, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(3, ttl, hashFP)
			now := at(time.Minute)
			for _, e := range tt.restore {
				s.Restore(e.key, e.last, now)
				checkInvariants(t, s)
			}
			if tt.probe != 0 {
				s.Prove(fp(tt.probe), now)
			}
			var got []int
			for _, e := range snapshot(s) {
				for k := 1; k <= 4; k++ {
					if e.key == fp(k) && s.Proven(e.key, now) {
						got = append(got, k)
					}
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("proven in Each order: %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("proven in Each order: %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestEachThenRestoreRebuildsTheSet(t *testing.T) {
	const ttl = time.Hour
	a := New(100, ttl, hashFP)
	for i := range 300 {
		a.Prove(fp(i%150), t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(time.Hour)
	snap := snapshot(a)
	// Restore oldest first, as a caller loading a saved set does.
	oldestFirst := slices.Clone(snap)
	slices.SortStableFunc(oldestFirst, func(x, y saved) int { return x.last.Compare(y.last) })
	b := New(100, ttl, hashFP)
	b.seed = a.seed // same shards; a new seed may overfill some and evict their oldest
	for _, e := range oldestFirst {
		// Saved times lose their monotonic reading, as they would on disk.
		b.Restore(e.key, time.Unix(0, e.last.UnixNano()), now)
	}
	checkInvariants(t, b)
	restored := snapshot(b)
	if len(restored) != len(snap) {
		t.Fatalf("restored %d entries, saved %d", len(restored), len(snap))
	}
	for i := range snap { // the same shards in the same least-recently-used order
		if restored[i].key != snap[i].key || !restored[i].last.Equal(snap[i].last) {
			t.Fatalf("entry %d: restored %x at %v, saved %x at %v", i, restored[i].key, restored[i].last, snap[i].key, snap[i].last)
		}
	}
}

func TestRestoredLastUseAfterNowExpiresATTLAfterNow(t *testing.T) {
	const ttl = time.Minute
	s := New(3, ttl, hashFP)
	now := t0.Add(time.Minute)
	s.Restore(fp(1), now.Add(time.Hour), now) // saved by a host whose clock ran ahead
	if !s.Contains(fp(1), now.Add(ttl-time.Second)) {
		t.Fatal("a restored entry expired before its ttl")
	}
	if s.Contains(fp(1), now.Add(ttl+time.Second)) {
		t.Fatal("a last use after now outlived the ttl counted from now")
	}
}

// Restore keeps an entry unless it has expired by now: one last used
// more than the ttl ago is not added at all, so it is not counted, and
// Proven and Sweep never report it as lapsed, since it never was live.
func TestRestoreAddsNothingExpired(t *testing.T) {
	s := New[[16]byte](2, time.Hour, hashFP)
	var lapsed []time.Time
	s.OnLapse(func(_ [16]byte, at time.Time, _ bool) { lapsed = append(lapsed, at) })
	s.Restore(fp(1), t0.Add(-2*time.Hour), t0)
	checkInvariants(t, s)
	if n := s.Len(); n != 0 {
		t.Fatalf("Len() = %d after restoring an entry expired an hour ago, want 0", n)
	}
	if s.Proven(fp(1), t0) {
		t.Fatal("an expired entry restored is proven")
	}
	if n := s.Sweep(t0); n != 0 {
		t.Fatalf("Sweep removed %d, want 0", n)
	}
	if len(lapsed) != 0 {
		t.Fatalf("OnLapse heard of %d lapses of a key that was never live", len(lapsed))
	}
}
