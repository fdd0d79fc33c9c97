package mcplimit

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// freshCounters are counters of a zone that has counted nothing, for a
// zoneRedis made apart from a zone.
func freshCounters() redisCounters {
	return redisCounters{bound: quota.New(quota.Config{}), counts: quota.New(quota.Config{})}
}

// silentServer accepts connections and never answers: a Redis too slow
// to reply within the timeout, which may still run what it was sent.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return ln.Addr().String()
}

// A refund that timed out may have run in Redis: it is not kept to be
// pushed later, which would give the count back twice.
func TestTimedOutRefundIsNotPushedAgain(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "refund", Store: &Store{Redis: &RedisStore{URL: "redis://" + silentServer(t), Timeout: caddy.Duration(50 * time.Millisecond)}}})
	r := h.zone.redis.Load()
	h.zone.refundRedis(r, []redisstore.Item{{Kind: redisstore.Quota, Key: "i/refunded", Period: quota.Day, Limit: 10, N: 1}}, time.Now())
	if n := r.pendingLen(); n != 0 {
		t.Fatalf("%d counts kept to push, want none", n)
	}
}

// Counts recorded into a store a reload replaced, by a request or an
// adoption that loaded it just before the swap, or put back by a push the
// reload cut short, go to the store that took its pending counts over.
func TestReplacedRedisStoreForwardsItsCounts(t *testing.T) {
	old := &zoneRedis{redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	next := &zoneRedis{redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	old.movedTo = next
	now := time.Now()
	old.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, now, 1)
	old.addCounts([]quota.Count{{Key: "i/b", Period: quota.Day, Start: quota.Day.Start(now), N: 3}})
	old.putBack(map[deltaKey]int64{{key: "i/c", period: quota.Day, start: quota.Day.Start(now).Unix()}: 4}) // a push the reload cut short
	if old.pendingLen() != 0 || next.pendingLen() != 3 {
		t.Fatalf("pending: replaced store %d, its successor %d; want 0 and 3", old.pendingLen(), next.pendingLen())
	}
}

// A push of an outage's counts whose answer is lost (Redis too slow for
// the timeout) may still run in Redis. Sent again, it must not add its
// counts twice; counts made meanwhile go in a push of their own.
func TestPushThatTimedOutButRanIsNotCountedTwice(t *testing.T) {
	url, proc := localRedis(t)
	st, err := redisstore.New(redisstore.Config{URL: url, Zone: "push-doubt", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &zoneRedis{store: st, redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	ctx, day := context.Background(), quota.Day.Start(time.Now())
	count := func(key string) int64 {
		t.Helper()
		n, err := st.Used(ctx, key, quota.Day, day)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	signal := func(sig syscall.Signal) {
		t.Helper()
		if err := proc.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	add := func(key string, n int64) {
		r.addCounts([]quota.Count{{Key: key, Period: quota.Day, Start: day, N: n}})
	}

	// A first push loads the script, so that the one cut short below runs
	// as it was sent once Redis thaws.
	add("i/first", 1)
	if err := r.push(ctx, nil); err != nil || count("i/first") != 1 {
		t.Fatalf("first push: %v, count %d", err, count("i/first"))
	}
	add("i/doubt", 3)
	signal(syscall.SIGSTOP) // Redis freezes, and answers nothing until it thaws
	err = r.push(ctx, nil)
	signal(syscall.SIGCONT)
	if err == nil {
		t.Fatal("a push to a frozen Redis succeeded")
	}
	for deadline := time.Now().Add(5 * time.Second); count("i/doubt") != 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Redis never ran the push it received while frozen (count %d)", count("i/doubt"))
		}
	}
	if n := r.pendingLen(); n != 1 {
		t.Fatalf("%d counts kept to push, want the one in doubt", n)
	}
	add("i/later", 2)
	if err := r.push(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, later := count("i/doubt"), count("i/later"); got != 3 || later != 2 {
		t.Fatalf("after the retry: i/doubt %d (want 3: the push ran once), i/later %d (want 2)", got, later)
	}
	if n := r.pendingLen(); n != 0 {
		t.Fatalf("%d counts still to push", n)
	}
}

// Counts in doubt are counts not yet in Redis: the host's copy and a save
// to storage hold them, and a reload's new store sends them again under
// the same id.
func TestCountsInDoubtAreKeptLikePendingOnes(t *testing.T) {
	now := time.Now()
	k := func(key string) deltaKey {
		return deltaKey{key: key, period: quota.Day, start: quota.Day.Start(now).Unix()}
	}
	r := &zoneRedis{pending: map[deltaKey]int64{k("i/a"): 2, k("i/b"): 1}}
	r.doubt = &pushBatch{id: "p1", counts: map[deltaKey]int64{k("i/a"): 3, k("i/b"): -1}}
	if n := r.pendingLen(); n != 4 {
		t.Fatalf("pendingLen %d, want 4 (2 pending, 2 in doubt)", n)
	}
	r.mu.Lock()
	all := r.allLocked()
	r.mu.Unlock()
	if len(all) != 1 || all[k("i/a")] != 5 {
		t.Fatalf("all counts %v, want i/a 5 (i/b nets to nothing)", all)
	}
	z := &zone{name: "doubt-mirror", redisHost: newHostFiles(redisPendingKind, "doubt-mirror", "test")}
	z.logger.Store(zap.NewNop())
	t.Cleanup(func() { _ = os.Remove(z.redisHost.path()) })
	z.mirrorRedisPending(r)
	data, err := os.ReadFile(z.redisHost.path())
	if cs := parseCounts(data); err != nil || len(cs) != 1 || cs[0].Key != "i/a" || cs[0].N != 5 {
		t.Fatalf("the host's copy holds %v (%v), want i/a 5", cs, err)
	}
	if got := r.take(); len(got) != 1 || got[k("i/a")] != 5 || r.pendingLen() != 0 {
		t.Fatalf("take = %v, leaving %d", got, r.pendingLen())
	}

	// A push cut short by a reload keeps its batch, id and all, in the
	// store that took the counts over.
	old := &zoneRedis{redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	next := &zoneRedis{redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	old.movedTo = next
	b := &pushBatch{id: "p2", counts: map[deltaKey]int64{k("i/c"): 4}}
	old.keepInDoubt(b)
	if next.doubt != b || old.pendingLen() != 0 {
		t.Fatalf("the batch in doubt stayed with the replaced store (successor's: %+v)", next.doubt)
	}
	// A second batch in doubt joins the pending counts.
	next.keepInDoubt(&pushBatch{id: "p3", counts: map[deltaKey]int64{k("i/d"): 1}})
	if next.doubt != b || next.pending[k("i/d")] != 1 {
		t.Fatalf("second batch in doubt: doubt %+v, pending %v", next.doubt, next.pending)
	}
}

// A reload that replaces the store while a push is in doubt hands the
// batch to the new store, which sends it: its counts reach Redis.
func TestReloadCarriesTheBatchInDoubt(t *testing.T) {
	url, _ := localRedis(t)
	h := provisionForTest(t, &Handler{Zone: "doubt-reload", Store: &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}}})
	z, old := h.zone, h.zone.redis.Load()
	day := quota.Day.Start(time.Now())
	old.mu.Lock()
	old.doubt = &pushBatch{id: newPushID(), counts: map[deltaKey]int64{{key: "i/reloaded", period: quota.Day, start: day.Unix()}: 6}}
	old.mu.Unlock()
	pol := *h.pol
	pol.redis = &RedisStore{URL: url, Timeout: caddy.Duration(2 * time.Second)}
	z.applyRedis(&pol)
	next := z.redis.Load()
	if next == old {
		t.Fatal("the reload kept the old store")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := next.store.Used(context.Background(), "i/reloaded", quota.Day, day)
		if err == nil && n == 6 && next.pendingLen() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch in doubt never reached Redis: count %d (%v), %d counts pending", n, err, next.pendingLen())
		}
	}
}

// A handler writing the zone's store otherwise but meaning the same one
// (its default timeout written out, its URL from a placeholder) keeps the
// zone's store: handlers of one config may write it either way, and
// each would otherwise reconnect, handing its counts over.
func TestTheSameStoreWrittenOtherwiseIsKept(t *testing.T) {
	url, _ := localRedis(t)
	t.Setenv("SAME_STORE_URL", url)
	h := provisionForTest(t, &Handler{Zone: "same-store", Store: &Store{Redis: &RedisStore{URL: url}}})
	z, old := h.zone, h.zone.redis.Load()
	pol := *h.pol
	pol.redis = &RedisStore{URL: "{env.SAME_STORE_URL}", Timeout: caddy.Duration(redisstore.DefaultTimeout)}
	z.applyRedis(&pol)
	if z.redis.Load() != old {
		t.Fatal("the same store written otherwise was replaced")
	}
	pol.redis = &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}
	z.applyRedis(&pol)
	if z.redis.Load() == old {
		t.Fatal("a store with another timeout kept the old one")
	}
}

// outageTenants is how many tenants the push tests' outage counted: more
// than two pushes' worth.
const outageTenants = 2*pushChunk + 500

// outageCounts returns a zoneRedis on a Redis of its own, for zone, holding
// outageTenants pending counts of today (tenant i counted n(i) calls), with
// the counts and that Redis's URL and process.
func outageCounts(t *testing.T, zone string, timeout time.Duration, n func(i int) int64) (*zoneRedis, []quota.Count, string, *os.Process) {
	t.Helper()
	url, proc := localRedis(t)
	st, err := redisstore.New(redisstore.Config{URL: url, Zone: zone, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &zoneRedis{store: st, redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	day := quota.Day.Start(time.Now())
	cs := make([]quota.Count, outageTenants)
	for i := range cs {
		cs[i] = quota.Count{Key: "i/t" + strconv.Itoa(i), Period: quota.Day, Start: day, N: n(i)}
	}
	r.addCounts(cs)
	return r, cs, url, proc
}

// The host's copy of an outage's counts holds the batch in flight while
// its push runs, and loses each batch once Redis took it: after a crash in
// the middle of a long push, the next process pushes again only the batch
// that was on its way.
func TestTheHostsCopyFollowsEachPushedBatch(t *testing.T) {
	r, _, _, proc := outageCounts(t, "push-mirrored", 500*time.Millisecond, func(int) int64 { return 1 })
	const tenants = outageTenants
	ctx := context.Background()
	copied := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.allLocked())
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() { failed <- r.push(ctx, nil) }()
	time.Sleep(100 * time.Millisecond) // the first batch is on its way to the frozen Redis
	inFlight := copied()
	err := <-failed
	if serr := proc.Signal(syscall.SIGCONT); serr != nil {
		t.Fatal(serr)
	}
	if err == nil {
		t.Fatal("a push to a frozen Redis succeeded")
	}
	if inFlight != tenants {
		t.Fatalf("while a batch was on its way the copy would hold %d counts, want all %d", inFlight, tenants)
	}
	var after []int
	if err := r.push(ctx, func() { after = append(after, copied()) }); err != nil {
		t.Fatal(err)
	}
	if want := []int{tenants - pushChunk, tenants - 2*pushChunk, 0}; !slices.Equal(after, want) {
		t.Fatalf("after each pushed batch the copy would hold %v, want %v", after, want)
	}
}

// After a long outage of many tenants the counts go in chunks, each a
// push of its own, so that none outgrows the store's timeout; all arrive.
func TestAnOutagesManyCountsArePushedInChunks(t *testing.T) {
	r, cs, url, _ := outageCounts(t, "push-chunks", time.Second, func(i int) int64 { return int64(i%7 + 1) })
	st, day := r.store, cs[0].Start
	ctx := context.Background()
	if err := r.push(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := r.pendingLen(); n != 0 {
		t.Fatalf("%d counts left after the push", n)
	}
	for _, c := range cs {
		if n, err := st.Used(ctx, c.Key, quota.Day, day); err != nil || n != c.N {
			t.Fatalf("%s holds %d (%v), want %d", c.Key, n, err, c.N)
		}
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	if marks, err := c.Keys(ctx, "mcprl:{push-chunks}:push:*").Result(); err != nil || len(marks) != 3 {
		t.Fatalf("%d pushes (%v), want 3 of at most %d counts", len(marks), err, pushChunk)
	}
}

// A local layer that refuses after Redis admitted a call gives the Redis
// admission back. The concurrency slots are taken before the round trip
// when the store is healthy; here it recovers while the call is decided
// (degraded when its decision starts, healthy by the Redis step), so the
// slot is taken after, and the zone's one slot is taken meanwhile, as a
// concurrent call may. The same call then passes once the slot is free
// again, which it cannot if its tenant token and the last of its daily
// quota (the proving call counts one of two) stayed spent.
func TestRedisAdmissionIsGivenBackWhenALaterLocalLayerRefuses(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	url, _ := localRedis(t)
	h := provisionForTest(t, &Handler{
		Zone: "redis-refund-local", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 1}, Quota: &QuotaLimit{Day: 2}, Global: &RateLimit{Off: true},
		Concurrency: &Concurrency{Max: 1},
		Store:       &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}},
	})
	call := func() (int, string) { return serveCall(t, h, "Bearer refund", http.StatusOK) }
	if code, body := call(); code != http.StatusOK { // proves the credential, on pre-auth
		t.Fatalf("proving call: %d %s", code, body)
	}
	slotTakenAfterRedis(t, h, func(*decision) {})
	if code, body := call(); code != http.StatusTooManyRequests || !strings.Contains(body, "CONCURRENCY_LIMITED") {
		t.Fatalf("call with the slot taken meanwhile: %d %s, want a concurrency refusal", code, body)
	}
	h.zone.all.Release(globalKey, 1)
	if code, body := call(); code != http.StatusOK {
		t.Fatalf("the same call with the slot free: %d %s; the refused call kept what Redis charged", code, body)
	}
}

// An unproven credential's quota that Redis held no count of was not
// charged, so a rollback gives nothing back to it: a count another
// instance made meanwhile stays whole.
func TestRollbackLeavesAnUnchargedQuotaAlone(t *testing.T) {
	const token = "Bearer valid-uncharged"
	h, key := oneSlotOnRedis(t, "redis-uncharged-rollback", token)
	store := h.zone.redis.Load().store
	slotTakenAfterRedis(t, h, func(d *decision) {
		// Another instance counts a call of the identity.
		if _, err := store.Push(t.Context(), "meanwhile", []redisstore.Delta{{Key: key, Period: quota.Day, Start: quota.Day.Start(d.now), N: 1}}); err != nil {
			t.Error(err)
		}
	})
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "CONCURRENCY_LIMITED") {
		t.Fatalf("call with the slot taken meanwhile: %d %s, want a concurrency refusal", code, body)
	}
	if n, err := store.Used(t.Context(), key, quota.Day, quota.Day.Start(time.Now())); err != nil || n != 1 {
		t.Fatalf("Redis counts %d (%v) for the identity, want the other instance's 1", n, err)
	}
}

// A call Redis admitted and a later local layer refused is given back in
// Redis and in what the zone knows Redis holds, which a smaller report
// does not lower (a Redis that lost its data): the host's copy, to which
// a start raises Redis, must not hold the refunded call.
func TestARefundIsLeftOutOfWhatRedisIsKnownToHold(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const token = "Bearer valid-refund-observed"
	h, key := oneSlotOnRedis(t, "redis-refund-observed", token)
	for range 2 { // the proving call, and one decided in Redis
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	slotTakenAfterRedis(t, h, func(*decision) {})
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "CONCURRENCY_LIMITED") {
		t.Fatalf("call with the slot taken meanwhile: %d %s, want a concurrency refusal", code, body)
	}
	now := time.Now()
	if n, err := h.zone.redis.Load().store.Used(t.Context(), key, quota.Day, quota.Day.Start(now)); err != nil || n != 2 {
		t.Fatalf("Redis counts %d (%v), want 2: the refused call given back", n, err)
	}
	for _, c := range h.zone.quota.Observed(now) {
		if c.Key == key && c.N != 2 {
			t.Fatalf("the zone knows Redis to hold %d for the identity, want 2: the refunded call is in the host's copy", c.N)
		}
	}
}

// A store whose user may read and write the fingerprint key but cannot
// decide (an ACL without TIME, which every decision calls) starts
// degraded, deciding locally, with the key adopted, and so does one a
// reload adds to a running zone: each was shown healthy
// until the zone's first call failed, and a fail_closed tool's first call
// was the first to learn it.
func TestAStoreThatCannotDecideStartsDegraded(t *testing.T) {
	url, _ := localRedis(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(opt)
	defer admin.Close()
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "notime", "on", ">pw", "~mcprl:*", "resetchannels", "-@all", "+@scripting", "+@read", "+@write").Err(); err != nil {
		t.Fatal(err)
	}
	store := &RedisStore{URL: "redis://notime:pw@" + opt.Addr + "/0", Timeout: caddy.Duration(time.Second)}
	h := provisionForTest(t, &Handler{Zone: "redis-cannot-decide", Store: &Store{Redis: store}})
	storeErrors := func(z *zone) float64 {
		var m dto.Metric
		if err := z.metrics.storeErrs.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	if r := h.zone.redis.Load(); !r.keyAdopted.Load() || !r.degraded.Load() || storeErrors(h.zone) != 1 {
		t.Fatalf("a store that cannot decide started with the key adopted %v, degraded %v, %v store errors; want both, and 1",
			r.keyAdopted.Load(), r.degraded.Load(), storeErrors(h.zone))
	}
	// The same store added by a reload to a zone that had none.
	added := provisionForTest(t, &Handler{Zone: "redis-cannot-decide-added"})
	pol := *added.pol
	pol.redis = store
	added.zone.applyRedis(&pol)
	if r := added.zone.redis.Load(); !r.keyAdopted.Load() || !r.degraded.Load() || storeErrors(added.zone) != 1 {
		t.Fatalf("a store that cannot decide added with the key adopted %v, degraded %v, %v store errors; want both, and 1",
			r.keyAdopted.Load(), r.degraded.Load(), storeErrors(added.zone))
	}
}

// oneSlotOnRedis returns a handler of zone on Redis with a daily quota of
// 5 and one concurrency slot, and the quota key of the identity token.
func oneSlotOnRedis(t *testing.T, zone, token string) (*Handler, string) {
	t.Helper()
	h := onRedis(t, &Handler{
		Zone: zone, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Quota: &QuotaLimit{Day: 5}, Global: &RateLimit{Off: true}, Concurrency: &Concurrency{Max: 1},
	})
	return h, "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
}

// slotTakenAfterRedis has the next call h decides find its Redis store
// recovering meanwhile (degraded when the decision starts, healthy by the
// Redis step), so that its concurrency slots are taken after the round
// trip rather than before; once Redis admitted it, meanwhile runs and a
// concurrent call takes the zone's one slot.
func slotTakenAfterRedis(t *testing.T, h *Handler, meanwhile func(*decision)) {
	t.Helper()
	redisStep := admissionSteps[0]
	t.Cleanup(func() { admissionSteps[0] = redisStep })
	r := h.zone.redis.Load()
	r.degraded.Store(true)
	admissionSteps[0] = func(d *decision) bool {
		admissionSteps[0] = redisStep
		r.degraded.Store(false)
		ok := redisStep(d)
		if !ok || !d.inRedis {
			t.Error("Redis did not admit the call")
			return ok
		}
		meanwhile(d)
		if !d.z.all.Acquire(globalKey, 1, 1) {
			t.Error("the test could not take the slot")
		}
		return ok
	}
}

// unusedAddr returns a loopback address where nothing listens (a port
// just taken and given back).
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// serveCall serves a call of the tool echo with the Authorization value
// auth (and the header names and values of hdr, in pairs) through h, in
// front of a backend that answers with status, and returns the answer's
// status and body.
func serveCall(t *testing.T, h *Handler, auth string, status int, hdr ...string) (int, string) {
	t.Helper()
	return serveTool(t, h, "echo", auth, status, hdr...)
}

// serveTool is serveCall for a call of tool.
func serveTool(t *testing.T, h *Handler, tool, auth string, status int, hdr ...string) (int, string) {
	t.Helper()
	rec := serveRecorded(t, h, tool, auth, status, hdr...)
	return rec.Code, rec.Body.String()
}

// serveRecorded is serveTool that returns the whole answer.
func serveRecorded(t *testing.T, h *Handler, tool, auth string, status int, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	return serveBody(t, h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":`+strconv.Quote(tool)+`}}`, auth, status, hdr...)
}

// serveBody is serveRecorded for a body of any JSON-RPC request.
func serveBody(t *testing.T, h *Handler, body, auth string, status int, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://test/mcp", strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	rec := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		w.WriteHeader(status)
		return nil
	})
	if err := h.ServeHTTP(rec, req, next); err != nil {
		t.Fatal(err)
	}
	return rec
}

// An unproven caller's request is charged in Redis, to the global bucket
// every instance shares, once it has paid its address's pre-auth token: a
// request pre-auth refuses costs no round trip, so a scanner costs a map
// lookup, not a network hop.
func TestUnprovenRequestsReachRedisOnlyPastPreauth(t *testing.T) {
	url, _ := localRedis(t)
	h := provisionForTest(t, &Handler{
		Zone: "redis-unproven", Preauth: &RateLimit{Rate: "1/h", Burst: 2},
		Global: &RateLimit{Rate: "1/h", Burst: 3},
		Store:  &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}},
	})
	for i, auth := range []string{"", "Bearer garbage-1"} {
		if code, body := serveCall(t, h, auth, http.StatusUnauthorized); code != http.StatusUnauthorized {
			t.Fatalf("unproven call %q: %d %s, want the backend's 401", auth, code, body)
		}
		if n := storeRoundTrips(t, h); n != uint64(i+1) {
			t.Fatalf("%d Redis round trips after %d unproven calls, want %d", n, i+1, i+1)
		}
	}
	tokens, _, ok, err := h.zone.redis.Load().store.Tokens(t.Context(), "global")
	if err != nil || !ok || tokens < 0.99 || tokens > 1.01 {
		t.Fatalf("Redis's global bucket holds %v (%v, %v) after 2 unproven calls, want 1 of 3", tokens, ok, err)
	}
	if code, body := serveCall(t, h, "Bearer garbage-2", http.StatusUnauthorized); code != http.StatusTooManyRequests || !strings.Contains(body, "PREAUTH_RATE_LIMITED") {
		t.Fatalf("an unproven call with its address's pre-auth budget spent: %d %s", code, body)
	}
	if n := storeRoundTrips(t, h); n != 2 {
		t.Fatalf("%d Redis round trips after a pre-auth refusal, want still 2", n)
	}
}

// With store redis, a call whose 2xx proves its credential is counted in
// Redis before its answer goes on, so that the identity's next call,
// decided in Redis, finds it; and in what the instance knows of the
// identity, so that its next unproven call finds a count to charge.
func TestProvingCallIsCountedInRedis(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	url, _ := localRedis(t)
	h := provisionForTest(t, &Handler{
		Zone: "redis-proving", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 2}, Global: &RateLimit{Off: true},
		Store: &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}},
	})
	const token = "Bearer valid-proving"
	awayFromMidnight(t)
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("proving call: %d %s", code, body)
	}
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	now := time.Now()
	if n := h.zone.quota.Used([]byte(key), quota.Day, now); n != 1 {
		t.Fatalf("the instance knows a count of %d for the identity after its proving call, want 1", n)
	}
	r := h.zone.redis.Load()
	if n, err := r.store.Used(t.Context(), key, quota.Day, quota.Day.Start(now)); err != nil || n != 1 {
		t.Fatalf("Redis counts %d (%v) for the identity after its proving call, want 1", n, err)
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("second call: %d %s", code, body)
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "QUOTA_EXHAUSTED") {
		t.Fatalf("third call against a quota of 2: %d %s, want it refused", code, body)
	}
	if err := r.push(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := r.store.Used(t.Context(), key, quota.Day, quota.Day.Start(now)); err != nil || n != 2 {
		t.Fatalf("Redis counts %d (%v) for the identity, want 2", n, err)
	}
}

