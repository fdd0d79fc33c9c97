package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// DefaultTimeout bounds one call when Config.Timeout is zero.
const DefaultTimeout = 50 * time.Millisecond

// QueueTimeout bounds the wait of a request's call for a free connection.
// Calls beyond the pool's size (pool_size in the URL; go-redis's default,
// 10 per CPU, otherwise) queue for one: waiting is not Redis being slow,
// so it is not part of Timeout, which bounds the round trip alone.
const QueueTimeout = time.Second

// ttlMargin is added to every expiry: a bucket's state outlives its full
// refill, a quota count its period, by this much.
const ttlMargin = 60 * time.Second

// maxOver caps the short-circuit map; beyond it expired entries are swept
// on insertion and, if still full, a new refusal takes the place of a
// level an admission left (see overEntry.seen), or is not remembered.
const maxOver = 100000

// Kind says what an Item is.
type Kind uint8

const (
	// Bucket is a token bucket: Rate tokens per second up to Burst.
	Bucket Kind = iota + 1
	// Quota is a count per UTC period, allowed up to Limit.
	Quota
	// QuotaIfCounted is a Quota that Redis decides and charges only when
	// it holds a count for it in the period; one it holds none for is
	// neither charged nor refused (its After is -1). A credential not yet
	// accepted here is charged to its quotas only if it was counted
	// before, so garbage credentials leave no keys behind.
	QuotaIfCounted
)

// IsQuota reports whether k is a count per period.
func (k Kind) IsQuota() bool { return k == Quota || k == QuotaIfCounted }

// Item is one layer of one request: N more tokens from a bucket, or N more
// counts of a quota.
type Item struct {
	// Kind is Bucket, Quota or QuotaIfCounted.
	Kind Kind
	// Key names the bucket or the quota subject within the zone, e.g.
	// "t/<fp hex>" or "i/<fp hex>". Buckets and quotas have separate key
	// spaces.
	Key string
	// Rate is a bucket's refill, in tokens per second.
	Rate float64
	// Burst is a bucket's size.
	Burst int64
	// Since is when a bucket's Rate and Burst came into force (a limit
	// change): the time before it is credited at the limits the bucket
	// was last charged under. Zero credits all of it at Rate and Burst.
	Since time.Time
	// Period is a quota's period.
	Period quota.Period
	// Limit is a quota's largest count in one period.
	Limit int64
	// N is the cost: tokens or counts to take.
	N int64
}

// Result is the outcome of Decide.
type Result struct {
	// OK is true when every item fit and all were charged (by Peek: would
	// fit, and none was).
	OK bool
	// Refused is the index of the first item that did not fit, -1 when OK.
	Refused int
	// Wait is how long until the refused item fits: for a bucket until
	// enough tokens are back at the rate it earns (see Refill; for a cost
	// above its burst, which never fits, until a call of the burst's size
	// does), for a quota until its period ends.
	Wait time.Duration
	// Local is true when the refusal came from the short-circuit, without
	// a round trip.
	Local bool
	// After holds, when OK, what each item holds once charged, on Redis:
	// a bucket's tokens left, a quota's count in its period; -1 for a
	// QuotaIfCounted that Redis held no count for, and did not charge.
	After []float64
	// Now holds, after a refusal by Redis or any Peek, what each item
	// holds there (nothing was charged; -1 for a QuotaIfCounted it holds
	// no count for); nil for a Local refusal.
	Now []float64
	// Refill holds, where Now does, how long until each bucket item fits,
	// at the rates its level earns in Redis (those of its last charge,
	// for one charged under other limits since these came into force:
	// another instance's, or a tier its key left); 0 for a quota, and for
	// an item that fits. See ItemWait.
	Refill []time.Duration
	// Held is, after a Local refusal, what the refused item held when Redis
	// refused it, brought up to now: a bucket's tokens, a quota's count.
	Held float64
}

// Delta is a count made outside Redis (during an outage) for a quota key
// in the period starting at Start, to be added by Push; N is negative for
// refunds made while offline.
type Delta = quota.Count

// Config configures a Store.
type Config struct {
	// URL is redis://[[user]:password@]host:port[/db] or rediss://….
	URL string
	// Cluster treats URL as a node of a Redis Cluster (further nodes to
	// learn the cluster from as ?addr=host:port, repeated; no db): each
	// call goes to the master of the zone's hash slot.
	Cluster bool
	// Zone names the key space: every key is mcprl:{<zone>}:…, one hash
	// tag per zone, so one decision's keys share a cluster slot.
	Zone string
	// Timeout bounds each call. Default: DefaultTimeout.
	Timeout time.Duration
	// Clock is the local clock of the short-circuit. Default: time.Now.
	Clock func() time.Time
}

