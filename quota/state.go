package quota

import "time"

// State is a snapshot of a Counter's health and size, for metrics and logs.
type State struct {
	// Degraded is true while storage fails; counts are then kept in memory.
	Degraded bool
	// LastFlush is the time of the last successful Flush.
	LastFlush time.Time
	// LastError is the last Flush or Load error, kept after recovery.
	LastError string
	// LastErrorTime is when LastError happened.
	LastErrorTime time.Time
	// Pending is the number of key/period pairs with unpushed deltas.
	Pending int
	// Tracked is the number of key/period pairs held in memory.
	Tracked int
	// Flushes counts successful Flush calls.
	Flushes uint64
	// Failures counts failed Flush and Load calls.
	Failures uint64
	// Malformed counts stored lines skipped because they could not be parsed.
	Malformed uint64
	// CleanupFailures counts failed deletions or listings of old objects.
	CleanupFailures uint64
}

// status is the mutable part of State, guarded by Counter.mu.
type status struct {
	degraded        bool
	lastFlush       time.Time
	lastErr         string
	lastErrTime     time.Time
	flushes         uint64
	failures        uint64
	malformed       uint64
	cleanupFailures uint64
}

// State returns a snapshot of the Counter's state. It walks the pending keys
// once, so it costs O(pending), not O(tracked).
func (c *Counter) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	st := State{
		Degraded:        s.degraded,
		LastFlush:       s.lastFlush,
		LastError:       s.lastErr,
		LastErrorTime:   s.lastErrTime,
		Flushes:         s.flushes,
		Failures:        s.failures,
		Malformed:       s.malformed,
		CleanupFailures: s.cleanupFailures,
	}
	for _, b := range c.buckets {
		st.Tracked += len(b.shared)
		for k := range b.pending {
			st.Pending++
			if _, ok := b.shared[k]; !ok {
				st.Tracked++
			}
		}
		for k := range b.inflight {
			if _, ok := b.pending[k]; ok {
				continue
			}
			st.Pending++
			if _, ok := b.shared[k]; !ok {
				st.Tracked++
			}
		}
	}
	return st
}

// report records the outcome of a Flush (flush set) or Load and calls
// OnDegraded on a transition. Callers hold flushMu, so transitions are
// reported in order.
func (c *Counter) report(err error, now time.Time, flush bool) {
	c.mu.Lock()
	changed := false
	if err != nil {
		c.status.failures++
		c.status.lastErr = err.Error()
		c.status.lastErrTime = now
		changed = !c.status.degraded
		c.status.degraded = true
	} else {
		if flush {
			c.status.flushes++
			c.status.lastFlush = now
		}
		changed = c.status.degraded
		c.status.degraded = false
	}
	c.mu.Unlock()
	if changed && c.onDegraded != nil {
		c.onDegraded(err != nil, err)
	}
}