// awayFromMidnight waits, when 00:00 UTC is less than 15s away or ago,
// until 15s past it: a count Redis reports within quota.ObserveSlack of a
// period's start is not taken as the new period's.
func awayFromMidnight(t *testing.T) {
	t.Helper()
	now := time.Now().UTC()
	next := quota.Day.Next(now)
	switch {
	case next.Sub(now) < 15*time.Second:
		time.Sleep(next.Sub(now) + 15*time.Second)
	case now.Sub(quota.Day.Start(now)) < 15*time.Second:
		time.Sleep(15*time.Second - now.Sub(quota.Day.Start(now)))
	}
}

// A store added to a running zone while Redis is unreachable carries the
// zone's counts once Redis returns: a tenant must not get its quota
// afresh because the decision moved to Redis during an outage.
func TestStoreAddedDuringAnOutageCarriesTheCountsOnceRedisReturns(t *testing.T) {
	url, _ := localRedis(t)
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{
		Zone: "redis-carry-late", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 10}, Global: &RateLimit{Off: true},
	})
	const token = "Bearer valid-carry-late"
	for range 3 {
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("local call: %d %s", code, body)
		}
	}
	addr := unusedAddr(t) // Redis is unreachable there, for now
	pol := *h.pol
	pol.redis = &RedisStore{URL: "redis://" + addr, Timeout: caddy.Duration(time.Second)}
	h.zone.applyRedis(&pol)
	r := h.zone.redis.Load()
	if !r.degraded.Load() {
		t.Fatal("the store added while Redis is unreachable is not degraded")
	}
	// Redis returns at that address.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	target := opts.Addr
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c) }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	r.mu.Lock()
	r.nextProbe = time.Time{}
	r.mu.Unlock()
	h.zone.probeRedis(t.Context(), time.Now())
	if r.degraded.Load() {
		t.Fatalf("Redis back, the store is still degraded: %v", h.zone.storeStatus())
	}
	now := time.Now()
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	if n, err := r.store.Used(t.Context(), key, quota.Day, quota.Day.Start(now)); err != nil || n != 3 {
		t.Fatalf("Redis counts %d (%v) for the identity, want the 3 counted before the store was added", n, err)
	}
}

