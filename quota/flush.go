package quota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"time"
)

// job is the storage work of one flush for one bucket.
type job struct {
	b         *bucket
	push      bool             // push b.inflight under lock; else read only
	floor     map[string]int64 // b.shared, for a push: restored if the object is damaged
	seen      history          // b.seen, for a push
	retired   []string         // b.retired, for a push
	moves     uint64           // the Counter's moves when the flush began
	totals    map[string]int64 // stored totals, valid when done
	done      bool             // totals can be adopted
	malformed int              // malformed lines skipped while reading
	history   history          // the object's history as read, when done
	sent      *sentPush        // the push stored, when push and done
	stored    history          // the history it stored, when push and done
	restored  int64            // counts a push restored to a damaged object
	damaged   bool             // the push found the object damaged
	err       error
}

// pushLease bounds the time from taking an object's lock to storing it.
// A lock does not fence a writer that pauses (a frozen VM, SIGSTOP, swap):
// once the pause outlasts the lock's freshness (certmagic's file storage
// takes a lock untouched for 10s as stale), another instance breaks it and
// pushes, and the paused one, waking, would store what it merged before
// over that push. A push that finds this much time gone since it took the
// lock stores nothing: its deltas stay pending for the next flush, which
// merges them on top of whatever was stored meanwhile. A pause after this
// check, inside the store itself, is caught by the object's history (see
// checkSent).
const pushLease = 5 * time.Second

// heldFor is how long ago, at now, a lock was taken at: the longer of the
// monotonic and the wall-clock readings, since a frozen VM may stop the
// first while the second jumps ahead when it wakes.
func heldFor(at, now time.Time) time.Duration {
	d := now.Sub(at)
	if w := now.Round(0).Sub(at.Round(0)); w > d {
		d = w
	}
	return d
}

// Flush pushes this instance's pending deltas and adopts the shared totals.
// For every period with pending deltas it locks the period's object, loads
// it, adds the deltas, stores it and unlocks; a period of a configured kind
// with nothing pending is only read. The storage I/O runs without blocking
// TryAdd. On failure the deltas are kept for the next flush and the Counter
// is marked degraded. The error is also reflected in State. Flush also
// releases ended periods and, once a day, deletes objects of periods older
// than the previous one.
func (c *Counter) Flush(ctx context.Context) error {
	return c.FlushThen(ctx, nil)
}

// FlushThen is Flush followed, once the counts are pushed, by then (when
// not nil): more of the flush's storage work, such as SaveKnown, whose
// error fails the flush as the counts' own would, in State and towards
// degraded. Reporting the flush before then ran would mark the Counter
// available at every flush and degraded again right after.
func (c *Counter) FlushThen(ctx context.Context, then func(context.Context) error) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	now := c.clock()
	var err error
	if c.storage == nil {
		c.foldLocal(now)
	} else {
		jobs := c.beginFlush(now)
		err = c.runJobs(ctx, jobs, c.held.Release(ctx, c.storage, c.lockTimeout))
		c.finishJobs(jobs, now)
		if err == nil {
			c.cleanup(ctx, now)
		}
	}
	if err == nil && then != nil {
		err = then(ctx)
	}
	c.report(err, now, true)
	return err
}

// beginFlush decides the work of a flush and moves pending deltas to
// inflight, where Used still sees them while the I/O runs.
func (c *Counter) beginFlush(now time.Time) []job {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.periods {
		c.bucketLocked(p, now, true)
	}
	jobs := make([]job, 0, len(c.buckets))
	for _, b := range c.buckets {
		cur := b.period.Start(now)
		switch {
		case b.start.Before(b.period.prev(cur)):
			// Older than the previous period: its object is garbage
			// collected and its counts can no longer refuse anything.
			c.dropLocked(b)
		case len(b.pending) > 0 || b.keeping:
			b.inflight, b.pending = b.pending, deltas{}
			jobs = append(jobs, job{b: b, push: true, floor: b.shared, seen: b.seen, retired: b.retired, moves: c.moves})
		case b.start.Before(cur):
			c.dropLocked(b) // ended and fully pushed
		default:
			jobs = append(jobs, job{b: b, moves: c.moves})
		}
	}
	return jobs
}

