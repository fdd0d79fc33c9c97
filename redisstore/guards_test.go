package redisstore_test

import (
	"bytes"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// redisMicros is Redis's own clock in Unix microseconds, the unit of a
// bucket's ts.
func redisMicros(t *testing.T, r *harness.Redis) int64 {
	t.Helper()
	s := r.Do(t, "EVAL", "local t = redis.call('TIME') return t[1] * 1000000 + t[2]", "0")
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("TIME in microseconds: %q", s)
	}
	return us
}

// setBucket writes bucket key's hash as the scripts store it: tokens
// counted at ts (Unix microseconds) under rate and burst.
func setBucket(t *testing.T, r *harness.Redis, s *redisstore.Store, key string, tokens float64, ts int64, rate float64, burst int64) {
	t.Helper()
	r.Do(t, "HSET", s.BucketKey(key), "tokens", strconv.FormatFloat(tokens, 'f', -1, 64), "ts", strconv.FormatInt(ts, 10),
		"rate", strconv.FormatFloat(rate, 'f', -1, 64), "burst", strconv.FormatInt(burst, 10))
}

// skipNearDayEnd skips a test whose quota day could end while it runs:
// its key would change under it.
func skipNearDayEnd(t *testing.T, within time.Duration) {
	t.Helper()
	if now := time.Now(); quota.Day.Next(now).Sub(now) < within {
		t.Skip("the UTC day ends within the test")
	}
}

// A bucket charged under other limits at the very microsecond the new
// ones came into force was charged under the old ones: the idle time
// since is credited at the old rate. Crediting it at the new one would
// hand a drained bucket a fresh burst at every limit change whose time
// matches its last charge.
func TestIdleTimeFromAChargeAtTheChangeIsCreditedAtTheOldRate(t *testing.T) {
	r, s, _ := storeOnRedis(t)
	ts := redisMicros(t, r) - time.Second.Microseconds()
	setBucket(t, r, s, "t/at", 0, ts, 0.1, 10)
	it := bucket("t/at", 100, 10, 1)
	it.Since = time.UnixMicro(ts)
	res, err := s.Peek(t.Context(), []redisstore.Item{it})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Now) != 1 || res.Now[0] >= 1 {
		t.Fatalf("Peek %+v: want about 0.1 tokens (1s at the old 0.1/s), not the new rate's 100/s", res)
	}
}

// A limit change still ahead on Redis's clock leaves the old rate in
// force until then: a bucket that refills at the old rate before the
// change waits the old rate's time, not the 1ms the change's credit
// would make it look like. A caller told 1ms would come back at once and
// be refused again.
func TestAChangeAheadLeavesTheWaitAtTheOldRate(t *testing.T) {
	r, s, _ := storeOnRedis(t)
	now := redisMicros(t, r)
	setBucket(t, r, s, "t/ahead", 0, now, 10, 10)
	it := bucket("t/ahead", 1, 10, 5)
	it.Since = time.UnixMicro(now + (10 * time.Second).Microseconds())
	res, err := s.Peek(t.Context(), []redisstore.Item{it})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || len(res.Refill) != 1 || res.Refill[0] < 100*time.Millisecond || res.Refill[0] > 510*time.Millisecond {
		t.Fatalf("Peek %+v: want a refill of about 500ms (5 tokens at the old 10/s, well before the change 10s ahead)", res)
	}
}

// Two items of one decision on the same quota key add up: each is
// checked against the count with the others' costs added, so two calls
// of 3 against a limit of 5 are refused together and count nothing,
// rather than each fitting the stored count alone and counting 6.
func TestItemsOfOneDecisionOnTheSameQuotaKeyAddUp(t *testing.T) {
	skipNearDayEnd(t, time.Minute)
	_, s, now := storeOnRedis(t)
	res := decide(t, s, quotaItem("i/twice", quota.Day, 5, 3), quotaItem("i/twice", quota.Day, 5, 3))
	if res.OK || res.Refused != 1 {
		t.Fatalf("two items of 3 on one key of limit 5: %+v, want the second refused", res)
	}
	if n, err := s.Used(t.Context(), "i/twice", quota.Day, now); err != nil || n != 0 {
		t.Fatalf("count %d (%v) after the refusal, want nothing counted", n, err)
	}
}

