package quota

import (
	"path"
	"strings"
	"sync"
	"time"
)

// DefaultLockTimeout bounds how long a flush waits for a storage lock when
// Config.LockTimeout is not set.
const DefaultLockTimeout = 10 * time.Second

// Config configures a Counter.
type Config struct {
	// Storage holds the shared totals. Nil keeps every count in this
	// process only.
	Storage Storage
	// Prefix is prepended to every storage key, e.g. "mcp_ratelimit/<zone>".
	Prefix string
	// Clock returns the current time for flushes. Default time.Now.
	Clock func() time.Time
	// OnDegraded is called once per transition: with true and the error
	// when storage starts failing, with false and nil when it works again.
	// It is called from Flush or Load and must not call back into them.
	OnDegraded func(degraded bool, err error)
	// LockTimeout bounds the wait for a storage lock. Default
	// DefaultLockTimeout.
	LockTimeout time.Duration
	// OnLockWait, when set, is called when a push finds its lock held,
	// before it waits for it (Caddy's file storage looks again once a
	// second), and the function it returns once the wait is over: what
	// it keeps meanwhile of the counts not yet pushed (Unpushed) then
	// outlives a crash during the wait. Both are called from Flush and
	// must not call back into it.
	OnLockWait func() (waited func())
	// OnRepush, when set, is called when a flush finds that an earlier
	// push of this Counter to object (e.g. "day-2026-11-30") was
	// overwritten by a writer that merged before it (one that paused past
	// its lock), with n, the counts it pushes again. It is called from
	// Flush or Load with the Counter's lock held and must not call back
	// into it.
	OnRepush func(object string, n int64)
	// OnDamage, when set, is called when a flush finds an object damaged
	// (see damage.go): with restored false when a read finds it, with the
	// counts kept above it from what this Counter had read before; with
	// restored true when a push repairs it, with the counts it restored.
	// malformed is the lines that did not read. Called as OnRepush is,
	// from Refresh too.
	OnDamage func(object string, malformed int, counts int64, restored bool)
	// Periods lists the period kinds this zone counts. Flush reads the
	// current object of each even when nothing was counted locally, so an
	// idle instance sees the others' counts. Default: Day and Month.
	Periods []Period
}

// Counter counts usage per key and period for one zone and shares the
// counts through Storage. All methods are safe for concurrent use.
type Counter struct {
	storage     Storage
	quotaDir    string // <Prefix>/quota
	knownKey    string // <Prefix>/known
	clock       func() time.Time
	onDegraded  func(bool, error)
	lockTimeout time.Duration
	onLockWait  func() (waited func())
	onRepush    func(object string, n int64)
	onDamage    func(object string, malformed int, counts int64, restored bool)
	periods     []Period
	held        Locks  // locks whose Unlock failed
	writer      string // names this Counter's pushes in an object's history
	seq         uint64 // guarded by flushMu: pushes made, for their writer names

	// flushMu serializes Flush and Load. TryAdd never takes it.
	flushMu    sync.Mutex
	cleanedDay time.Time // guarded by flushMu: day of the last full cleanup

	mu      sync.Mutex // guards everything below
	moves   uint64     // StorageMoved calls: a flush begun before one adopts no history
	buckets map[bucketID]*bucket
	latest  [Month + 1]*bucket // newest bucket per kind: TryAdd fast path
	status  status
	adopted bool // shared totals were read from storage at least once
}

// bucketID identifies one period: its kind and its start in Unix seconds.
type bucketID struct {
	period Period
	start  int64
}

// bucket holds the counts of one period.
type bucket struct {
	period     Period
	start, end time.Time
	name       string           // storage object name, e.g. "day-2026-11-30"
	shared     map[string]int64 // totals of all instances, last adopted
	pending    deltas           // counted here since the last successful push
	inflight   deltas           // deltas a running Flush is pushing; nil otherwise
	sent       []sentPush       // the last pushes stored, watched for overwrites (see checkSent)
	seen       history          // the object's history as last read or stored
	retired    []string         // lineages seen before seen's, newest last (see see)
	keeping    bool             // a read found the object damaged and kept shared; the next flush pushes
	// observed is, per key, what the store deciding in this Counter's
	// place last held, plus what was counted here since (see Observe);
	// nil until it holds any.
	observed map[string]*observation
}

// observation is what the store deciding in a Counter's place (Redis) is
// known to hold for a key: n, of which kept was counted here since it
// last reported (or by another process, in a copy ObserveReported read)
// and has not reached it yet (Pushed), calls their makers push there
// themselves.
type observation struct {
	n, kept int64
}

func newBucket(p Period, start time.Time) *bucket {
	return &bucket{
		period:  p,
		start:   start,
		end:     p.Next(start),
		name:    objectName(p, start),
		shared:  map[string]int64{},
		pending: deltas{},
	}
}

// used returns the count of key in b as this instance knows it.
func (b *bucket) used(key []byte) int64 {
	n, _ := b.usedPending(key)
	return n
}

// usedPending is used, with the pointer to key's pending count (nil when
// it has none), so that TryAdd adds to it without finding it again.
func (b *bucket) usedPending(key []byte) (int64, *int64) {
	n, p := b.localPending(key)
	if o := b.observed[string(key)]; o != nil && o.n > n {
		return o.n, p
	}
	return n, p
}

