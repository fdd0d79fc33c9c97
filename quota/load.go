package quota

import "context"

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
	c.mu.Lock()
	jobs := make([]job, 0, len(c.periods))
	for _, p := range c.periods {
		jobs = append(jobs, job{b: c.bucketLocked(p, now, true)})
	}
	c.mu.Unlock()
	err := c.runJobs(ctx, jobs)
	c.finishJobs(jobs, now)
	c.report(err, now, false)
	return err
}