// A quota item of cost 0 writes nothing: its key would hold 0, and a
// QuotaIfCounted for it (a credential not yet accepted) would then be
// charged as though it had been counted before, leaving keys behind for
// garbage credentials.
func TestACostlessQuotaChargeLeavesNoKey(t *testing.T) {
	skipNearDayEnd(t, time.Minute)
	r, s, now := storeOnRedis(t)
	if res := decide(t, s, quotaItem("i/zero", quota.Day, 5, 0)); !res.OK {
		t.Fatalf("a quota item of cost 0: %+v, want admitted", res)
	}
	if n := r.Do(t, "EXISTS", s.QuotaKey("i/zero", quota.Day, now)); n != "0" {
		t.Fatal("a quota item of cost 0 created its key")
	}
	ifCounted := redisstore.Item{Kind: redisstore.QuotaIfCounted, Key: "i/zero", Period: quota.Day, Limit: 5, N: 1}
	if res := decide(t, s, ifCounted); !res.OK || len(res.After) != 1 || res.After[0] != -1 {
		t.Fatalf("QuotaIfCounted after a cost-0 charge: %+v, want it left alone (After -1)", res)
	}
}

// A refund gives tokens back up to the burst, never past it: a bucket
// that refilled meanwhile would otherwise hold more than its burst and
// admit a larger burst than configured.
func TestARefundNeverFillsABucketPastItsBurst(t *testing.T) {
	r, s, _ := storeOnRedis(t)
	item := bucket("t/refund", 1, 10, 5)
	if res := decide(t, s, item); !res.OK {
		t.Fatalf("charging: %+v", res)
	}
	idle(t, r, s, "t/refund", time.Minute) // full again
	if err := s.Refund(t.Context(), []redisstore.Item{item}); err != nil {
		t.Fatal(err)
	}
	if tokens, _, ok, err := s.Tokens(t.Context(), "t/refund"); err != nil || !ok || tokens > 10 {
		t.Fatalf("after a refund to a full bucket: %v tokens (%v, %v), want at most the burst of 10", tokens, ok, err)
	}
}

