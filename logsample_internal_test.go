package mcplimit

import (
	"testing"
	"time"
)

// The first refusal of a new window carries the refusals the last window
// left unlogged when no drain came in between (the zone's loop drains
// once a second, and a flood goes on past a window's end): the
// represented counts still sum to the refusals, and nothing is counted
// twice by a later drain.
func TestSampledRefusalsLeftInAWindowRideOnTheNextOne(t *testing.T) {
	s := newSampler()
	k := sampleKey{layer: layerTenant}
	t0 := time.Now()
	var logged uint64
	for range sampleThreshold + 5 {
		logged += s.record(k, t0)
	}
	if logged != sampleThreshold {
		t.Fatalf("represented %d of %d refusals in the window, want the first %d", logged, sampleThreshold+5, sampleThreshold)
	}
	if n := s.record(k, t0.Add(sampleWindow)); n != 6 {
		t.Fatalf("the next window's first event represents %d, want itself and the 5 left over", n)
	}
	if left := s.drain(t0.Add(2*sampleWindow), true); left[k] != 0 {
		t.Fatalf("a drain after that gives %d more, want none", left[k])
	}
}
