package quota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"
)

// Locks remembers the storage locks its owner took and could not release.
// certmagic's file storage keeps a lock's file fresh for as long as the
// file exists, so a lock whose one Unlock failed would be held until the
// process exits: every instance's work under it, this one's included,
// would wait on it. Release the held locks before taking any again, and
// fail while one stays held (a Counter's Flush and SaveKnown do: the
// counts stay pending and the zone degraded until it is released). The
// zero value is ready to use.
type Locks struct {
	mu    sync.Mutex // held across the storage calls: one release at a time
	names map[string]struct{}
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
