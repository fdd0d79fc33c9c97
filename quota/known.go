package quota

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The known store persists the proven identity fingerprints of a zone with
// their last-use Unix times, at <Prefix>/known, as lines
// "<fingerprint> <unixSeconds>[.<millis>]\n", so that a restart does not
// force every tenant to prove itself again, and keeps the order of their
// last uses (the least recently used go first) to the millisecond. A
// forget is kept there too, as "!<fingerprint> <unixSeconds>[.<millis>]",
// until the ttl passes: another instance that still holds the identity,
// used before the forget, must not write it back. Stores of whole seconds
// (earlier versions) read as they are.

// KnownEntry is one proven identity of the known store: its fingerprint
// (a valid key: not empty, no space, no newline) and its last use in Unix
// milliseconds.
type KnownEntry struct {
	Key  string
	Last int64
}

// SaveKnown merges changes into the known store under Lock(<Prefix>/known):
// it loads the store, keeps the larger last use for every entry of adds,
// deletes every stored entry of forgets whose last use is not after the
// forget time, drops every entry (stored or added) last used at or before
// a forget already stored (another instance's, or an earlier save's), drops
// entries last used before now-ttl (ttl > 0), stores the forgets of the
// last ttl with them, and stores the result, sorted by key, unless nothing
// changed. Entries of adds with an invalid key are ignored. SaveKnown
// reuses adds: it sorts and compacts the slice in place.
//
// An entry of adds is never deleted by the forgets passed with it: adds is
// the caller's own set, read after its forgets were taken, so a key in it
// was proven again since it was forgotten (forget times, in milliseconds,
// are too coarse to tell a forget from a new proof in the same one).
//
// The merge is a join of two sorted lists, not a map: saving 100k
// identities takes tens of milliseconds and no per-entry allocation.
func (c *Counter) SaveKnown(ctx context.Context, adds []KnownEntry, forgets map[string]int64, ttl time.Duration, now time.Time) error {
	if c.storage == nil {
		return nil
	}
	key := c.knownKey
	if err := c.held.Release(ctx, c.storage, c.lockTimeout); err != nil {
		return err
	}
	err := c.held.Lock(ctx, c.storage, key, c.lockTimeout, c.clock())
	if err != nil {
		return fmt.Errorf("quota: lock %s: %w", key, err)
	}
	err = c.mergeKnown(ctx, key, adds, forgets, ttl, now)
	if uerr := c.held.Unlock(ctx, c.storage, key, c.lockTimeout); uerr != nil && err == nil {
		err = uerr
	}
	return err
}

// forgetsKeptAtLeast is how long a stored forget is kept at least,
// whatever the saving instance's ttl: instances sharing storage may run
// different known_ttl values (during a rolling change), and a forget must
// outlive another instance's copy of the identity, kept for that one's
// ttl, or its next save writes the identity back as proven. It is the
// default known_ttl, which a lowered ttl is then covered by.
const forgetsKeptAtLeast = 24 * time.Hour

