package quota

import (
	"context"
	"time"
)

// Load reads the shared totals of the current periods, so that a restarted
// instance continues from what was flushed. A failure marks the Counter
// degraded and is returned, but the Counter keeps working in memory.
func (c *Counter) Load(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if c.storage == nil {
		return nil
	}
	now := c.clock()
	err := c.readCurrent(ctx, now)
	c.report(err, now, false)
	return err
}

// Refresh reads the shared totals of the current periods between flushes,
// so that other instances' pushed counts are seen sooner. Unlike Load and
// Flush it leaves the degraded state alone: only a flush, which also pushes
// the pending deltas, decides whether the store is healthy.
func (c *Counter) Refresh(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if c.storage == nil {
		return nil
	}
	return c.readCurrent(ctx, c.clock())
}

// readCurrent reads and adopts the shared totals of the current periods.
// The caller holds flushMu.
func (c *Counter) readCurrent(ctx context.Context, now time.Time) error {
	c.mu.Lock()
	jobs := make([]job, 0, len(c.periods))
	for _, p := range c.periods {
		jobs = append(jobs, job{b: c.bucketLocked(p, now, true), moves: c.moves})
	}
	c.mu.Unlock()
	err := c.runJobs(ctx, jobs, nil)
	c.finishJobs(jobs, now)
	return err
}