// Counts an unproven caller's request made locally (here a group's, whose
// members' first calls are unproven) are in Redis before a call decided
// there: the group's quota holds on one instance as it does without Redis.
func TestLocalCountsReachRedisBeforeTheNextDecision(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-local-first", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Group: &Group{Key: "{http.request.host}", Rate: "100/s", Burst: 100}, GroupQuota: &QuotaLimit{Day: 3},
	})
	if code, body := serveCall(t, h, "Bearer valid-member", http.StatusOK); code != http.StatusOK { // proves it
		t.Fatalf("proving call: %d %s", code, body)
	}
	for _, token := range []string{"Bearer unproven-1", "Bearer unproven-2"} {
		if code, body := serveCall(t, h, token, http.StatusInternalServerError); code != http.StatusInternalServerError {
			t.Fatalf("unproven member's call: %d %s", code, body)
		}
	}
	if code, body := serveCall(t, h, "Bearer valid-member", http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"group_quota"`) {
		t.Fatalf("a fourth call of the group against a group quota of 3: %d %s, want it refused", code, body)
	}
}

// An identity forgotten after using some of its quota is charged to it
// in Redis while unproven: getting forgotten gains no call.
func TestForgottenIdentitysQuotaHoldsInRedis(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-forgotten-count", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 4},
	})
	const token = "Bearer valid-forgotten-count"
	for i, status := range []int{http.StatusOK, http.StatusOK, http.StatusForbidden, http.StatusOK} {
		if code, body := serveCall(t, h, token, status); code != status {
			t.Fatalf("call %d: %d %s, want the backend's %d", i+1, code, body, status)
		}
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "QUOTA_EXHAUSTED") {
		t.Fatalf("a fifth call against a quota of 4, after a forget: %d %s, want it refused", code, body)
	}
}

// A forgotten identity is charged where its buckets are: its drained
// tenant bucket in Redis refuses its unproven calls, which a fresh local
// bucket would admit (a full burst per instance per forget).
func TestForgottenIdentityIsChargedInRedis(t *testing.T) {
	url, _ := localRedis(t)
	h := provisionForTest(t, &Handler{
		Zone: "redis-forgotten-tenant", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/h", Burst: 2}, Quota: &QuotaLimit{Off: true}, Global: &RateLimit{Off: true},
		Store: &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}},
	})
	const token = "Bearer valid-forgotten-tenant"
	for i := range 3 { // the first proves the identity, the other two drain its bucket
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	forgetWithFreeCall(t, h, token)
	if code, body := serveCall(t, h, token, http.StatusInternalServerError); code != http.StatusTooManyRequests || !strings.Contains(body, "TENANT_RATE_LIMITED") {
		t.Fatalf("the forgotten identity's call with its Redis bucket drained: %d %s, want a tenant refusal", code, body)
	}
}

// onRedis provisions h with a store in a Redis of its own, away from
// 00:00 UTC (see awayFromMidnight).
func onRedis(t *testing.T, h *Handler) *Handler {
	t.Helper()
	url, _ := localRedis(t)
	awayFromMidnight(t)
	h.Store = &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}}
	return provisionForTest(t, h)
}

// A new credential's first calls sent at once are all unproven, and each
// 2xx proves it: every one is counted in Redis and in what the instance
// knows of the identity, so that its unproven calls later (after
// known_ttl, or while Redis is unreachable) find them all.
func TestParallelProvingCallsAreAllKnownHere(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-parallel-proving", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 100},
	})
	const token, calls = "Bearer valid-parallel-proving", 5
	var inside sync.WaitGroup
	inside.Add(calls)
	release := make(chan struct{})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		inside.Done()
		<-release
		w.WriteHeader(http.StatusOK)
		return nil
	})
	var served sync.WaitGroup
	for i := range calls {
		served.Go(func() {
			body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"echo"}}`
			req := httptest.NewRequest(http.MethodPost, "http://test/mcp", strings.NewReader(body))
			req.Header.Set("Authorization", token)
			req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
			if err := h.ServeHTTP(httptest.NewRecorder(), req, next); err != nil {
				t.Error(err)
			}
		})
	}
	inside.Wait() // all admitted unproven before any answer proves
	close(release)
	served.Wait()
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	now := time.Now()
	if n := h.zone.quota.Used([]byte(key), quota.Day, now); n != calls {
		t.Fatalf("the instance knows a count of %d for the identity after %d parallel proving calls, want %d", n, calls, calls)
	}
	if n, err := h.zone.redis.Load().store.Used(t.Context(), key, quota.Day, quota.Day.Start(now)); err != nil || n != calls {
		t.Fatalf("Redis counts %d (%v), want %d", n, err, calls)
	}
}