// mergeKnown is the locked part of SaveKnown.
func (c *Counter) mergeKnown(ctx context.Context, key string, adds []KnownEntry, forgets map[string]int64, ttl time.Duration, now time.Time) error {
	data, err := c.load(ctx, key)
	if err != nil {
		return err
	}
	stored, storedTombs := splitForgets(latestByKey(parseKnown(data)))
	tombs := maps.Clone(storedTombs)
	adds = latestByKey(slices.DeleteFunc(adds, func(e KnownEntry) bool { return !validKeyString(e.Key) || isForget(e.Key) }))
	cutoff, tombCutoff := int64(math.MinInt64), int64(math.MinInt64)
	if ttl > 0 {
		cutoff = now.Add(-ttl).UnixMilli()
		tombCutoff = now.Add(-max(ttl, forgetsKeptAtLeast)).UnixMilli()
	}
	out := make([]byte, 0, len(data)+len(adds)*48)
	changed := false
	// Forgets, the stored ones and the caller's, stay until the ttl
	// passes, and at least forgetsKeptAtLeast (no entry they could delete
	// outlives that, on this instance or another).
	for k, t := range forgets {
		if _, again := slices.BinarySearchFunc(adds, k, func(e KnownEntry, k string) int { return strings.Compare(e.Key, k) }); again {
			continue // proven again since: no forget to keep
		}
		if old, ok := tombs[k]; !ok || t > old {
			tombs[k], changed = t, true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(tombs)) {
		if tombs[k] < tombCutoff {
			changed = true
			continue
		}
		out = appendKnownLine(out, "!"+k, tombs[k])
	}
	for i, j := 0, 0; i < len(stored) || j < len(adds); {
		var e KnownEntry
		inStore, added := true, true
		switch {
		case j == len(adds) || i < len(stored) && stored[i].Key < adds[j].Key:
			e, added = stored[i], false
			i++
		case i == len(stored) || adds[j].Key < stored[i].Key:
			e, inStore = adds[j], false
			j++
		default: // the same key in both
			e = stored[i]
			if adds[j].Last > e.Last {
				e.Last, changed = adds[j].Last, true
			}
			i++
			j++
		}
		t, forgot := forgets[e.Key]
		tomb, tombed := storedTombs[e.Key]
		if forgot && !added && e.Last <= t || tombed && e.Last <= tomb || e.Last < cutoff {
			changed = changed || inStore
			continue
		}
		changed = changed || !inStore
		out = appendKnownLine(out, e.Key, e.Last)
	}
	if !changed {
		return nil // nothing to write
	}
	if err := c.storage.Store(ctx, key, out); err != nil {
		return fmt.Errorf("quota: store %s: %w", key, err)
	}
	return nil
}

// isForget reports whether key is a forget's line in the known store.
func isForget(key string) bool { return strings.HasPrefix(key, "!") }

// splitForgets separates the forgets of entries (sorted by key, as
// latestByKey leaves them) from the proven identities, returning the
// identities and each forgotten key's forget time.
func splitForgets(entries []KnownEntry) ([]KnownEntry, map[string]int64) {
	tombs := map[string]int64{}
	n := 0
	for n < len(entries) && isForget(entries[n].Key) { // "!" sorts before every fingerprint
		tombs[entries[n].Key[1:]] = entries[n].Last
		n++
	}
	return entries[n:], tombs
}

// parseKnown parses the known store's lines, skipping malformed ones. The
// keys share one copy of data.
func parseKnown(data []byte) []KnownEntry {
	entries := make([]KnownEntry, 0, bytes.Count(data, []byte{'\n'})+1)
	for s := string(data); s != ""; {
		var line string
		line, s = nextLine(s)
		if k, v, ok := splitKnownLine(line); ok {
			entries = append(entries, KnownEntry{k, v})
		}
	}
	return entries
}

// latestByKey sorts entries by key (a store SaveKnown wrote is sorted
// already) and keeps one entry per key, with the largest last use.
func latestByKey(entries []KnownEntry) []KnownEntry {
	byKey := func(a, b KnownEntry) int { return strings.Compare(a.Key, b.Key) }
	if !slices.IsSortedFunc(entries, byKey) {
		slices.SortFunc(entries, byKey)
	}
	out := entries[:0]
	for _, e := range entries {
		if n := len(out); n > 0 && out[n-1].Key == e.Key {
			out[n-1].Last = max(out[n-1].Last, e.Last)
			continue
		}
		out = append(out, e)
	}
	return out
}

// LoadKnown returns the known store, one entry per key with its largest
// last use, sorted by key. An absent store is empty; malformed lines are
// skipped.
func (c *Counter) LoadKnown(ctx context.Context) ([]KnownEntry, error) {
	if c.storage == nil {
		return nil, nil
	}
	data, err := c.load(ctx, c.knownKey)
	if err != nil {
		return nil, err
	}
	entries, tombs := splitForgets(latestByKey(parseKnown(data)))
	return slices.DeleteFunc(entries, func(e KnownEntry) bool {
		t, ok := tombs[e.Key]
		return ok && e.Last <= t
	}), nil
}

// appendKnownLine appends "<key> <seconds>[.<mmm>]\n" for the Unix
// milliseconds ms.
func appendKnownLine(buf []byte, key string, ms int64) []byte {
	buf = append(buf, key...)
	buf = append(buf, ' ')
	sec, frac := ms/1000, ms%1000
	if frac < 0 {
		sec, frac = sec-1, frac+1000
	}
	buf = strconv.AppendInt(buf, sec, 10)
	if frac != 0 {
		buf = append(buf, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	}
	return append(buf, '\n')
}

// splitKnownLine parses one "<key> <seconds>[.<fraction>]" line into Unix
// milliseconds; digits of the fraction beyond milliseconds are dropped.
func splitKnownLine(line string) (key string, ms int64, ok bool) {
	sp := strings.IndexByte(line, ' ')
	if sp <= 0 {
		return "", 0, false
	}
	whole, frac, dotted := strings.Cut(line[sp+1:], ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec > math.MaxInt64/1000-1 || sec < math.MinInt64/1000 {
		return "", 0, false
	}
	ms = sec * 1000
	if dotted {
		if frac == "" || len(frac) > 9 || strings.Trim(frac, "0123456789") != "" {
			return "", 0, false
		}
		n, _ := strconv.Atoi((frac + "00")[:3])
		ms += int64(n)
	}
	return line[:sp], ms, true
}