// runJobs does the storage I/O of jobs without holding c.mu. After the first
// failure the remaining jobs are skipped and fail with the same error; a
// non-nil err (a lock still held) fails them all.
func (c *Counter) runJobs(ctx context.Context, jobs []job, err error) error {
	for i := range jobs {
		j := &jobs[i]
		if err != nil {
			j.err = err
			continue
		}
		if j.push {
			c.push(ctx, j)
		} else {
			c.read(ctx, j)
		}
		err = j.err
	}
	return err
}

// read loads the object of j.b without locking it.
func (c *Counter) read(ctx context.Context, j *job) {
	data, err := c.load(ctx, c.objectKey(j.b))
	if err != nil {
		j.err = err
		return
	}
	var rest []byte
	var cut int
	j.history, rest, cut = splitObject(data)
	j.totals, j.malformed = parseCounts(rest, 0)
	j.malformed += cut
	j.done = true
}

// push adds j.b.inflight to the object of j.b under its lock, and to a
// damaged object what j.floor holds above it (see damage.go).
// j.b.inflight is only read here: TryAdd reads it concurrently, nobody
// writes it. A Store that returns an error, or that pushLease forbids, is
// taken as not done, so its deltas are kept; an Unlock error after a
// successful Store is reported but the deltas count as pushed, so they are
// never added twice.
func (c *Counter) push(ctx context.Context, j *job) {
	key := c.objectKey(j.b)
	if err := c.lockToPush(ctx, key); err != nil {
		j.err = fmt.Errorf("quota: lock %s: %w", key, err)
		return
	}
	locked := c.clock()
	data, err := c.load(ctx, key)
	if err == nil {
		c.seq++
		writer := c.writer + "-" + strconv.FormatUint(c.seq, 10)
		read, rest, cut := splitObject(data)
		stored, gen := read.next(writer)
		pushed := j.b.inflight
		totals, buf, malformed := mergeCounts(stored.append(nil), rest, pushed)
		if j.damaged = damaged(j.seen, read, malformed+cut); j.damaged {
			if malformed+cut > 0 || read.lineage == j.seen.lineage || slices.Contains(j.retired, read.lineage) {
				// A history cut short or rolled back counts generations
				// again from where it was cut, and one put back from
				// before a repair goes on in a lineage others may have
				// read further, as if pushes made since were overwritten:
				// the repaired object starts a new one, which they take
				// as damage.
				stored, gen = history{}.next(writer)
			}
			if extra := aboveFloor(j.floor, totals, pushed); extra != nil {
				j.restored = extra.sum()
				pushed = pushed.clone()
				addDeltas(&pushed, extra)
			}
			totals, buf, malformed = mergeCounts(stored.append(nil), rest, pushed)
		}
		malformed += cut
		buf = append(buf, endLine...)
		if held := heldFor(locked, c.clock()); held > pushLease {
			err = fmt.Errorf("quota: push to %s not stored: %v since its lock was taken, more than %v (a pause past the lock, which another instance may have broken); pushed again at the next flush",
				key, held.Round(time.Millisecond), pushLease)
		} else if err = c.storage.Store(ctx, key, buf); err != nil {
			err = fmt.Errorf("quota: store %s: %w", key, err)
		} else {
			j.totals, j.malformed, j.history, j.done = totals, malformed, read, true
			j.sent = &sentPush{lineage: stored.lineage, gen: gen, writer: writer, deltas: pushed}
			j.stored = stored
		}
	}
	if uerr := c.held.Unlock(ctx, c.storage, key, c.lockTimeout); uerr != nil && err == nil {
		// The store happened: the deltas are pushed, only report.
		err = uerr
	}
	j.err = err
}

// lockToPush takes the lock of the object key for a push. With
// onLockWait set, a first try takes it at once or finds it held, and the
// wait runs between onLockWait and the function it returns.
func (c *Counter) lockToPush(ctx context.Context, key string) error {
	if c.onLockWait == nil {
		return c.held.Lock(ctx, c.storage, key, c.lockTimeout, c.clock())
	}
	if c.held.TryLock(ctx, c.storage, key) {
		return nil
	}
	waited := c.onLockWait()
	defer waited()
	return c.held.Lock(ctx, c.storage, key, c.lockTimeout, c.clock())
}

// load reads key; an absent key is nil.
func (c *Counter) load(ctx context.Context, key string) ([]byte, error) {
	data, err := c.storage.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("quota: load %s: %w", key, err)
	}
	return data, nil
}