// Store decides requests in Redis. It is safe for concurrent use.
type Store struct {
	client  *redis.Client        // the URL's node; nil in a cluster
	cluster *redis.ClusterClient // nil unless Config.Cluster
	prefix  string
	timeout time.Duration
	clock   func() time.Time
	conns   chan struct{} // one slot per pooled connection a call holds

	mu   sync.RWMutex
	over map[overKey]overEntry

	redirectMu sync.Mutex
	redirects  map[string]*redis.Client // see redirected
}

// overKey names a remembered refusal.
type overKey struct {
	kind   Kind
	period quota.Period
	key    string
}

// RecheckAfter bounds how long a remembered refusal is answered locally:
// after it, one call asks Redis again. Counts only grow, but a refund on
// another instance (a charge a later layer refused) gives one back, and a
// quota refusal is otherwise remembered until the period ends.
const RecheckAfter = time.Minute

// overEntry is a key known to be over its limit until until, for a cost
// of at least n under the same limits; the knowledge is used until
// recheck.
type overEntry struct {
	until      time.Time
	recheck    time.Time
	n          int64
	rate       float64
	burst, lim int64
	since      time.Time // the item's Since: a later change of its limits makes it stale
	held       float64   // what the item held when Redis refused it
	at         time.Time
	// seen says the entry holds what a call Redis admitted left the key,
	// short of that call's cost, rather than a refusal: its wait is named
	// beside a refusal remembered for another key of a call, as the
	// longer one, but it refuses nothing alone (the call after an
	// admission is decided in Redis).
	seen bool
}

// CheckURL reports whether New would accept url, of a cluster's node
// with cluster.
func CheckURL(url string, cluster bool) error {
	var err error
	if cluster {
		_, err = parseClusterURL(url)
	} else {
		_, err = parseURL(url)
	}
	return err
}

// parseURL parses a Redis URL into client options, refusing what go-redis
// lets through but no server answers: a DB index that is negative (go-redis
// would use DB 0) or beyond Redis's 32-bit range, and a port outside
// 1-65535. An error never quotes the URL, which may hold a password.
func parseURL(rawURL string) (*redis.Options, error) {
	if err := checkShape(rawURL, false); err != nil {
		return nil, fmt.Errorf("parsing redis URL: %w", err)
	}
	opts, err := parseHidingCredentials(rawURL, redis.ParseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing redis URL: %w", err)
	}
	if opts.DB < 0 || opts.DB > math.MaxInt32 {
		return nil, fmt.Errorf("parsing redis URL: DB index %d: must be 0 to %d", opts.DB, math.MaxInt32)
	}
	if opts.Network == "tcp" {
		if err := checkAddr(opts.Addr); err != nil {
			return nil, fmt.Errorf("parsing redis URL: %w", err)
		}
	}
	return opts, nil
}

// checkShape refuses what go-redis would take for another URL than the
// one meant, before it parses: no "//" after the scheme (`redis::pw@host`
// is an opaque URL, go-redis dials localhost without the password), and
// addr parameters other than a cluster's nodes, host:port alone (go-redis
// quotes a bad one, credentials and all; without cluster it is no option),
// a DB given both in the path and as ?db=, and any other parameter given
// twice (go-redis takes one of them).
func checkShape(rawURL string, cluster bool) error {
	if _, rest, ok := strings.Cut(rawURL, ":"); ok && !strings.HasPrefix(rest, "//") {
		return errors.New(`no "//" after the scheme: want redis://host:port, rediss://… or unix:///path`)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil // parseHidingCredentials names it
	}
	addrs := u.Query()["addr"]
	switch {
	case u.Scheme != "unix" && strings.Trim(u.Path, "/") != "" && u.Query().Has("db"):
		// go-redis takes the query's and drops the path's.
		return errors.New("the DB is given twice, in the path and as a db parameter: give it once")
	case len(addrs) > 0 && !cluster:
		return errors.New("an addr parameter names a Redis Cluster's nodes: say cluster in the store's block")
	case slices.ContainsFunc(addrs, func(a string) bool { return strings.Contains(a, "@") }):
		return errors.New("an addr parameter is host:port alone: every node is reached with the URL's user and password")
	}
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			return fmt.Errorf("an addr parameter: %w", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(u.Query())) {
		if name != "addr" && len(u.Query()[name]) > 1 {
			return fmt.Errorf("the %s parameter is given more than once: give it once", name)
		}
	}
	return nil
}

