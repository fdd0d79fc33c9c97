package quota

import (
	"context"
	"errors"
	"fmt"
)

// Probe tries the first step of a push without pushing anything: it takes
// and releases the lock of the current period's object. A storage that
// reads but cannot write (a read-only folder, a full disk) passes Load and
// is found out only by a flush with counts to push; Probe finds it out at
// once and marks the Counter degraded as that flush would, until a flush
// succeeds (a probe that passes leaves it degraded: only a flush, which
// pushes the pending deltas, finds the store healthy). A lock another
// instance holds says nothing either way: Probe then changes nothing.
func (c *Counter) Probe(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if c.storage == nil {
		return nil
	}
	now := c.clock()
	c.mu.Lock()
	key := c.objectKey(c.bucketLocked(c.periods[0], now, true))
	c.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, firstTry)
	err := c.storage.Lock(lctx, key)
	cancel()
	switch {
	case err == nil:
		err = c.held.Unlock(ctx, c.storage, key, c.lockTimeout)
	case errors.Is(err, context.DeadlineExceeded):
		return nil // held elsewhere
	default:
		err = fmt.Errorf("quota: lock %s: %w", key, err)
	}
	if err != nil {
		c.report(err, now, false)
	}
	return err
}