// finishJobs adopts what was read or stored and puts back the deltas whose
// push failed. Deltas counted during the I/O stay in pending.
func (c *Counter) finishJobs(jobs []job, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		b := j.b
		c.status.malformed += uint64(j.malformed)
		fresh := j.moves == c.moves // else the storage this history is from is gone
		if j.done && fresh {
			hurt := j.damaged || !j.push && damaged(b.seen, j.history, j.malformed)
			if !hurt { // else the floor restores what it lost, pushes of b's included
				c.checkSent(b, j.history)
			}
			if !j.push && hurt {
				kept := keepFloor(b, j)
				if !b.keeping && c.onDamage != nil {
					c.onDamage(b.name, j.malformed, kept, false)
				}
				b.keeping = true
			}
		}
		switch {
		case j.done:
			b.shared = j.totals // includes the inflight deltas just pushed
			c.adopted = true
			switch {
			case !fresh:
			case j.sent != nil:
				b.sent = trimSent(append(b.sent, *j.sent), true)
				b.keeping = false
				b.see(j.stored)
				if j.damaged && (j.restored > 0 || j.malformed > 0) && c.onDamage != nil {
					c.onDamage(b.name, j.malformed, j.restored, true)
				}
			case !b.keeping:
				b.see(j.history)
			}
		case j.push:
			mergeDeltas(b)
		}
		b.inflight = nil
		if j.done && len(b.pending) == 0 && b.start.Before(b.period.Start(now)) {
			c.dropLocked(b)
		}
	}
}

// keepSent is how many of its last pushes to an object a Counter watches
// for an overwrite, keeping their deltas: a writer that paused inside its
// store (after pushLease's check) overwrites every push made since its
// load, however many reads have shown them since. The ones kept hold at
// most keepSentCounts keys together, but for the last push until the next
// read: a Counter pushing many keys per flush keeps their deltas no longer
// than it did pushing them.
const (
	keepSent       = 8
	keepSentCounts = 16384
)

// trimSent drops the oldest of sent beyond keepSent and keepSentCounts,
// keeping the last whatever its size when keepLast.
func trimSent(sent []sentPush, keepLast bool) []sentPush {
	n, keys := len(sent), 0
	if keepLast && n > 0 {
		keys = -len(sent[n-1].deltas) // not counted
	}
	for n > 0 && len(sent)-n < keepSent && keys+len(sent[n-1].deltas) <= keepSentCounts {
		keys += len(sent[n-1].deltas)
		n--
	}
	return slices.Delete(sent, 0, n)
}

// checkSent looks for b's last pushes in h, the history of its object as a
// later read found it: a push h shows overwritten has its deltas counted
// again as pending, for the next flush to push; a push h holds stays
// watched; one h cannot tell about (another lineage, or older than h
// keeps) is done with. The caller holds c.mu.
func (c *Counter) checkSent(b *bucket, h history) {
	kept := b.sent[:0]
	for _, p := range b.sent {
		switch covers, present := h.tells(&p); {
		case covers && present:
			kept = append(kept, p)
		case covers:
			addDeltas(&b.pending, p.deltas.clone())
			if c.onRepush != nil {
				c.onRepush(b.name, p.deltas.sum())
			}
		}
	}
	clear(b.sent[len(kept):])
	b.sent = trimSent(kept, false)
}

// mergeDeltas adds b.inflight back into b.pending.
func mergeDeltas(b *bucket) {
	addDeltas(&b.pending, b.inflight)
}

// addDeltas adds from into *to, iterating the smaller map; from is not
// used after.
func addDeltas(to *deltas, from deltas) {
	if len(*to) < len(from) {
		*to, from = from, *to
	}
	for k, d := range from {
		switch p := (*to)[k]; {
		case p == nil:
			(*to)[k] = d
		case *p+*d == 0:
			delete(*to, k)
		default:
			*p += *d
		}
	}
}

// foldLocal is Flush without storage: pending becomes shared.
func (c *Counter) foldLocal(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.buckets {
		if b.start.Before(b.period.Start(now)) {
			c.dropLocked(b)
			continue
		}
		for k, d := range b.pending {
			if v := b.shared[k] + *d; v != 0 {
				b.shared[k] = v
			} else {
				delete(b.shared, k)
			}
		}
		b.pending = deltas{}
	}
}

// objectKey returns the storage key of b's object.
func (c *Counter) objectKey(b *bucket) string {
	return path.Join(c.quotaDir, b.name)
}
