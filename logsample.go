package mcplimit

import (
	"sync"
	"time"
)

// Refusal events are logged one by one until a flood passes
// sampleThreshold events in one sampleWindow for one layer; past that,
// one event is logged per sampleEvery refusals, carrying
// represents_count, and whatever is left over is logged when the window
// ends or the zone stops, so the represents_count of all events always
// sums to the number of refusals.
const (
	sampleWindow    = time.Second
	sampleThreshold = 20
	sampleEvery     = 100
)

// sampleKey separates enforced and dry-run refusals of one layer.
type sampleKey struct {
	layer layer
	dry   bool
}

type sampleState struct {
	windowStart time.Time
	seen        uint64
	pending     uint64
}

// sampler decides which refusal events are logged.
type sampler struct {
	mu    sync.Mutex
	state map[sampleKey]*sampleState
}

func newSampler() *sampler { return &sampler{state: map[sampleKey]*sampleState{}} }

// record counts one refusal and returns how many refusals the event to
// log now represents (0: do not log), and how many the window that ended
// before it left unrepresented when no drain came in between (the zone's
// loop drains once a second, and a flood goes on past a window's end):
// they are logged apart, as a drain logs them.
func (s *sampler) record(k sampleKey, now time.Time) (n, heldBack uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[k]
	if st == nil {
		st = &sampleState{windowStart: now}
		s.state[k] = st
	}
	if now.Sub(st.windowStart) >= sampleWindow {
		heldBack = st.pending
		st.windowStart, st.seen, st.pending = now, 0, 0
	}
	st.seen++
	if st.seen <= sampleThreshold {
		return 1, heldBack
	}
	st.pending++
	if st.pending >= sampleEvery {
		n = st.pending
		st.pending = 0
	}
	return n, heldBack
}

// drain returns the refusals not yet represented by a logged event in
// windows that have ended, or in every window when all is set (the zone
// stops: no later event would carry them), and forgets them.
func (s *sampler) drain(now time.Time, all bool) map[sampleKey]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[sampleKey]uint64
	for k, st := range s.state {
		if !all && now.Sub(st.windowStart) < sampleWindow {
			continue
		}
		if st.pending > 0 {
			if out == nil {
				out = map[sampleKey]uint64{}
			}
			out[k] = st.pending
		}
		delete(s.state, k)
	}
	return out
}
