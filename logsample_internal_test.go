package mcplimit

import (
	"testing"
	"time"
)

// The first refusal of a new window hands back the refusals the last
// window left unlogged when no drain came in between (the zone's loop
// drains once a second, and a flood goes on past a window's end), to be
// logged apart: its own event represents itself alone, the represented
// counts still sum to the refusals, and nothing is counted twice by a
// later drain.
func TestRefusalsAWindowHeldBackComeBackWithTheNextOne(t *testing.T) {
	s := newSampler()
	k := sampleKey{layer: layerTenant}
	t0 := time.Now()
	var logged uint64
	for range sampleThreshold + 5 {
		n, heldBack := s.record(k, t0)
		logged += n + heldBack
	}
	if logged != sampleThreshold {
		t.Fatalf("represented %d of %d refusals in the window, want the first %d", logged, sampleThreshold+5, sampleThreshold)
	}
	if n, heldBack := s.record(k, t0.Add(sampleWindow)); n != 1 || heldBack != 5 {
		t.Fatalf("the next window's first refusal represents %d and hands back %d, want 1 and the 5 left over", n, heldBack)
	}
	for i := 2; i <= sampleThreshold+1; i++ {
		want := uint64(1)
		if i > sampleThreshold {
			want = 0 // the new window's threshold is whole, and then passed
		}
		if n, heldBack := s.record(k, t0.Add(sampleWindow)); n != want || heldBack != 0 {
			t.Fatalf("the next window's refusal %d represents %d and hands back %d, want %d and 0", i, n, heldBack, want)
		}
	}
	if left := s.drain(t0.Add(2*sampleWindow), true); left[k] != 1 {
		t.Fatalf("a drain after that gives %d, want the 1 the new window held (not the 5 again)", left[k])
	}
}
