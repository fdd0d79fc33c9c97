package quota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"
)

// breakAfterWaits is how many lock waits every try to take a lock must
// have found it held, running, before Locks.Lock breaks it.
const breakAfterWaits = 6

// Locks takes storage locks and remembers the ones its owner could not
// release. certmagic's file storage keeps a lock's file fresh for as long
// as the file exists, so a lock whose one Unlock failed would be held
// until the process exits: every instance's work under it, this one's
// included, would wait on it. Release the held locks before taking any
// again, and fail while one stays held (a Counter's Flush and SaveKnown
// do: the counts stay pending and the zone degraded until it is
// released). The zero value is ready to use.
type Locks struct {
	mu    sync.Mutex // held across Release's storage calls: one at a time
	names map[string]struct{}
	// waited holds, per lock name, when a try to take it first timed out
	// with no try taking it since.
	waited map[string]time.Time
}

// Lock takes the lock name, waiting at most timeout. A lock that every try
// has found held for breakAfterWaits times timeout running (a minute at
// the default timeout) is broken: removed, so that the next try takes it.
// A push holds its lock for the moments its load and store take, so no
// live holder holds one that long; but certmagic's file storage can keep a
// crashed instance's lock fresh forever: the goroutine that refreshes a
// lock another process took and released refreshes whatever file has its
// name when it wakes, and goes on while that file exists.
func (h *Locks) Lock(ctx context.Context, st Storage, name string, timeout time.Duration, now time.Time) error {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	err := st.Lock(lctx, name)
	cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		delete(h.waited, name)
		return nil
	case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
		return err
	}
	since, ok := h.waited[name]
	if !ok {
		if h.waited == nil {
			h.waited = map[string]time.Time{}
		}
		h.waited[name] = now
		return err
	}
	if now.Sub(since) < breakAfterWaits*timeout {
		return err
	}
	delete(h.waited, name)
	if uerr := unlockOnce(ctx, st, name, timeout); uerr != nil && !errors.Is(uerr, fs.ErrNotExist) {
		return fmt.Errorf("%w; breaking the lock, held at every try for %v: %w", err, now.Sub(since).Round(time.Second), uerr)
	}
	return fmt.Errorf("%w; the lock, held at every try for %v, is broken", err, now.Sub(since).Round(time.Second))
}

// firstTry bounds TryLock's wait: a storage's first try to take a lock
// (creating certmagic's lock file) runs before any wait, and a held lock
// then makes it wait for the context.
const firstTry = 10 * time.Millisecond

// TryLock takes the lock name if one try finds it free, and reports
// whether it did; Lock then takes it when it did not.
func (h *Locks) TryLock(ctx context.Context, st Storage, name string) bool {
	tctx, cancel := context.WithTimeout(ctx, firstTry)
	err := st.Lock(tctx, name)
	cancel()
	if err != nil {
		return false
	}
	h.mu.Lock()
	delete(h.waited, name)
	h.mu.Unlock()
	return true
}

// Unlock releases the lock name, remembering it when that fails. Unlock
// runs even when ctx is done, so the lock is not left to go stale.
func (h *Locks) Unlock(ctx context.Context, st Storage, name string, timeout time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := unlockOnce(ctx, st, name, timeout); err != nil {
		if h.names == nil {
			h.names = map[string]struct{}{}
		}
		h.names[name] = struct{}{}
		return fmt.Errorf("quota: unlock %s: %w", name, err)
	}
	return nil
}

// Release retries the unlock of every held lock and returns the first
// failure. A lock that is gone (it went stale and was removed) counts as
// released.
func (h *Locks) Release(ctx context.Context, st Storage, timeout time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first error
	for name := range h.names {
		err := unlockOnce(ctx, st, name, timeout)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			delete(h.names, name)
		} else if first == nil {
			first = fmt.Errorf("quota: unlock %s, held since an unlock failed: %w", name, err)
		}
	}
	return first
}

// unlockOnce calls st.Unlock once, bounded by timeout and not by ctx's end.
func unlockOnce(ctx context.Context, st Storage, name string, timeout time.Duration) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return st.Unlock(uctx, name)
}