// parseClusterURL parses the URL of a Redis Cluster's node into cluster
// options, refusing a DB (a cluster has DB 0 alone, and go-redis would
// ignore it) and a port outside 1-65535, of the URL's node or of one of
// its ?addr= nodes. An error never quotes the URL.
func parseClusterURL(rawURL string) (*redis.ClusterOptions, error) {
	if err := checkShape(rawURL, true); err != nil {
		return nil, fmt.Errorf("parsing redis cluster URL: %w", err)
	}
	opts, err := parseHidingCredentials(rawURL, redis.ParseClusterURL)
	if err != nil {
		return nil, fmt.Errorf("parsing redis cluster URL: %w", err)
	}
	if u, err := url.Parse(rawURL); err == nil {
		if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
			return nil, errors.New("parsing redis cluster URL: a cluster has DB 0 alone: leave the DB out of the path")
		}
	}
	for _, addr := range opts.Addrs {
		if err := checkAddr(addr); err != nil {
			return nil, fmt.Errorf("parsing redis cluster URL: %w", err)
		}
	}
	return opts, nil
}

// parseHidingCredentials parses rawURL with parse, and returns an error
// that holds no part of the URL's user name and password. A character a
// URL must percent-encode there (# / ? % or a space) makes the parser end
// the host early and quote the pieces ("invalid port \":Xk7\"", an
// "unexpected option" or a path holding the rest of the password). The
// credentials are what lies between "://" and the URL's last "@": when the
// URL does not parse, or parses without reading them as credentials of the
// host after them, it is parsed again with them replaced, and that error
// is returned, or one saying the credentials need encoding.
func parseHidingCredentials[T any](rawURL string, parse func(string) (T, error)) (T, error) {
	opts, err := parse(rawURL)
	scheme, rest, ok := strings.Cut(rawURL, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return opts, urlErrorCause(err)
	}
	host, _, _ := strings.Cut(rest[at+1:], "/")
	host, _, _ = strings.Cut(host, "?")
	if u, perr := url.Parse(rawURL); err == nil && perr == nil && u.User != nil && u.Host == host {
		return opts, nil
	}
	var zero T
	if _, err := parse(scheme + "://user:password@" + rest[at+1:]); err != nil {
		return zero, urlErrorCause(err)
	}
	return zero, errors.New("the user name or password holds a character a URL must percent-encode (# / ? % { } or a space, say): encode it, %23 for #")
}

// urlErrorCause is err without the url.Error around it, which quotes the
// whole URL, and without the values go-redis quotes in it: an option's
// value that does not parse ("invalid pool_size number: strconv.Atoi:
// parsing \"…\"") may be a password typed in the wrong place.
func urlErrorCause(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err
	}
	if err == nil || !strings.Contains(err.Error(), `"`) {
		return err
	}
	return errors.New(quoted.ReplaceAllString(err.Error(), "(the value, not shown)"))
}

// quoted matches a quoted value in an error message.
var quoted = regexp.MustCompile(`"[^"]*"`)

// checkAddr refuses an address whose port is not 1 to 65535, or whose
// host holds a colon without being an IPv6 address: go-redis reads
// host:6379:9 as the host "host:6379", which no lookup finds.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		return errors.New("want host:port, with a port of 1 to 65535")
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return errors.New("the host holds a colon and is no IPv6 address: one port after the host, and an IPv6 address in brackets")
	}
	return nil
}

// New parses cfg.URL and returns a Store. It does not connect: the first
// call does, and the client reconnects by itself after failures.
func New(cfg Config) (*Store, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	s := &Store{
		prefix:  "mcprl:{" + cfg.Zone + "}:",
		timeout: cfg.Timeout,
		clock:   cfg.Clock,
		over:    map[overKey]overEntry{},
	}
	var poolSize int
	if cfg.Cluster {
		opts, err := parseClusterURL(cfg.URL)
		if err != nil {
			return nil, err
		}
		if opts.PoolSize <= 0 {
			opts.PoolSize = defaultPoolSize() // per node, as tune's
		}
		poolSize = opts.PoolSize
		opts.ContextTimeoutEnabled = true // reading the slot map, too
		opts.NewClient = func(o *redis.Options) *redis.Client {
			tune(o)
			return redis.NewClient(o)
		}
		s.cluster = redis.NewClusterClient(opts)
	} else {
		opts, err := parseURL(cfg.URL)
		if err != nil {
			return nil, err
		}
		tune(opts)
		poolSize = opts.PoolSize
		s.client = redis.NewClient(opts)
	}
	s.conns = make(chan struct{}, poolSize)
	return s, nil
}

