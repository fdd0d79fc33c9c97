package mcplimit

import (
	"testing"
	"time"
)

// Past the threshold, one event is logged per sampleEvery refusals: the
// sampleEvery-th refusal past it is logged, representing all of them.
func TestSampledEventRepresentsSampleEveryRefusals(t *testing.T) {
	s := newSampler()
	k := sampleKey{layer: layerTenant}
	t0 := time.Now()
	for range sampleThreshold {
		s.record(k, t0)
	}
	for i := 1; i < sampleEvery; i++ {
		if n, _ := s.record(k, t0); n != 0 {
			t.Fatalf("refusal %d past the threshold logged, representing %d", i, n)
		}
	}
	if n, _ := s.record(k, t0); n != sampleEvery {
		t.Fatalf("refusal %d past the threshold represents %d, want %d", sampleEvery, n, sampleEvery)
	}
}

// A drain leaves a window that has not ended alone: its refusals go on
// being sampled (no new run of sampleThreshold events), and what it holds
// is logged once it ends.
func TestDrainLeavesAYoungWindowAlone(t *testing.T) {
	s := newSampler()
	k := sampleKey{layer: layerTenant}
	t0 := time.Now()
	for range sampleThreshold + 5 {
		s.record(k, t0)
	}
	if left := s.drain(t0.Add(sampleWindow/2), false); len(left) != 0 {
		t.Fatalf("a drain within the window gave %v, want nothing", left)
	}
	if n, _ := s.record(k, t0.Add(sampleWindow/2)); n != 0 {
		t.Fatalf("a refusal past the threshold, after a drain within its window, logged representing %d", n)
	}
	if left := s.drain(t0.Add(sampleWindow), false); left[k] != 6 {
		t.Fatalf("the drain once the window ended gave %d, want the 6 refusals it left", left[k])
	}
}

// A window whose refusals were all logged leaves nothing to drain: no
// event representing 0 refusals.
func TestDrainGivesNoEmptyCount(t *testing.T) {
	s := newSampler()
	k := sampleKey{layer: layerTenant, dry: true}
	t0 := time.Now()
	s.record(k, t0)
	for _, all := range []bool{false, true} {
		if left := s.drain(t0.Add(2*sampleWindow), all); len(left) != 0 {
			t.Fatalf("drain (all %v) of a window with every refusal logged gave %v, want nothing", all, left)
		}
		s.record(k, t0)
	}
}