// A refund larger than the period's count (the period rolled over since
// the charge, or another instance refunded too) takes the count to zero,
// not below: a negative count would hand out extra calls in the period.
func TestQuotaRefundNeverTakesACountBelowZero(t *testing.T) {
	skipNearDayEnd(t, time.Minute)
	r, s, now := storeOnRedis(t)
	key := s.QuotaKey("i/under", quota.Day, now)
	r.Do(t, "SET", key, "2")
	if err := s.Refund(t.Context(), []redisstore.Item{quotaItem("i/under", quota.Day, 10, 5)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Used(t.Context(), "i/under", quota.Day, now); err != nil || n != 0 {
		t.Fatalf("a refund of 5 from a count of 2 left %d (%v), want 0", n, err)
	}
}

// A Store given no Timeout bounds each call by DefaultTimeout, not by
// none: a zero timeout would let a hung Redis hold every request.
func TestNoTimeoutMeansTheDefault(t *testing.T) {
	s, err := redisstore.New(redisstore.Config{URL: "redis://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if got := s.Timeout(); got != redisstore.DefaultTimeout {
		t.Fatalf("Timeout() = %v with none configured, want DefaultTimeout %v", got, redisstore.DefaultTimeout)
	}
}

// dropFirstScriptReply forwards TCP connections to target, but the reply
// to the first EVALSHA is not relayed: once it comes back from Redis (the
// script ran), the client's connection is closed instead, as a connection
// lost with its answer would be. It returns its address.
func dropFirstScriptReply(t *testing.T, target string) string {
	t.Helper()
	var dropped atomic.Bool
	return proxy(t, target, func(c, u net.Conn) {
		var pending atomic.Bool // an EVALSHA went up: drop its reply
		go func() {
			buf, tail := make([]byte, 64<<10), []byte(nil)
			for {
				n, err := c.Read(buf)
				if err != nil {
					_ = u.Close()
					return
				}
				window := append(tail, buf[:n]...)
				if !dropped.Load() && bytes.Contains(bytes.ToLower(window), []byte("evalsha")) {
					pending.Store(true)
				}
				tail = append([]byte(nil), window[max(len(window)-len("evalsha"), 0):]...)
				if _, err := u.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := u.Read(buf)
				if err != nil {
					_ = c.Close()
					return
				}
				if pending.Load() && dropped.CompareAndSwap(false, true) {
					_ = c.Close()
					_ = u.Close()
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	})
}

// A decision whose reply is lost (the connection drops after Redis ran
// the script) is an error, not retried: go-redis would run the script
// again on a new connection and charge the request twice.
func TestADecisionWhoseReplyIsLostIsNotRunAgain(t *testing.T) {
	r := harness.StartRedis(t)
	direct := newStore(t, r, "z")
	if err := direct.Preload(t.Context()); err != nil { // the decision is one EVALSHA
		t.Fatal(err)
	}
	s, err := redisstore.New(redisstore.Config{URL: "redis://" + dropFirstScriptReply(t, r.Addr), Zone: "z", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if res, err := s.Decide(t.Context(), []redisstore.Item{bucket("t/lost", 1.0/3600, 5, 1)}); err == nil {
		t.Fatalf("a decision whose reply was lost: %+v, want an error", res)
	}
	if tokens, _, ok, err := direct.Tokens(t.Context(), "t/lost"); err != nil || !ok || tokens < 3.5 {
		t.Fatalf("the bucket holds %v tokens (%v, %v), want 4: charged once, by the run whose reply was lost", tokens, ok, err)
	}
}

// A push whose deltas are all zero has nothing to add: it writes no key
// (a quota key holding 0 would make a QuotaIfCounted for it charged) and
// no marker, and reports nothing added.
func TestAPushOfZeroDeltasWritesNothing(t *testing.T) {
	r, s, now := storeOnRedis(t)
	deltas := []redisstore.Delta{{Key: "i/x", Period: quota.Day, Start: quota.Day.Start(now), N: 0}}
	if added, err := s.Push(t.Context(), "p", deltas); err != nil || added {
		t.Fatalf("Push of a zero delta = %v, %v; want false, nil", added, err)
	}
	if n := r.Do(t, "DBSIZE"); n != "0" {
		t.Fatalf("a push of a zero delta left %s keys (the quota key or the push's marker), want none", n)
	}
}

// An empty push reports nothing added and leaves no marker: there is no
// round trip to make, and a 24h marker per empty push would pile up in
// Redis.
func TestAnEmptyPushWritesNothing(t *testing.T) {
	r, s, _ := storeOnRedis(t)
	if added, err := s.Push(t.Context(), "e", nil); err != nil || added {
		t.Fatalf("an empty Push = %v, %v; want false, nil", added, err)
	}
	if n := r.Do(t, "DBSIZE"); n != "0" {
		t.Fatalf("an empty push left %s keys, want none (no marker)", n)
	}
}

// A refusal remembered under one quota limit does not answer a call
// under another: once an operator raises the limit, the next call is
// decided in Redis and admitted, instead of being refused from memory
// for up to RecheckAfter.
func TestARaisedQuotaLimitIsNotAnsweredFromMemory(t *testing.T) {
	skipNearDayEnd(t, 2*time.Minute)
	_, s, _ := storeOnRedis(t)
	tight := quotaItem("i/raised", quota.Day, 1, 1)
	if res := decide(t, s, tight); !res.OK {
		t.Fatalf("first call %+v, want admitted", res)
	}
	if res := decide(t, s, tight); res.OK || res.Local {
		t.Fatalf("second call %+v, want a refusal by Redis", res)
	}
	if res := decide(t, s, tight); !res.Local {
		t.Fatalf("third call %+v, want the refusal answered from memory", res)
	}
	if res := decide(t, s, quotaItem("i/raised", quota.Day, 5, 1)); !res.OK || res.Local {
		t.Fatalf("under a limit raised to 5: %+v, want admitted by Redis", res)
	}
}

// A local refusal never reports the refused bucket holding the call's
// cost: it is refused because it does not, and RateLimit headers built
// from Held must not show enough tokens while refusing. Here the remembered
// entry refills at the new rate (100/s) while Redis credits the old
// one (1/s) until a call is admitted: 200ms later the local reckoning
// alone would read a full bucket.
func TestALocalRefusalNeverHoldsTheCallsCost(t *testing.T) {
	r := harness.StartRedis(t)
	s, now := clockedStore(t, r)
	ts := redisMicros(t, r)
	setBucket(t, r, s, "t/held", 0, ts, 1, 10)
	it := bucket("t/held", 100, 10, 10)
	it.Since = time.UnixMicro(ts - time.Second.Microseconds())
	if res := decide(t, s, it); res.OK || res.Local || res.Wait < 5*time.Second {
		t.Fatalf("first call %+v, want a refusal by Redis for about 10s (the old 1/s)", res)
	}
	*now = now.Add(200 * time.Millisecond)
	res := decide(t, s, it)
	if !res.Local || res.Held >= 10 {
		t.Fatalf("200ms later %+v, want a local refusal holding less than the cost of 10", res)
	}
}

// When two remembered keys of a call wait equally long, the local
// refusal names the first of them, as Redis does: the refused item (and
// what a caller is told about it) does not change between the call Redis
// refused and the calls refused from memory after it.
func TestALocalRefusalOnEqualWaitsNamesTheFirstItem(t *testing.T) {
	_, s, _ := storeOnRedis(t)
	items := []redisstore.Item{bucket("t/one", 1.0/60, 1, 1), bucket("t/two", 1.0/60, 1, 1)}
	if res := decide(t, s, items...); !res.OK {
		t.Fatalf("draining call %+v, want admitted", res)
	}
	if res := decide(t, s, items...); res.OK || res.Local || res.Refused != 0 {
		t.Fatalf("second call %+v, want Redis to refuse item 0", res)
	}
	if res := decide(t, s, items...); !res.Local || res.Refused != 0 {
		t.Fatalf("third call %+v, want a local refusal naming item 0, as Redis did", res)
	}
}

// A short-circuit map full of refusals whose wait has passed makes room
// for a new refusal by sweeping them: else new refusals would not be
// remembered until a periodic Sweep, and a flood of refused calls would
// all go to Redis.
func TestAFullMapOfExpiredRefusalsStillRemembersANewOne(t *testing.T) {
	r := harness.StartRedis(t)
	s, now := clockedStore(t, r)
	item := bucket("t/flood", 1.0/60, 1, 1)
	if res := decide(t, s, item); !res.OK {
		t.Fatalf("draining call %+v, want admitted", res)
	}
	redisstore.FillOverWithExpired(s, *now)
	if res := decide(t, s, item); res.OK || res.Local {
		t.Fatalf("second call %+v, want a refusal by Redis", res)
	}
	if res := decide(t, s, item); !res.Local {
		t.Fatalf("third call %+v, want the refusal remembered and answered locally", res)
	}
	if n := s.Remembered(); n != 1 {
		t.Fatalf("Remembered() = %d, want the one live refusal (the expired ones swept)", n)
	}
}

// Sweep forgets a remembered quota refusal once RecheckAfter has passed,
// though its period has not ended: the entry no longer answers anything,
// and kept until the period ends it would hold memory for up to a month.
func TestSweepForgetsAQuotaRefusalAfterRecheckAfter(t *testing.T) {
	skipNearDayEnd(t, 3*time.Minute)
	r := harness.StartRedis(t)
	s, now := clockedStore(t, r)
	item := quotaItem("i/swept", quota.Day, 1, 1)
	if res := decide(t, s, item); !res.OK {
		t.Fatalf("first call %+v, want admitted", res)
	}
	if res := decide(t, s, item); res.OK || res.Local {
		t.Fatalf("second call %+v, want a refusal by Redis", res)
	}
	if n := s.Remembered(); n != 1 {
		t.Fatalf("Remembered() = %d after the refusal, want 1", n)
	}
	*now = now.Add(redisstore.RecheckAfter + time.Second)
	s.Sweep(*now)
	if n := s.Remembered(); n != 0 {
		t.Fatalf("Remembered() = %d after RecheckAfter and a sweep, want 0", n)
	}
}

// A bucket holds at most its burst however long it sat idle: an hour at
// 1/s does not let a burst-5 bucket admit thousands of calls at once.
func TestABucketIsCappedAtItsBurst(t *testing.T) {
	r, s, _ := storeOnRedis(t)
	item := bucket("t/cap", 1, 5, 1)
	if res := decide(t, s, item); !res.OK {
		t.Fatalf("first call %+v, want admitted", res)
	}
	idle(t, r, s, "t/cap", time.Hour)
	if res := decide(t, s, item); !res.OK || len(res.After) != 1 || res.After[0] < 4 || res.After[0] > 4.01 {
		t.Fatalf("after an hour idle: %+v, want 4 of the burst of 5 left", res)
	}
}

// A quota call that takes the count exactly to the limit fits: OverWait
// is 0 for it, and the period's rest only for a call past the limit. A
// wait at the boundary would remember a key that still has a call left
// as over its limit.
func TestOverWaitAdmitsACallReachingTheQuotaExactly(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	it := quotaItem("i/edge", quota.Day, 5, 1)
	if w := redisstore.OverWait(&it, 4, now); w != 0 {
		t.Fatalf("OverWait at 4 of 5 for a call of 1 = %v, want 0: it fits exactly", w)
	}
	if w, want := redisstore.OverWait(&it, 5, now), 12*time.Hour; w != want {
		t.Fatalf("OverWait at 5 of 5 for a call of 1 = %v, want %v (until the day ends)", w, want)
	}
}