// An identity that expired (known_ttl after its last use) or was
// forgotten was proven: its unproven calls are charged where its buckets
// and counts are, in Redis, where its drained tenant bucket refuses them,
// even past known_ttl, until that bucket would have refilled (each
// known_ttl of idleness bought a pre-auth burst past it).
func TestLapsedIdentityIsChargedInRedisUntilItsBucketRefills(t *testing.T) {
	for _, forget := range []bool{false, true} {
		zone := "redis-lapsed-" + strconv.FormatBool(forget)
		t.Run(zone, func(t *testing.T) {
			h := onRedis(t, &Handler{
				Zone: zone, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
				Tenant: &RateLimit{Rate: "1/h", Burst: 2}, Quota: &QuotaLimit{Off: true}, Global: &RateLimit{Off: true},
				KnownTTL: caddy.Duration(300 * time.Millisecond),
			})
			const token = "Bearer valid-lapsed"
			for i := range 3 { // the first proves the identity, the other two drain its bucket
				if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
					t.Fatalf("call %d: %d %s", i+1, code, body)
				}
			}
			if forget {
				forgetWithFreeCall(t, h, token)
			}
			time.Sleep(400 * time.Millisecond) // past known_ttl
			if h.zone.known.Contains(h.zone.fpKey.Load().sum(token), time.Now()) {
				t.Fatal("the identity is still proven past known_ttl")
			}
			if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "TENANT_RATE_LIMITED") {
				t.Fatalf("a call past known_ttl, its Redis bucket drained: %d %s, want a tenant refusal", code, body)
			}
		})
	}
}