// unkept is the larger of key's local count less bound (the calls of it
// that their makers push to the other store) and what that store was
// observed to hold for it without the calls counted since its report
// that it does not hold yet (with a refund among them, no less than it
// reported): see Counts.
func (b *bucket) unkept(key string, bound int64) int64 {
	n := b.localOf(key) - bound
	if o := b.observed[key]; o != nil && o.n-o.kept > n {
		return o.n - o.kept
	}
	return n
}

// localOf is local for a key held as a string.
func (b *bucket) localOf(key string) int64 {
	n := b.shared[key]
	for _, d := range [2]deltas{b.inflight, b.pending} {
		if p := d[key]; p != nil {
			n += *p
		}
	}
	return n
}

// countHere adds n to key's pending count (through p, as deltas.addFound
// does) and to what the other store was observed to hold for it, if
// anything: a count made here adds to both (see Counter.Observe).
func (b *bucket) countHere(p *int64, key []byte, n int64) {
	b.pending.addFound(p, key, n)
	if len(b.observed) > 0 {
		if o := b.observed[string(key)]; o != nil {
			o.n += n
			o.kept += n
		}
	}
}

// local returns the count of key in b that this Counter counted or
// adopted from storage.
func (b *bucket) local(key []byte) int64 {
	n, _ := b.localPending(key)
	return n
}

// localPending is local, with the pointer to key's pending count (nil
// when it has none).
func (b *bucket) localPending(key []byte) (int64, *int64) {
	p := b.pending[string(key)]
	n := b.shared[string(key)] + b.inflight.get(key)
	if p != nil {
		n += *p
	}
	return n, p
}

// deltas maps keys to counts through pointers, so that a key already
// present is found and updated from its bytes: TryAdd turns a key into a
// string only the first time the key is counted in a flush interval.
type deltas map[string]*int64

// clone returns a copy of d whose counts are its own: d may be read
// concurrently (a push's inflight), or kept (a watched push), while the
// copy is added to.
func (d deltas) clone() deltas {
	c := make(deltas, len(d))
	for k, p := range d {
		v := *p
		c[k] = &v
	}
	return c
}

// sum returns the total of d's counts.
func (d deltas) sum() int64 {
	var n int64
	for _, p := range d {
		n += *p
	}
	return n
}

// get returns the count of key.
func (d deltas) get(key []byte) int64 {
	if p := d[string(key)]; p != nil {
		return *p
	}
	return 0
}

// addFound adds n > 0 to the count of key through p, the pointer a lookup
// of key in d found (nil when there was none), without finding it again
// while that is sure to be right: a positive count is still d's, since add
// drops a count only when it reaches zero, leaving it negative. Otherwise
// it adds as add does.
func (d deltas) addFound(p *int64, key []byte, n int64) {
	if p != nil && *p > 0 && n > 0 {
		*p += n
		return
	}
	d.add(key, n)
}

// add adds n to the count of key, and drops the key when its count becomes
// zero.
func (d deltas) add(key []byte, n int64) {
	p := d[string(key)]
	switch {
	case p == nil:
		p = new(int64)
		*p = n
		d[string(key)] = p
	case *p+n == 0:
		delete(d, string(key))
	default:
		*p += n
	}
}

// New returns a Counter for cfg. Call Load once at startup, then Flush every
// interval (and Refresh between flushes, to see other instances sooner) to
// share counts; one owner should drive both.
func New(cfg Config) *Counter {
	c := &Counter{
		storage:     cfg.Storage,
		quotaDir:    path.Join(strings.TrimSuffix(cfg.Prefix, "/"), "quota"),
		knownKey:    path.Join(strings.TrimSuffix(cfg.Prefix, "/"), "known"),
		clock:       cfg.Clock,
		onDegraded:  cfg.OnDegraded,
		lockTimeout: cfg.LockTimeout,
		onLockWait:  cfg.OnLockWait,
		onRepush:    cfg.OnRepush,
		onDamage:    cfg.OnDamage,
		writer:      newID(),
		buckets:     map[bucketID]*bucket{},
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	if c.lockTimeout <= 0 {
		c.lockTimeout = DefaultLockTimeout
	}
	for _, p := range cfg.Periods {
		if p.Valid() && !containsPeriod(c.periods, p) {
			c.periods = append(c.periods, p)
		}
	}
	if len(c.periods) == 0 {
		c.periods = []Period{Day, Month}
	}
	return c
}

func containsPeriod(ps []Period, p Period) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// bucketLocked returns the bucket of kind p that contains now, creating it
// when create is set; nil otherwise. c.mu must be held and p valid.
func (c *Counter) bucketLocked(p Period, now time.Time, create bool) *bucket {
	if b := c.latest[p]; b != nil && !now.Before(b.start) && now.Before(b.end) {
		return b
	}
	start := p.Start(now)
	id := bucketID{p, start.Unix()}
	b := c.buckets[id]
	if b == nil {
		if !create {
			return nil
		}
		b = newBucket(p, start)
		c.buckets[id] = b
	}
	if l := c.latest[p]; l == nil || b.start.After(l.start) {
		c.latest[p] = b
	}
	return b
}

// dropLocked forgets bucket b. c.mu must be held.
func (c *Counter) dropLocked(b *bucket) {
	id := bucketID{b.period, b.start.Unix()}
	if c.buckets[id] == b {
		delete(c.buckets, id)
	}
	if c.latest[b.period] == b {
		c.latest[b.period] = nil
	}
}
