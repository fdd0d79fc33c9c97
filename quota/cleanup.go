package quota

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"time"
)

// cleanup deletes the objects of periods that ended before the previous
// period, once per UTC day. It tolerates names it did not write and objects
// that vanish meanwhile. Failures are counted in State.CleanupFailures and
// retried on the next flush; they never degrade the Counter.
func (c *Counter) cleanup(ctx context.Context, now time.Time) {
	day := Day.Start(now)
	if day.Equal(c.cleanedDay) {
		return
	}
	names, err := c.storage.List(ctx, c.quotaDir, false)
	// An absent directory, or an entry vanishing while listing (certmagic's
	// temp files), is not a failure: use what was listed, and look again
	// next flush unless nothing was listed at all.
	complete := err == nil || len(names) == 0
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.countCleanupFailure()
		return
	}
	for _, name := range names {
		base := path.Base(name)
		p, start, ok := parseObjectName(base)
		if !ok || !start.Before(p.prev(p.Start(now))) {
			continue
		}
		err := c.storage.Delete(ctx, path.Join(c.quotaDir, base))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			complete = false
			c.countCleanupFailure()
		}
	}
	if complete {
		c.cleanedDay = day
	}
}

func (c *Counter) countCleanupFailure() {
	c.mu.Lock()
	c.status.cleanupFailures++
	c.mu.Unlock()
}