// forgetWithFreeCall has the backend answer a tools/list, which costs
// nothing, with a 403 that forgets the identity.
func forgetWithFreeCall(t *testing.T, h *Handler, token string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://test/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", token)
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	if err := h.ServeHTTP(httptest.NewRecorder(), req, caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		w.WriteHeader(http.StatusForbidden)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if h.zone.known.Contains(h.zone.fpKey.Load().sum(token), time.Now()) {
		t.Fatal("the 403 did not forget the identity")
	}
}

// An unproven identity with a count in this instance's quotas was proven
// (only proven identities' calls count): its calls are decided in Redis,
// where the other instances' calls since are counted, not against the
// count this instance saw.
func TestIdentityCountedHereIsDecidedInRedis(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	h := onRedis(t, &Handler{
		Zone: "redis-counted-here", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1000/s", Burst: 100}, Quota: &QuotaLimit{Day: 10}, Global: &RateLimit{Off: true},
		KnownTTL: caddy.Duration(200 * time.Millisecond),
	})
	const token = "Bearer valid-counted-here"
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
		t.Fatalf("proving call: %d %s", code, body)
	}
	// Another instance uses up the rest of the quota.
	key := "i/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	now := time.Now()
	r := h.zone.redis.Load()
	if _, err := r.store.Push(t.Context(), newPushID(), []redisstore.Delta{{Key: key, Period: quota.Day, Start: quota.Day.Start(now), N: 9}}); err != nil {
		t.Fatal(err)
	}
	// Past known_ttl, the identity lapses to forgotten, and that too
	// ends (its bucket refilled): it is neither proven nor forgotten.
	time.Sleep(300 * time.Millisecond)
	h.zone.known.Sweep(time.Now())
	time.Sleep(300 * time.Millisecond)
	fp := h.zone.fpKey.Load().sum(token)
	if h.zone.known.Contains(fp, time.Now()) || h.zone.forgotten.Contains(fp, time.Now()) {
		t.Fatal("the identity is still proven or forgotten")
	}
	if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusTooManyRequests || !strings.Contains(body, "QUOTA_EXHAUSTED") {
		t.Fatalf("the identity's call with its quota used up in Redis: %d %s, want a quota refusal", code, body)
	}
}