// acquire waits, up to QueueTimeout or ctx's end, until a pooled
// connection is free for a call, and takes it; release gives it back.
func (s *Store) acquire(ctx context.Context) error {
	select {
	case s.conns <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(QueueTimeout)
	defer t.Stop()
	select {
	case s.conns <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("no connection free within %v: all %d busy", QueueTimeout, cap(s.conns))
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) release() { <-s.conns }

// tune sets what every client of the store runs with, a cluster's nodes'
// included. A decision that misses its deadline is decided locally:
// retrying past it is pointless, and the context's deadline must be
// honoured. Dialing once per call, too, makes a connection's own error (an
// untrusted certificate) the call's, where go-redis's dial retries would
// outlast the deadline and leave only "deadline exceeded"; the zone's
// probe reconnects with its own backoff. In a cluster the calls go to the
// slot's master's own client (see on), never through the cluster client's
// redirects and retries, which would run a charge again after a
// connection lost with its answer.
func tune(o *redis.Options) {
	o.MaxRetries = -1
	o.DialerRetries = 1
	o.ContextTimeoutEnabled = true
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if o.PoolSize <= 0 {
		o.PoolSize = defaultPoolSize()
	}
}

// defaultPoolSize is go-redis's default pool size, made explicit: the
// store's calls are bounded by it (see acquire).
func defaultPoolSize() int { return 10 * runtime.GOMAXPROCS(0) }

// held runs call on the node holding the zone's keys (see on), holding
// one of the pool's connections (see acquire), so that background calls
// never leave a request's call without one. A positive timeout bounds
// the call from there; otherwise ctx alone does.
func (s *Store) held(ctx context.Context, timeout time.Duration, call func(ctx context.Context, c *redis.Client) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return s.on(ctx, call)
}

// Close closes the connections.
func (s *Store) Close() error {
	if s.cluster != nil {
		s.redirectMu.Lock()
		defer s.redirectMu.Unlock()
		for _, c := range s.redirects {
			_ = c.Close()
		}
		return s.cluster.Close()
	}
	return s.client.Close()
}

// Timeout returns the bound of each call.
func (s *Store) Timeout() time.Duration { return s.timeout }

// BucketKey returns the Redis key of a bucket.
func (s *Store) BucketKey(key string) string { return s.prefix + "b:" + key }

// QuotaKey returns the Redis key of a quota count in the period of kind p
// containing t, e.g. mcprl:{zone}:q:i/<fp>:d:2026-11-30.
func (s *Store) QuotaKey(key string, p quota.Period, t time.Time) string {
	tag := ":d:"
	if p == quota.Month {
		tag = ":m:"
	}
	return s.prefix + "q:" + key + tag + p.ID(t)
}

func (s *Store) keyOf(it *Item) string {
	if it.Kind == Bucket {
		return s.BucketKey(it.Key)
	}
	return s.prefix + "q:" + it.Key
}

// args renders the script's KEYS and ARGV for items.
func (s *Store) args(items []Item) ([]string, []any, error) {
	keys := make([]string, len(items))
	argv := make([]any, 1, 1+5*len(items))
	argv[0] = int64(ttlMargin / time.Second)
	for i := range items {
		it := &items[i]
		keys[i] = s.keyOf(it)
		switch it.Kind {
		case Bucket:
			if it.Rate <= 0 || it.Burst <= 0 {
				return nil, nil, fmt.Errorf("bucket %s: rate and burst must be positive", it.Key)
			}
			var since int64
			if !it.Since.IsZero() {
				since = it.Since.UnixMicro()
			}
			argv = append(argv, 1, strconv.FormatFloat(it.Rate, 'g', -1, 64), it.Burst, it.N, since)
		case Quota, QuotaIfCounted:
			if !it.Period.Valid() {
				return nil, nil, fmt.Errorf("quota %s: invalid period", it.Key)
			}
			p := 1
			if it.Period == quota.Month {
				p = 2
			}
			argv = append(argv, int(it.Kind), p, it.Limit, it.N, 0)
		default:
			return nil, nil, fmt.Errorf("item %d: invalid kind %d", i, it.Kind)
		}
	}
	return keys, argv, nil
}

// Decide checks every item and, only when all fit, charges them all, in
// one round trip running one script on Redis server time. A refusing item
// leaves every key untouched. Items known from an earlier refusal to be
// over their limit are refused locally, without a round trip, until that
// refusal's wait has passed.
func (s *Store) Decide(ctx context.Context, items []Item) (Result, error) {
	now := s.clock()
	if r, ok := s.shortCircuit(items, now); ok {
		return r, nil
	}
	return s.run(ctx, items, decideScript, now)
}

// Ask is Decide without the local answer: Redis decides every time, even
// items known to be over their limit, so a refusal reports what every
// item holds there. A dry run asks, as what it records must be each
// layer's level, and a would-be refusal must take nothing from any layer.
func (s *Store) Ask(ctx context.Context, items []Item) (Result, error) {
	return s.run(ctx, items, decideScript, s.clock())
}

// Peek decides items as Ask does but charges nothing, even when all fit:
// OK then says they would, and Now holds what each holds. A dry run peeks
// at the layers in Redis when a local layer would refuse the request,
// which must then take nothing from any layer.
func (s *Store) Peek(ctx context.Context, items []Item) (Result, error) {
	return s.run(ctx, items, peekScript, s.clock())
}

// run has Redis decide items with script, decideScript or peekScript, at
// now on the local clock (for the refusals it remembers).
func (s *Store) run(ctx context.Context, items []Item, script *redis.Script, now time.Time) (Result, error) {
	if len(items) == 0 {
		return Result{OK: true, Refused: -1}, nil
	}
	keys, argv, err := s.args(items)
	if err != nil {
		return Result{}, err
	}
	var vals []int64
	err = s.held(ctx, s.timeout, func(ctx context.Context, c *redis.Client) error {
		vals, err = script.Run(ctx, c, keys, argv...).Int64Slice()
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("deciding in redis: %w", err)
	}
	// An admission's reply holds each item's level, a refusal's or a
	// peek's each one's refill wait as well.
	n := len(items)
	charged := len(vals) > 0 && vals[0] == 0 && script != peekScript
	want := 2 + 2*n
	if charged {
		want = 2 + n
	}
	if len(vals) != want || vals[0] < 0 || vals[0] > int64(n) {
		return Result{}, fmt.Errorf("deciding in redis: unexpected reply %v", vals)
	}
	levels := make([]float64, n)
	for i, v := range vals[2 : 2+n] {
		levels[i] = float64(v)
		if items[i].Kind == Bucket {
			levels[i] /= 1000
		}
	}
	if charged {
		// Admitted: none of its keys is over its limit (a refusal
		// remembered under other limits, raised and lowered again since,
		// must not come back).
		s.admitted(items, levels, now)
		return Result{OK: true, Refused: -1, After: levels}, nil
	}
	refill := make([]time.Duration, n)
	for i, v := range vals[2+n:] {
		refill[i] = time.Duration(v) * time.Millisecond
	}
	if vals[0] == 0 {
		return Result{OK: true, Refused: -1, Now: levels, Refill: refill}, nil
	}
	i := int(vals[0] - 1)
	r := Result{Refused: i, Wait: time.Duration(vals[1]) * time.Millisecond, Now: levels, Refill: refill}
	// Every item the levels show over its limit is remembered, not only
	// the first: a later local refusal must still name the longest wait.
	for k := range items {
		wait := r.Wait
		if k != i {
			wait = r.ItemWait(items, k, now)
		}
		if wait > 0 {
			// Until the key fits again, to the moment: a flood that
			// ignores the wait is answered here all that time, and a
			// caller told its whole-second Retry-After, here or by another
			// instance, finds Redis asked again by then.
			s.remember(&items[k], now, now.Add(wait), levels[k])
		}
	}
	return r, nil
}

// ItemWait is how long until items[k] fits, by what Redis reported with
// a refusal or a Peek (r.Now): a bucket's wait as Redis reckons it
// (Refill), a quota's until its period ends (see OverWait).
func (r *Result) ItemWait(items []Item, k int, now time.Time) time.Duration {
	if items[k].Kind == Bucket {
		return r.Refill[k]
	}
	return OverWait(&items[k], r.Now[k], now)
}

// OverWait is how long until it fits, by the level Redis reported for it:
// 0 when it fits now. A bucket item costing more than its burst never
// fits as asked: its wait is until a call of the burst's size fits (at
// least 1ns). -1 for a bucket that never refills.
func OverWait(it *Item, level float64, now time.Time) time.Duration {
	switch {
	case it.Kind == QuotaIfCounted && level < 0: // not counted there: never refused
		return 0
	case it.Kind.IsQuota() && float64(it.N)+level > float64(it.Limit):
		return it.Period.Next(now).Sub(now)
	case it.Kind == Bucket && level < float64(it.N):
		if it.Rate <= 0 {
			return -1
		}
		need := min(it.N, it.Burst)
		return max(time.Duration(math.Ceil((float64(need)-level)/it.Rate*float64(time.Second))), time.Nanosecond)
	}
	return 0
}

// Refund gives back what a successful Decide of the same items took: for
// a request that a later, local layer refused. The refusals remembered
// for those keys are forgotten: what was given back may make them fit.
func (s *Store) Refund(ctx context.Context, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	s.forget(items)
	keys, argv, err := s.args(items)
	if err != nil {
		return err
	}
	err = s.held(ctx, s.timeout, func(ctx context.Context, c *redis.Client) error {
		return refundScript.Run(ctx, c, keys, argv...).Err()
	})
	if err != nil {
		return fmt.Errorf("refunding in redis: %w", err)
	}
	return nil
}

// PushMarkerTTL is how long Redis remembers that a push ran: a push
// retried within it, under the same id, adds nothing.
const PushMarkerTTL = 24 * time.Hour

// Push adds counts made elsewhere (locally, while Redis was unreachable)
// to their periods' counters, atomically and once per id: a push whose
// answer was lost (a timeout) may have run, and the retry, under the same
// id, then adds nothing. Deltas of periods already over are added too
// (they expire with their keys). It reports whether this call added them.
func (s *Store) Push(ctx context.Context, id string, deltas []Delta) (added bool, err error) {
	if id == "" {
		return false, errors.New("pushing counts to redis: no push id")
	}
	keys := []string{s.prefix + "push:" + id}
	argv := []any{int64(PushMarkerTTL / time.Second)}
	for _, d := range deltas {
		if !d.Period.Valid() || d.N == 0 {
			continue
		}
		keys = append(keys, s.QuotaKey(d.Key, d.Period, d.Start))
		argv = append(argv, d.N, d.Period.Next(d.Start).Add(ttlMargin).Unix())
	}
	if len(keys) == 1 {
		return false, nil
	}
	err = s.held(ctx, s.timeout*4, func(ctx context.Context, c *redis.Client) error {
		n, err := pushScript.Run(ctx, c, keys, argv...).Int64()
		added = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pushing %d counts to redis: %w", len(keys)-1, err)
	}
	return added, nil
}

// ClusterReread is how long a failed Ping of a cluster's store waits for
// the slot map read again (see on) before it pings once more: go-redis
// reads it in the background, in milliseconds, once per 200ms at most.
const ClusterReread = 500 * time.Millisecond

// probeItems are what Ping decides: a bucket of the probe's own, charged
// nothing, which the decision script reads and writes back.
var probeItems = []Item{{Kind: Bucket, Key: "probe", Rate: 1, Burst: 1}}

// Ping checks that Redis decides within the timeout: it runs the decision
// script on a bucket of the zone's, charging nothing, so it fails
// wherever a decision fails. PING alone would not: in a cluster that is
// down (a master lost without a replica) the live masters still answer it
// but refuse every key (CLUSTERDOWN), and an ACL may let the user read the
// zone's keys but not write them, or run scripts but not TIME; either way
// an idle zone would be told available and then fail its next call, over
// and over. In a cluster, a failed ping pings again once the slot map has
// been read again: the map in hand was read when the zone's master
// failed, before a replica took its place, so the probe that runs once
// one has would otherwise call the dead node once more and recover only
// at the next, a backoff later.
func (s *Store) Ping(ctx context.Context) error {
	keys, argv, err := s.args(probeItems)
	if err != nil {
		return err
	}
	ping := func(ctx context.Context, c *redis.Client) error {
		return decideScript.Run(ctx, c, keys, argv...).Err()
	}
	err = s.held(ctx, s.timeout*4, ping)
	if err != nil && s.cluster != nil {
		t := time.NewTimer(ClusterReread)
		select {
		case <-t.C:
			err = s.held(ctx, s.timeout*4, ping)
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err != nil {
		return fmt.Errorf("pinging redis: %w", err)
	}
	return nil
}

// Preload loads the scripts that calls run under the store's timeout
// (decisions, refunds, pushes) into Redis's script cache where it lacks
// them, so that a call runs its script at once rather than after a miss, a
// second round trip sending it and its compilation: on a Redis that never
// ran them (just started, restarted, a replica just made master) that call
// could outlast the timeout and mark the store degraded. Where Redis has
// them all, it costs one round trip asking so.
func (s *Store) Preload(ctx context.Context) error {
	return s.held(ctx, 0, func(ctx context.Context, c *redis.Client) error {
		have, err := c.ScriptExists(ctx, scriptHashes(preloaded)...).Result()
		if err != nil {
			return fmt.Errorf("asking redis for its scripts: %w", err)
		}
		for i, script := range preloaded {
			if i < len(have) && have[i] {
				continue
			}
			if err := script.Load(ctx, c).Err(); err != nil {
				return fmt.Errorf("loading redis scripts: %w", err)
			}
		}
		return nil
	})
}

// preloaded are the scripts Preload loads.
var preloaded = []*redis.Script{decideScript, peekScript, refundScript, pushScript}

// scriptHashes returns the SHA1 hashes of scripts, by which Redis knows them.
func scriptHashes(scripts []*redis.Script) []string {
	hashes := make([]string, len(scripts))
	for i, s := range scripts {
		hashes[i] = s.Hash()
	}
	return hashes
}

// FingerprintKey returns the zone's fingerprint key from Redis
// (mcprl:{zone}:fpkey), storing candidate there first if no instance has
// yet, or if the key there is damaged (not 32 bytes), in one script, so
// every instance computes the same fingerprints. A nil candidate is
// replaced by 32 random bytes.
//
// It returns the zone's epoch in Redis too (mcprl:{zone}:epoch): a random
// text that the first call to find none stores, with no expiry. An epoch
// other than the one an instance read before says that Redis lost its
// data in between (a restart without persistence, FLUSHALL), or that the
// key was deleted by hand.
func (s *Store) FingerprintKey(ctx context.Context, candidate []byte) (key []byte, epoch string, err error) {
	if len(candidate) != 32 {
		candidate = make([]byte, 32)
		if _, err := rand.Read(candidate); err != nil {
			return nil, "", fmt.Errorf("generating fingerprint key: %w", err)
		}
	}
	keys := []string{s.prefix + "fpkey", s.prefix + "epoch"}
	err = s.held(ctx, 0, func(ctx context.Context, c *redis.Client) error {
		v, err := fpKeyScript.Run(ctx, c, keys, candidate, rand.Text()).Slice()
		if err != nil {
			return fmt.Errorf("fingerprint key in redis: %w", err)
		}
		if len(v) != 2 {
			return fmt.Errorf("fingerprint key in redis: unexpected reply %v", v)
		}
		k, kok := v[0].(string)
		e, eok := v[1].(string)
		if !kok || !eok {
			return fmt.Errorf("fingerprint key in redis: unexpected reply %v", v)
		}
		key, epoch = []byte(k), e
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if len(key) != 32 {
		return nil, "", fmt.Errorf("fingerprint key %s in redis: %d bytes, want 32", keys[0], len(key))
	}
	return key, epoch, nil
}

// Used returns the count of a quota key in the period of kind p containing
// t, as Redis holds it.
func (s *Store) Used(ctx context.Context, key string, p quota.Period, t time.Time) (int64, error) {
	var n int64
	err := s.held(ctx, 0, func(ctx context.Context, c *redis.Client) error {
		var err error
		n, err = c.Get(ctx, s.QuotaKey(key, p, t)).Int64()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading quota %s: %w", key, err)
	}
	return n, nil
}

// Tokens returns a bucket's level as stored at its last charge (without
// the refill since), when that charge was, on Redis's clock, and whether
// Redis holds the bucket.
func (s *Store) Tokens(ctx context.Context, key string) (tokens float64, at time.Time, ok bool, err error) {
	var v []any
	err = s.held(ctx, 0, func(ctx context.Context, c *redis.Client) error {
		var err error
		v, err = c.HMGet(ctx, s.BucketKey(key), "tokens", "ts").Result()
		return err
	})
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("reading bucket %s: %w", key, err)
	}
	ts, tsOK := v[1].(string)
	level, levelOK := v[0].(string)
	if !tsOK || !levelOK {
		return 0, time.Time{}, false, nil
	}
	tokens, err1 := strconv.ParseFloat(level, 64)
	us, err2 := strconv.ParseFloat(ts, 64)
	if err1 != nil || err2 != nil {
		return 0, time.Time{}, false, fmt.Errorf("bucket %s holds tokens %q at %q", key, level, ts)
	}
	return tokens, time.UnixMicro(int64(us)), true, nil
}

func overKeyOf(it *Item) overKey {
	return overKey{kind: it.Kind, period: it.Period, key: it.Key}
}

// shortCircuit refuses items known to be over their limit, naming the one
// that stays over it longest (among those an admission left short too).
func (s *Store) shortCircuit(items []Item, now time.Time) (Result, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.over) == 0 {
		return Result{}, false
	}
	r, found, refused := Result{}, false, false
	for i := range items {
		it := &items[i]
		e, ok := s.over[overKeyOf(it)]
		if !ok || !now.Before(e.until) || !now.Before(e.recheck) {
			continue
		}
		if e.rate != it.Rate || e.burst != it.Burst || e.lim != it.Limit || !e.since.Equal(it.Since) {
			// Known under other limits, or before a change of them
			// (which credits the time since at the limits in force
			// then): what the key holds now is Redis's to say, and a
			// refusal from memory could not weigh it.
			return Result{}, false
		}
		held, wait := e.held, e.until.Sub(now)
		cheaper := it.N < e.n
		if it.Kind == Bucket {
			// Short of the remembered call's cost while remembered: the
			// refill the levels show ends the entry.
			held = min(held+now.Sub(e.at).Seconds()*e.rate, float64(e.burst))
			if !cheaper {
				held = min(held, math.Nextafter(float64(e.n), 0))
			}
			if it.N > e.n { // a costlier call waits for its own cost
				wait = max(wait, OverWait(it, held, now))
			}
		}
		if cheaper {
			// It may fit: weighed beside a refusal, it refuses nothing
			// alone (Redis decides it).
			if wait = OverWait(it, held, now); wait == 0 {
				continue
			}
		}
		refused = refused || !e.seen && !cheaper
		if found && wait <= r.Wait {
			continue
		}
		r, found = Result{Refused: i, Wait: wait, Local: true, Held: held}, true
	}
	return r, found && refused
}

// KnownRefusal returns, without a round trip, the refusal of items that
// this Store already knows of (see Decide), if any.
func (s *Store) KnownRefusal(items []Item) (Result, bool) {
	return s.shortCircuit(items, s.clock())
}

// admitted drops the remembered refusals of the keys of items Redis
// admitted, and remembers as seen (see overEntry) those its levels show
// short of the same call's cost, until they refill: a refusal remembered
// for another key of a later call then names their longer wait. It takes
// the write lock only when it has anything to change.
func (s *Store) admitted(items []Item, levels []float64, now time.Time) {
	short := false
	for k := range items {
		short = short || OverWait(&items[k], levels[k], now) > 0
	}
	s.mu.RLock()
	n := len(s.over)
	s.mu.RUnlock()
	if n == 0 && !short {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range items {
		delete(s.over, overKeyOf(&items[k]))
		if !short {
			continue
		}
		if wait := OverWait(&items[k], levels[k], now); wait > 0 {
			s.rememberLocked(&items[k], now, now.Add(wait), levels[k], true)
		}
	}
}

// forget drops the remembered refusals of items' keys.
func (s *Store) forget(items []Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range items {
		delete(s.over, overKeyOf(&items[i]))
	}
}

// remember records that it, holding held at now, is over its limit until
// until.
func (s *Store) remember(it *Item, now, until time.Time, held float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rememberLocked(it, now, until, held, false)
}

// rememberLocked is remember with s.mu held; seen marks what an admission
// left (see overEntry). A full map makes room for a refusal by dropping
// what an admission left, never the other way round.
func (s *Store) rememberLocked(it *Item, now, until time.Time, held float64, seen bool) {
	if len(s.over) >= maxOver {
		s.sweepLocked(s.clock())
	}
	if len(s.over) >= maxOver && !seen {
		for k, e := range s.over {
			if e.seen {
				delete(s.over, k)
				break
			}
		}
	}
	if len(s.over) >= maxOver {
		return
	}
	s.over[overKeyOf(it)] = overEntry{
		until: until, recheck: now.Add(RecheckAfter), n: it.N, rate: it.Rate, burst: it.Burst, lim: it.Limit,
		since: it.Since, held: held, at: now, seen: seen,
	}
}

// Sweep forgets remembered refusals whose wait has passed.
func (s *Store) Sweep(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
}

func (s *Store) sweepLocked(now time.Time) {
	for k, e := range s.over {
		if !now.Before(e.until) || !now.Before(e.recheck) {
			delete(s.over, k)
		}
	}
}

// Remembered returns how many refusals the short-circuit holds (not the
// levels admissions left).
func (s *Store) Remembered() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, e := range s.over {
		if !e.seen {
			n++
		}
	}
	return n
}
