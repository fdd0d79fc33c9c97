package quota

import (
	"context"
	"fmt"
	"time"
)

// The known store persists the proven identity fingerprints of a zone with
// their last-use Unix times, at <Prefix>/known, as lines
// "<fingerprint> <unixSeconds>\n", so that a restart does not force every
// tenant to prove itself again.

// SaveKnown merges changes into the known store under Lock(<Prefix>/known):
// it loads the store, keeps the larger last use for every entry of adds,
// deletes every entry of forgets whose stored last use is not after the
// forget time, drops entries last used before now-ttl (ttl > 0), and stores
// the result. Fingerprints must be valid keys (no space, no newline).
func (c *Counter) SaveKnown(ctx context.Context, adds map[string]int64, forgets map[string]int64, ttl time.Duration, now time.Time) error {
	if c.storage == nil {
		return nil
	}
	key := c.knownKey
	lctx, cancel := context.WithTimeout(ctx, c.lockTimeout)
	err := c.storage.Lock(lctx, key)
	cancel()
	if err != nil {
		return fmt.Errorf("quota: lock %s: %w", key, err)
	}
	err = c.mergeKnown(ctx, key, adds, forgets, ttl, now)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.lockTimeout)
	if uerr := c.storage.Unlock(uctx, key); uerr != nil && err == nil {
		err = fmt.Errorf("quota: unlock %s: %w", key, uerr)
	}
	cancel()
	return err
}

// mergeKnown is the locked part of SaveKnown.
func (c *Counter) mergeKnown(ctx context.Context, key string, adds, forgets map[string]int64, ttl time.Duration, now time.Time) error {
	data, err := c.load(ctx, key)
	if err != nil {
		return err
	}
	m := parseLatest(data)
	n := len(m)
	changed := false
	for fp, t := range adds {
		if old, ok := m[fp]; validKey(fp) && (!ok || t > old) {
			m[fp] = t
			changed = true
		}
	}
	for fp, t := range forgets {
		if old, ok := m[fp]; ok && old <= t {
			delete(m, fp)
		}
	}
	if ttl > 0 {
		cutoff := now.Add(-ttl).Unix()
		for fp, t := range m {
			if t < cutoff {
				delete(m, fp)
			}
		}
	}
	if !changed && len(m) == n {
		return nil // nothing to write
	}
	if err := c.storage.Store(ctx, key, appendLines(make([]byte, 0, len(m)*48), m)); err != nil {
		return fmt.Errorf("quota: store %s: %w", key, err)
	}
	return nil
}

// LoadKnown returns the known store: fingerprint → last-use Unix seconds.
// An absent store is empty; malformed lines are skipped.
func (c *Counter) LoadKnown(ctx context.Context) (map[string]int64, error) {
	if c.storage == nil {
		return map[string]int64{}, nil
	}
	data, err := c.load(ctx, c.knownKey)
	if err != nil {
		return nil, err
	}
	return parseLatest(data), nil
}