// A zone starting while Redis hangs waits for it no longer than the
// store's timeout (at least redisStartMin, for a first connection), then
// starts degraded: Caddy serves nothing until every zone has started.
func TestStartWhileRedisHangsWaitsTheTimeout(t *testing.T) {
	addr := silentServer(t)
	for _, c := range []struct {
		timeout, want time.Duration
	}{
		{50 * time.Millisecond, redisStartMin},
		{time.Second, time.Second},
	} {
		h := &Handler{Zone: "redis-start-hung", Store: &Store{Redis: &RedisStore{URL: "redis://" + addr, Timeout: caddy.Duration(c.timeout)}}}
		pol, err := compile(h)
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.ErrorLevel)
		r, _, err := openRedis(pol, make([]byte, 32), freshCounters(), zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		_ = r.store.Close()
		if !r.degraded.Load() {
			t.Errorf("timeout %v: the store is not degraded after a start while Redis hangs", c.timeout)
		}
		events := logs.FilterMessageSnippet("unavailable at start").All()
		if len(events) != 1 {
			t.Fatalf("timeout %v: %d start failures logged, want 1", c.timeout, len(events))
		}
		if wait, _ := events[0].ContextMap()["timeout"].(time.Duration); wait != c.want {
			t.Errorf("timeout %v: the start waits %v for Redis, want %v", c.timeout, wait, c.want)
		}
	}
}

