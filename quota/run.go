package quota

import (
	"context"
	"time"
)

// DefaultInterval is the flush interval of Run until SetInterval changes it.
const DefaultInterval = 30 * time.Second

// finalFlushTimeout bounds the flush Run does on exit.
const finalFlushTimeout = 5 * time.Second

// SetInterval changes the flush interval of Run, live. A running Run restarts
// its wait with the new interval. d <= 0 restores DefaultInterval.
func (c *Counter) SetInterval(d time.Duration) {
	if d <= 0 {
		d = DefaultInterval
	}
	c.interval.Store(int64(d))
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Interval returns the current flush interval of Run.
func (c *Counter) Interval() time.Duration {
	return time.Duration(c.interval.Load())
}

// Run flushes every interval until ctx is done, then flushes once more with
// a fresh context bounded by a short timeout, so a clean shutdown loses
// nothing. interval > 0 sets the interval as SetInterval does; otherwise the
// current one is used. Flush errors are reflected in State and OnDegraded.
func (c *Counter) Run(ctx context.Context, interval time.Duration) {
	if interval > 0 {
		c.interval.Store(int64(interval))
	}
	t := time.NewTimer(c.Interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), finalFlushTimeout)
			_ = c.Flush(fctx)
			cancel()
			return
		case <-c.wake:
			t.Reset(c.Interval())
		case <-t.C:
			_ = c.Flush(ctx)
			t.Reset(c.Interval())
		}
	}
}
