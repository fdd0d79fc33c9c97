package quota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"time"
)

// job is the storage work of one flush for one bucket.
type job struct {
	b         *bucket
	push      bool             // push b.inflight under lock; else read only
	totals    map[string]int64 // stored totals, valid when done
	done      bool             // totals can be adopted
	malformed int              // malformed lines skipped while reading
	history   history          // the object's history as read, when done
	absent    bool             // the object was not there, when done
	sent      *sentPush        // the push stored, when push and done
	err       error
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
		case len(b.pending) > 0:
			b.inflight, b.pending = b.pending, deltas{}
			jobs = append(jobs, job{b: b, push: true})
		case b.start.Before(cur):
			c.dropLocked(b) // ended and fully pushed
		default:
			jobs = append(jobs, job{b: b})
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
	j.history, rest = splitHistory(data)
	j.absent = data == nil
	j.totals, j.malformed = parseCounts(rest, 0)
	j.done = true
}

// push adds j.b.inflight to the object of j.b under its lock. j.b.inflight is
// only read here: TryAdd reads it concurrently, nobody writes it. A Store
// that returns an error is taken as not done, so its deltas are kept; an
// Unlock error after a successful Store is reported but the deltas count as
// pushed, so they are never added twice.
func (c *Counter) push(ctx context.Context, j *job) {
	key := c.objectKey(j.b)
	if err := c.lockToPush(ctx, key); err != nil {
		j.err = fmt.Errorf("quota: lock %s: %w", key, err)
		return
	}
	data, err := c.load(ctx, key)
	if err == nil {
		c.seq++
		writer := c.writer + "-" + strconv.FormatUint(c.seq, 10)
		read, rest := splitHistory(data)
		stored, gen := read.next(writer)
		totals, buf, malformed := mergeCounts(stored.append(nil), rest, j.b.inflight)
		if err = c.storage.Store(ctx, key, buf); err != nil {
			err = fmt.Errorf("quota: store %s: %w", key, err)
		} else {
			j.totals, j.malformed, j.history, j.absent, j.done = totals, malformed, read, data == nil, true
			j.sent = &sentPush{lineage: stored.lineage, gen: gen, writer: writer, deltas: j.b.inflight}
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
		if j.done {
			c.checkSent(b, j.history)
			if damaged(b, j) {
				c.keepThroughDamage(b, j)
			}
		}
		switch {
		case j.done:
			b.shared = j.totals // includes the inflight deltas just pushed
			c.adopted = true
			if j.sent != nil {
				b.sent = append(b.sent, *j.sent)
				b.lineage = j.sent.lineage
			} else if j.history.lineage != "" {
				b.lineage = j.history.lineage
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

// checkSent looks for b's earlier pushes in h, the history of its object
// as a later read found it: a push h shows overwritten has its deltas
// counted again as pending, for the next flush to push; a push h holds, or
// cannot tell about, is done with. The caller holds c.mu.
func (c *Counter) checkSent(b *bucket, h history) {
	for i := range b.sent {
		p := &b.sent[i]
		if !h.overwrote(p) {
			continue
		}
		var n int64
		for _, d := range p.deltas {
			n += *d
		}
		addDeltas(&b.pending, p.deltas)
		if c.onRepush != nil {
			c.onRepush(b.name, n)
		}
	}
	b.sent = nil
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