// A reload that adds a store Redis does not answer logs it, also when the
// store starts degraded for counts it must push first (kept while the zone
// had no store): the operator learns why the zone decides locally.
func TestStoreAddedWhileRedisIsDownIsLoggedWithCountsToPush(t *testing.T) {
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{Zone: "redis-add-down", Quota: &QuotaLimit{Day: 10}})
	core, logs := observer.New(zap.ErrorLevel)
	h.zone.logger.Store(zap.New(core))
	dt := &zoneRedis{redisCounters: h.zone.counters(), pending: map[deltaKey]int64{}}
	dt.add(deltaKey{key: "i/kept", period: quota.Day, start: quota.Day.Start(time.Now()).Unix()}, 1)
	h.zone.detached.Store(dt)
	addr := unusedAddr(t)
	pol := *h.pol
	pol.redis = &RedisStore{URL: "redis://" + addr, Timeout: caddy.Duration(100 * time.Millisecond)}
	h.zone.applyRedis(&pol)
	if n := logs.FilterMessageSnippet("redis store unavailable").Len(); n != 1 {
		t.Fatalf("%d log lines for a store added while Redis is down, with counts to push, want 1", n)
	}
}

// While Redis is down, the host's copy of the calls kept for it is written
// before the probe asks Redis, not after: Redis can keep the probe waiting
// up to its timeouts, and a crash meanwhile would lose the calls.
func TestCopyOfTheOutagesCallsDoesNotWaitForTheProbe(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	h := provisionForTest(t, &Handler{Zone: "probe-copy", Quota: &QuotaLimit{Day: 10}})
	z := h.zone
	st, err := redisstore.New(redisstore.Config{URL: "redis://" + silentServer(t), Zone: "probe-copy", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := &zoneRedis{store: st, redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	r.degraded.Store(true) // its probe asks Redis at the zone's next sweep, and waits
	r.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, time.Now(), 1)
	z.redis.Store(r)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if cs, _ := readCounts(z.redisHost.path()); len(cs) == 1 && cs[0].N == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the host's copy of the outage's calls waited for the probe's answer from Redis")
		}
	}
}

// A refusal Redis gives an unproven call gives back the pre-auth token it
// paid, and its RateLimit field reads the pre-auth bucket as the call
// found it, as without Redis: not the level its taken token left. Burst 4:
// the first call leaves 3, and the second, refused by the global bucket
// in Redis, finds 3 and leaves them.
func TestRedisRefusalReadsThePreauthTokenItGaveBack(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: "redis-preauth-level", Preauth: &RateLimit{Rate: "1/m", Burst: 4},
		Global: &RateLimit{Rate: "1/m", Burst: 1},
	})
	var fields []string
	for i := range 2 {
		rec := serveRecorded(t, h, "echo", "Bearer rejected-preauth-level", http.StatusUnauthorized)
		if want := []int{http.StatusUnauthorized, http.StatusTooManyRequests}[i]; rec.Code != want {
			t.Fatalf("call %d: %d %s, want %d", i+1, rec.Code, rec.Body, want)
		}
		fields = append(fields, rec.Header().Get("RateLimit"))
	}
	if !strings.Contains(fields[0], `"preauth";r=3;`) || !strings.Contains(fields[1], `"preauth";r=3;`) {
		t.Errorf("RateLimit of the admitted call %q and of the refused one %q: want the pre-auth bucket at 3 in both", fields[0], fields[1])
	}
}
