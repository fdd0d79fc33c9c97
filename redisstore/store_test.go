package redisstore_test

import (
	"context"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

func newStore(t *testing.T, r *harness.Redis, zone string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisstore.Config{URL: r.URL, Zone: zone, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// clockedStore opens a store of zone "z" on r whose local clock reads
// *now, for the test to move.
func clockedStore(t *testing.T, r *harness.Redis) (*redisstore.Store, *time.Time) {
	t.Helper()
	now := new(time.Time)
	*now = time.Now()
	s, err := redisstore.New(redisstore.Config{URL: r.URL, Zone: "z", Timeout: time.Second, Clock: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, now
}

// storeOnRedis starts a Redis, opens a store of zone "z" on it, and
// returns them with Redis's time.
func storeOnRedis(t *testing.T) (*harness.Redis, *redisstore.Store, time.Time) {
	t.Helper()
	r := harness.StartRedis(t)
	return r, newStore(t, r, "z"), serverTime(t, r)
}

func bucket(key string, rate float64, burst, n int64) redisstore.Item {
	return redisstore.Item{Kind: redisstore.Bucket, Key: key, Rate: rate, Burst: burst, N: n}
}

func quotaItem(key string, p quota.Period, limit, n int64) redisstore.Item {
	return redisstore.Item{Kind: redisstore.Quota, Key: key, Period: p, Limit: limit, N: n}
}

func decide(t *testing.T, s *redisstore.Store, items ...redisstore.Item) redisstore.Result {
	t.Helper()
	r, err := s.Decide(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serverTime is Redis's own clock.
func serverTime(t *testing.T, r *harness.Redis) time.Time {
	t.Helper()
	// TIME is an array reply; the inline helper reads only its first line,
	// so read the unix seconds through a script instead.
	s := r.Do(t, "EVAL", "return redis.call('TIME')[1]", "0")
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("TIME: %q", s)
	}
	return time.Unix(sec, 0)
}

func TestDecideAllOrNothing(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	now := serverTime(t, r)
	tests := []struct {
		name  string
		items []redisstore.Item
	}{
		{"a refusing global bucket leaves the tenant bucket and the quota untouched", []redisstore.Item{
			bucket("t/a", 1, 10, 1), quotaItem("i/a", quota.Day, 100, 1), bucket("global", 1, 1, 2),
		}},
		{"a refusing quota leaves both buckets untouched", []redisstore.Item{
			bucket("t/b", 1, 10, 1), quotaItem("i/b", quota.Day, 0, 1), bucket("global2", 1, 10, 1),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := decide(t, s, tc.items...)
			if res.OK || res.Refused != len(tc.items)-1 && tc.items[res.Refused].Kind == redisstore.Bucket && res.Refused == 0 {
				t.Fatalf("result %+v, want a refusal", res)
			}
			for i, it := range tc.items {
				if i == res.Refused {
					continue
				}
				if it.Kind == redisstore.Bucket {
					if _, _, ok, _ := s.Tokens(context.Background(), it.Key); ok {
						t.Fatalf("bucket %s written by a refused decision", it.Key)
					}
				} else if n, _ := s.Used(context.Background(), it.Key, it.Period, now); n != 0 {
					t.Fatalf("quota %s counted %d by a refused decision", it.Key, n)
				}
			}
			if got := r.Do(t, "DBSIZE"); got != "0" {
				t.Fatalf("DBSIZE %s after refused decisions, want 0", got)
			}
		})
	}
}

func TestDecideBucketsAndQuotas(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	ctx := context.Background()
	now := serverTime(t, r)
	// A 1/h bucket of burst 3 admits exactly 3, then refuses with a wait
	// of about an hour for one token.
	for i := range 3 {
		res := decide(t, s, bucket("t/x", 1.0/3600, 3, 1))
		if !res.OK {
			t.Fatalf("call %d refused: %+v", i, res)
		}
		if left := float64(2 - i); len(res.After) != 1 || res.After[0] < left || res.After[0] > left+0.01 {
			t.Fatalf("call %d: After %v, want about %v tokens left", i, res.After, left)
		}
	}
	res := decide(t, s, bucket("t/x", 1.0/3600, 3, 1))
	if res.OK || res.Refused != 0 || res.Wait < 59*time.Minute || res.Wait > time.Hour+time.Second {
		t.Fatalf("4th call: %+v, want a refusal with a wait of about 1h", res)
	}
	if len(res.Now) != 1 || res.Now[0] > 0.01 {
		t.Fatalf("4th call: Now %v, want about 0 tokens", res.Now)
	}
	// The bucket is readable as Redis stored it at the last charge.
	if tokens, at, ok, err := s.Tokens(ctx, "t/x"); err != nil || !ok || tokens > 0.01 || at.Sub(now).Abs() > 5*time.Second {
		t.Fatalf("Tokens(t/x) = %v at %v, %v, %v; want about 0 at %v", tokens, at, ok, err, now)
	}
	if _, _, ok, err := s.Tokens(ctx, "t/none"); ok || err != nil {
		t.Fatalf("Tokens of an absent bucket: %v, %v", ok, err)
	}
	// A cost above the burst never fits; its wait is until a call of the
	// burst's size does: none to speak of for a full bucket.
	if res := decide(t, s, bucket("t/y", 1, 3, 4)); res.OK || res.Wait <= 0 || res.Wait > time.Millisecond {
		t.Fatalf("cost above burst: %+v, want a refusal waiting at most 1ms (the bucket is full)", res)
	}
	// Quotas count exactly, per period, with several items of the same
	// key adding up within one decision.
	for i := range 5 {
		res := decide(t, s, quotaItem("i/q", quota.Day, 10, 2), quotaItem("i/q", quota.Month, 100, 2))
		if !res.OK {
			t.Fatalf("quota call %d refused: %+v", i, res)
		}
		if n := float64(2 * (i + 1)); !slices.Equal(res.After, []float64{n, n}) {
			t.Fatalf("quota call %d: After %v, want day and month counts %v", i, res.After, n)
		}
	}
	res = decide(t, s, bucket("t/w", 1, 5, 1), quotaItem("i/q", quota.Day, 10, 1), quotaItem("i/q", quota.Month, 100, 1))
	if res.OK || res.Refused != 1 {
		t.Fatalf("11th count of a 10/day quota: %+v, want item 1 refused", res)
	}
	// A refusal says what every item holds, uncharged: the bucket before
	// it is full, and the quota after the refused one is still read.
	if !slices.Equal(res.Now, []float64{5, 10, 10}) {
		t.Fatalf("refusal: Now %v, want [5 10 10]", res.Now)
	}
	if _, _, ok, _ := s.Tokens(ctx, "t/w"); ok {
		t.Fatal("a refused decision charged the bucket before the refused item")
	}
	if want := quota.Day.Next(now).Sub(now); res.Wait < want-2*time.Second || res.Wait > want+2*time.Second {
		t.Fatalf("quota wait %v, want about %v (the end of Redis's UTC day)", res.Wait, want)
	}
	if n, _ := s.Used(ctx, "i/q", quota.Day, now); n != 10 {
		t.Fatalf("day count %d, want 10", n)
	}
	if n, _ := s.Used(ctx, "i/q", quota.Month, now); n != 10 {
		t.Fatalf("month count %d, want 10", n)
	}
	// The keys are named from Redis server time and expire after their
	// period; buckets expire once refilled.
	dayKey := s.QuotaKey("i/q", quota.Day, now)
	if !strings.HasSuffix(dayKey, ":d:"+now.UTC().Format(time.DateOnly)) {
		t.Fatalf("day key %s", dayKey)
	}
	ttl, _ := strconv.Atoi(r.Do(t, "TTL", dayKey))
	if want := int(quota.Day.Next(now).Sub(now).Seconds()); ttl < want || ttl > want+120 {
		t.Fatalf("TTL of %s is %d, want about %d (+ margin)", dayKey, ttl, want)
	}
	monthKey := s.QuotaKey("i/q", quota.Month, now)
	ttl, _ = strconv.Atoi(r.Do(t, "TTL", monthKey))
	if want := int(quota.Month.Next(now).Sub(now).Seconds()); ttl < want || ttl > want+120 {
		t.Fatalf("TTL of %s is %d, want about %d (+ margin)", monthKey, ttl, want)
	}
	ttl, _ = strconv.Atoi(r.Do(t, "TTL", s.BucketKey("t/x")))
	// A day, more than the 3h full refill: a rate made slower live must
	// still find the drained bucket.
	if ttl < 24*3600 || ttl > 24*3600+120 {
		t.Fatalf("bucket TTL %d, want a day + margin", ttl)
	}
}

func TestKeysShareOneHashTagPerZone(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "myzone")
	if res := decide(t, s, bucket("t/k", 1, 5, 1), quotaItem("t/tool{x}/k", quota.Day, 5, 1), bucket("global", 10, 10, 1)); !res.OK {
		t.Fatalf("refused: %+v", res)
	}
	now := serverTime(t, r)
	slot := keySlot("{myzone}")
	for _, k := range []string{s.BucketKey("t/k"), s.BucketKey("global"), s.QuotaKey("t/tool{x}/k", quota.Day, now)} {
		if !strings.HasPrefix(k, "mcprl:{myzone}:") {
			t.Fatalf("key %s lacks the zone's hash tag", k)
		}
		if got := keySlot(k); got != slot {
			t.Fatalf("key %s in slot %d, the zone's is %d", k, got, slot)
		}
		if r.Do(t, "EXISTS", k) != "1" {
			t.Fatalf("key %s not written", k)
		}
	}
}

// keySlot is Redis Cluster's slot of key: CRC16 (XMODEM) of its hash tag
// (the part between the first { and the next }, when not empty) mod 16384.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

func TestShortCircuitAnswersKnownRefusalsLocally(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	if res := decide(t, s, bucket("t/f", 1.0/60, 1, 1)); !res.OK {
		t.Fatal("first call refused")
	}
	first := decide(t, s, bucket("t/f", 1.0/60, 1, 1))
	if first.OK || first.Local {
		t.Fatalf("second call %+v, want a refusal from Redis", first)
	}
	before := r.Calls(t)
	// Remembered until the Retry-After the first refusal gave, whole
	// seconds from before it was asked: a flood call may be told a wait
	// a little past the first's exact one, never a later Retry-After.
	retryAfter := first.Wait.Truncate(time.Second)
	if retryAfter < first.Wait {
		retryAfter += time.Second
	}
	for range 200 {
		res := decide(t, s, bucket("t/f", 1.0/60, 1, 1))
		if res.OK || !res.Local || res.Wait <= 0 || res.Wait > retryAfter {
			t.Fatalf("flood call %+v, want a local refusal within the first's Retry-After %v", res, retryAfter)
		}
		// What the bucket holds, as Redis said, refilled since: about 0
		// of the one token a minute.
		if res.Held < first.Now[0] || res.Held > first.Now[0]+0.01 {
			t.Fatalf("flood call holds %v, want about %v as Redis said", res.Held, first.Now)
		}
	}
	if n := harness.CallsBetween(before, r.Calls(t)); n != 0 {
		t.Fatalf("a flood of 200 known refusals cost %d Redis commands, want 0", n)
	}
	// Another key, or other limits for the same key (a raised limit), go to Redis.
	if res := decide(t, s, bucket("t/g", 1.0/60, 1, 1)); !res.OK || res.Local {
		t.Fatalf("another key: %+v", res)
	}
	before = r.Calls(t)
	if res := decide(t, s, bucket("t/f", 1.0/60, 5, 1)); res.Local {
		t.Fatalf("a raised burst: %+v, want a decision by Redis", res)
	}
	if n := harness.CallsBetween(before, r.Calls(t)); n < 1 {
		t.Fatal("a raised burst was answered without Redis")
	}
}

func TestShortCircuitQuotaHoldsWhatRedisCounted(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	for range 3 {
		if res := decide(t, s, quotaItem("i/h", quota.Day, 3, 1)); !res.OK {
			t.Fatalf("call refused: %+v", res)
		}
	}
	if res := decide(t, s, quotaItem("i/h", quota.Day, 3, 1)); res.OK || res.Local || !slices.Equal(res.Now, []float64{3}) {
		t.Fatalf("4th call %+v, want a refusal by Redis at count 3", res)
	}
	if res := decide(t, s, quotaItem("i/h", quota.Day, 3, 1)); !res.Local || res.Held != 3 {
		t.Fatalf("5th call %+v, want a local refusal holding 3", res)
	}
}

// Ask is Decide without the local answer: a refusal Decide would answer
// from memory goes to Redis, and reports what every item holds there.
func TestAskDecidesKnownRefusalsInRedis(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	items := []redisstore.Item{bucket("t/a", 1.0/60, 1, 1), quotaItem("i/a", quota.Day, 5, 1)}
	if res := decide(t, s, items...); !res.OK {
		t.Fatalf("first call %+v", res)
	}
	if res := decide(t, s, items...); res.OK || res.Local {
		t.Fatalf("second call %+v, want a refusal from Redis", res)
	}
	if res := decide(t, s, items...); !res.Local {
		t.Fatalf("third call %+v, want Decide to answer it locally", res)
	}
	before := r.Calls(t)
	res, err := s.Ask(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Local || res.Refused != 0 || len(res.Now) != 2 || res.Now[1] != 1 {
		t.Fatalf("Ask %+v, want a refusal by Redis of the bucket with the quota's count 1", res)
	}
	if n := harness.CallsBetween(before, r.Calls(t)); n < 1 {
		t.Fatal("Ask answered without Redis")
	}
}

// Peek decides as Ask does but charges nothing: not when every item fits,
// and not when one does not.
func TestPeekChargesNothing(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	items := []redisstore.Item{bucket("t/p", 1.0/60, 2, 1), quotaItem("i/p", quota.Day, 1, 1)}
	for range 3 {
		res, err := s.Peek(t.Context(), items)
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK || !slices.Equal(res.Now, []float64{2, 0}) {
			t.Fatalf("Peek %+v, want every item fitting, untouched", res)
		}
	}
	if res := decide(t, s, items...); !res.OK {
		t.Fatalf("Decide after the peeks %+v", res)
	}
	res, err := s.Peek(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Refused != 1 || res.Wait <= 0 || len(res.Now) != 2 || res.Now[1] != 1 || res.Now[0] < 1 || res.Now[0] > 1.01 {
		t.Fatalf("Peek %+v, want the quota refused with the bucket at 1 token", res)
	}
	if res := decide(t, s, bucket("t/p", 1.0/60, 2, 1)); !res.OK || res.After[0] >= 0.1 {
		t.Fatalf("the bucket after a refused peek: %+v, want its last token there", res)
	}
}

// A QuotaIfCounted item is decided only where Redis holds a count for it:
// without one it is neither charged nor refused, whatever it asks, and
// leaves no key; with one it is a Quota.
func TestQuotaIfCountedIsDecidedOnlyWhereCounted(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	ifCounted := func(n int64) redisstore.Item {
		return redisstore.Item{Kind: redisstore.QuotaIfCounted, Key: "i/c", Period: quota.Day, Limit: 2, N: n}
	}
	for range 3 {
		res := decide(t, s, ifCounted(5), bucket("t/c", 100, 100, 1))
		if !res.OK || res.After[0] != -1 {
			t.Fatalf("uncounted item: %+v, want admitted, not charged", res)
		}
	}
	if n, err := s.Used(t.Context(), "i/c", quota.Day, quota.Day.Start(time.Now())); err != nil || n != 0 {
		t.Fatalf("the uncounted item's count: %d (%v), want none", n, err)
	}
	if res := decide(t, s, quotaItem("i/c", quota.Day, 2, 1)); !res.OK {
		t.Fatalf("counting it: %+v", res)
	}
	if res := decide(t, s, ifCounted(1)); !res.OK || res.After[0] != 2 {
		t.Fatalf("counted item: %+v, want charged to 2", res)
	}
	res := decide(t, s, ifCounted(1))
	if res.OK || res.Refused != 0 || res.Now[0] != 2 || res.Wait <= 0 {
		t.Fatalf("counted item over its limit: %+v, want refused at 2", res)
	}
}

func TestPushAndFingerprintKey(t *testing.T) {
	r, s, now := storeOnRedis(t)
	ctx, day := context.Background(), quota.Day.Start(now)
	deltas := []redisstore.Delta{{Key: "i/p", Period: quota.Day, Start: day, N: 7}, {Key: "i/p", Period: quota.Day, Start: day, N: -2}}
	if added, err := s.Push(ctx, "push-1", deltas); err != nil || !added {
		t.Fatalf("Push = %v, %v; want the counts added", added, err)
	}
	if n, _ := s.Used(ctx, "i/p", quota.Day, now); n != 5 {
		t.Fatalf("pushed count %d, want 5", n)
	}
	// The same push again (a retry of one whose answer was lost) adds
	// nothing; another push adds its counts.
	if added, err := s.Push(ctx, "push-1", deltas); err != nil || added {
		t.Fatalf("Push again = %v, %v; want nothing added", added, err)
	}
	if n, _ := s.Used(ctx, "i/p", quota.Day, now); n != 5 {
		t.Fatalf("count %d after the same push twice, want 5", n)
	}
	if added, err := s.Push(ctx, "push-2", deltas[:1]); err != nil || !added {
		t.Fatalf("another Push = %v, %v; want the counts added", added, err)
	}
	if n, _ := s.Used(ctx, "i/p", quota.Day, now); n != 12 {
		t.Fatalf("count %d after a second push of 7, want 12", n)
	}
	ttl, _ := strconv.Atoi(r.Do(t, "TTL", "mcprl:{z}:push:push-1"))
	if want := int(redisstore.PushMarkerTTL / time.Second); ttl <= want-60 || ttl > want {
		t.Fatalf("the push's marker lives %d s, want about %d", ttl, want)
	}
	if ttl, _ := strconv.Atoi(r.Do(t, "TTL", s.QuotaKey("i/p", quota.Day, day))); ttl <= 0 || ttl > 86400+120 {
		t.Fatalf("a pushed count's TTL is %d s, want until the day ends (+ margin)", ttl)
	}
	if _, err := s.Push(ctx, "", deltas); err == nil {
		t.Fatal("a push without an id was sent")
	}
	// The decision sees the pushed counts.
	if res := decide(t, s, quotaItem("i/p", quota.Day, 5, 1)); res.OK {
		t.Fatal("a quota filled by pushed counts admitted one more")
	}
	k1, _, err := s.FingerprintKey(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := newStore(t, r, "z")
	k2, _, err := other.FingerprintKey(ctx, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if string(k1) != string(k2) || len(k1) != 32 {
		t.Fatal("two instances got different fingerprint keys")
	}
	// A key of another length in Redis (written by hand, or truncated) is
	// not used to fingerprint: it is replaced, and every instance then
	// gets the replacement.
	r.Do(t, "SET", "mcprl:{z2}:fpkey", "short")
	k3, _, err := newStore(t, r, "z2").FingerprintKey(ctx, nil)
	if err != nil || len(k3) != 32 || r.Do(t, "GET", "mcprl:{z2}:fpkey") != string(k3) {
		t.Fatalf("after a 5-byte key in redis: %x, %v; want a new 32-byte key stored there", k3, err)
	}
	if k4, _, err := newStore(t, r, "z2").FingerprintKey(ctx, make([]byte, 32)); err != nil || string(k4) != string(k3) {
		t.Fatalf("another instance got %x, %v; want the replacement %x", k4, err, k3)
	}
}

// The zone's epoch, read with the fingerprint key, stays the same for
// every instance until Redis loses its data, and is then a new one; it
// never expires.
func TestTheEpochChangesWhenRedisLosesItsData(t *testing.T) {
	r := harness.StartRedis(t)
	ctx := context.Background()
	epoch := func(s *redisstore.Store) string {
		t.Helper()
		_, e, err := s.FingerprintKey(ctx, nil)
		if err != nil || e == "" {
			t.Fatalf("epoch %q, %v", e, err)
		}
		return e
	}
	s := newStore(t, r, "z")
	first := epoch(s)
	if again, other := epoch(s), epoch(newStore(t, r, "z")); again != first || other != first {
		t.Fatalf("epochs %q and %q after %q, want it unchanged for every instance", again, other, first)
	}
	if other := epoch(newStore(t, r, "z2")); other == first {
		t.Fatal("another zone has the same epoch")
	}
	if ttl := r.Do(t, "TTL", "mcprl:{z}:epoch"); ttl != "-1" {
		t.Fatalf("the epoch's TTL is %s, want none", ttl)
	}
	r.Do(t, "FLUSHALL")
	after := epoch(s)
	if after == first {
		t.Fatal("the epoch is unchanged after FLUSHALL")
	}
	if other := epoch(newStore(t, r, "z")); other != after {
		t.Fatalf("another instance reads %q after the loss, want %q", other, after)
	}
}

func TestFaultsAreErrorsWithinTheTimeout(t *testing.T) {
	r := harness.StartRedis(t)
	s, err := redisstore.New(redisstore.Config{URL: r.URL, Zone: "z", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res := decide(t, s, bucket("t/a", 1, 5, 1)); !res.OK {
		t.Fatal("refused")
	}
	// A slow server: the call gives up at its timeout.
	go func() { _, _ = r.Command("DEBUG", "SLEEP", "0.5") }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if _, err := s.Decide(context.Background(), []redisstore.Item{bucket("t/a", 1, 5, 1)}); err == nil {
		t.Fatal("a decision against a sleeping server succeeded")
	}
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Fatalf("a slow server held the decision %v, timeout 50ms", el)
	}
	// A dead server: an error, quickly.
	r.Kill()
	start = time.Now()
	if _, err := s.Decide(context.Background(), []redisstore.Item{bucket("t/a", 1, 5, 1)}); err == nil {
		t.Fatal("a decision against a dead server succeeded")
	}
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Fatalf("a dead server held the decision %v", el)
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Fatal("ping of a dead server succeeded")
	}
	// It comes back on the same port: the client reconnects by itself.
	r.Start(t)
	harness.Eventually(t, 5*time.Second, "the store to reconnect", func() bool {
		return s.Ping(context.Background()) == nil
	})
	if _, err := redisstore.New(redisstore.Config{URL: "http://nope"}); err == nil {
		t.Fatal("a non-redis URL was accepted")
	}
	if _, err := redisstore.New(redisstore.Config{URL: "rediss://:secret@127.0.0.1:1/3"}); err != nil {
		t.Fatalf("rediss URL with password and DB: %v", err)
	}
}

// Redis reports the first item that does not fit; the short-circuit
// remembers every item its levels show over the limit, so a local refusal
// names the one that stays over it longest: an exhausted quota behind an
// empty bucket.
func TestShortCircuitNamesTheLongestWait(t *testing.T) {
	if now := time.Now(); quota.Day.Next(now).Sub(now) < 2*time.Minute {
		t.Skip("the day's quota resets within the test: its wait would not be the longest")
	}
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	items := []redisstore.Item{bucket("t/l", 1, 1, 1), quotaItem("i/l", quota.Day, 1, 1)}
	if res := decide(t, s, items...); !res.OK {
		t.Fatalf("first call refused: %+v", res)
	}
	if res := decide(t, s, items...); res.OK || res.Local || res.Refused != 0 {
		t.Fatalf("second call %+v, want Redis to refuse the bucket first", res)
	}
	res := decide(t, s, items...)
	if !res.Local || res.Refused != 1 || res.Wait < time.Minute {
		t.Fatalf("third call %+v, want a local refusal naming the quota until its reset", res)
	}
}

// A refund may bring a remembered key back under its limit: the refusals
// remembered for the refunded keys are forgotten.
func TestRefundForgetsRememberedRefusals(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	held := []redisstore.Item{quotaItem("i/r", quota.Day, 2, 2)}
	if res := decide(t, s, held...); !res.OK {
		t.Fatalf("first call refused: %+v", res)
	}
	if res := decide(t, s, quotaItem("i/r", quota.Day, 2, 1)); res.OK || res.Local {
		t.Fatalf("second call %+v, want a refusal by Redis", res)
	}
	if err := s.Refund(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	if res := decide(t, s, quotaItem("i/r", quota.Day, 2, 1)); !res.OK {
		t.Fatalf("after the refund %+v, want admitted: the quota is back to 0 of 2", res)
	}
}

// A remembered bucket refusal answers a costlier call locally with the
// wait for that call's own cost.
func TestShortCircuitWaitsForTheCallsOwnCost(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	if res := decide(t, s, bucket("t/c", 1, 5, 5)); !res.OK {
		t.Fatalf("draining call refused: %+v", res)
	}
	if res := decide(t, s, bucket("t/c", 1, 5, 1)); res.OK || res.Local {
		t.Fatalf("call of cost 1: %+v, want a refusal by Redis", res)
	}
	res := decide(t, s, bucket("t/c", 1, 5, 3))
	if !res.Local || res.Wait < 2900*time.Millisecond {
		t.Fatalf("call of cost 3: %+v, want a local refusal waiting about 3s", res)
	}
	// Above the burst it never fits: the wait is until the burst's size does.
	res = decide(t, s, bucket("t/c", 1, 5, 9))
	if !res.Local || res.Wait < 4900*time.Millisecond || res.Wait > 5100*time.Millisecond {
		t.Fatalf("call of cost 9 against burst 5: %+v, want a local refusal waiting about 5s", res)
	}
}

// idle moves the last charge of bucket key d into the past, as if it had
// sat unused since.
func idle(t *testing.T, r *harness.Redis, s *redisstore.Store, key string, d time.Duration) {
	t.Helper()
	ts, err := strconv.ParseFloat(r.Do(t, "HGET", s.BucketKey(key), "ts"), 64)
	if err != nil {
		t.Fatal(err)
	}
	r.Do(t, "HSET", s.BucketKey(key), "ts", strconv.FormatFloat(ts-float64(d.Microseconds()), 'f', -1, 64))
}

// A limit change credits the idle time before it at the limits the
// bucket was last charged under and the time after at the new ones: a
// drained 1/h tenant raised to 10/m does not come back with 55s of 10/m.
func TestLimitChangeCreditsIdleTimeAtTheOldLimit(t *testing.T) {
	r, s, now := storeOnRedis(t)
	old, raised := bucket("", 1.0/3600, 5, 5), bucket("", 10.0/60, 20, 1)
	at := func(key string, it redisstore.Item, since time.Time) redisstore.Item {
		it.Key, it.Since = key, since
		return it
	}
	for _, key := range []string{"t/changed", "t/moved", "t/unknown", "t/split", "t/full", "t/ahead", "t/first"} {
		if res := decide(t, s, at(key, old, time.Time{})); !res.OK {
			t.Fatalf("%s: draining refused: %+v", key, res)
		}
	}
	idle(t, r, s, "t/changed", 55*time.Second)
	if res := decide(t, s, at("t/changed", raised, now.Add(time.Second))); res.OK || res.Now[0] > 0.02 {
		t.Fatalf("after 55s at 1/h and a raise to 10/m: %+v, want a refusal holding ~0.015 tokens", res)
	}
	idle(t, r, s, "t/moved", 55*time.Second)
	moved := at("t/moved", raised, now.Add(-time.Hour))
	if res := decide(t, s, moved); res.OK || res.Now[0] > 0.02 {
		t.Fatalf("charged under other limits after the change (its key moved to a tier with these): %+v, want the old rate's ~0.015 tokens", res)
	} else if res.Wait < 3500*time.Second || res.Wait > time.Hour || res.Refill[0] != res.Wait {
		// It earns those limits until a call is admitted under these: its
		// wait is the old rate's, not the 6s the new one would take.
		t.Fatalf("its wait %v (refill %v), want the ~3545s a token takes at 1/h", res.Wait, res.Refill)
	}
	// So too where another item refused first, and in the wait it names.
	first := at("t/first", old, time.Time{})
	if res, err := s.Ask(context.Background(), []redisstore.Item{first, moved}); err != nil || res.OK || res.Refused != 0 ||
		res.Refill[1] < 3500*time.Second || res.Refill[1] > time.Hour {
		t.Fatalf("behind another refusal: %+v (%v), want item 1 to wait ~3545s", res, err)
	}
	// A change to come (on Redis's clock: the instance's runs ahead)
	// leaves the old rate in force until then.
	idle(t, r, s, "t/ahead", 55*time.Second)
	if res := decide(t, s, at("t/ahead", raised, now.Add(30*time.Second))); res.OK || res.Wait < 34*time.Second || res.Wait > 37*time.Second {
		t.Fatalf("the raise 29-30s ahead: %+v, want those seconds at 1/h and then ~5.9s at 10/m", res)
	}
	idle(t, r, s, "t/unknown", 55*time.Second)
	if res := decide(t, s, at("t/unknown", raised, time.Time{})); res.OK || res.Now[0] > 0.02 {
		t.Fatalf("with no change time the gap is the old rate's: %+v, want ~0.015 tokens", res)
	}
	idle(t, r, s, "t/split", 2*time.Minute)
	if res := decide(t, s, at("t/split", raised, now.Add(-time.Minute))); !res.OK || res.After[0] < 9 || res.After[0] > 9.5 {
		t.Fatalf("1m at 1/h then 1m at 10/m: %+v, want ~9.0 left", res)
	}
	idle(t, r, s, "t/full", 6*time.Hour)
	if res := decide(t, s, at("t/full", raised, now.Add(-time.Second))); !res.OK || res.After[0] < 19 || res.After[0] > 19.01 {
		t.Fatalf("full at the change: %+v, want the new burst less 1", res)
	}
}

// Waiting for a free connection is not Redis being slow: calls queue for
// one, and only the round trip on it is bounded by the timeout. Each round
// trip here takes 30ms (a proxy delays every reply), well within the
// 150ms timeout; twelve concurrent calls on a one-connection pool queue
// for ~360ms, past the timeout and well within QueueTimeout, and each is
// decided exactly.
func TestConcurrentCallsQueueForAConnection(t *testing.T) {
	r := harness.StartRedis(t)
	slow := slowProxy(t, r.Addr, 30*time.Millisecond)
	s, err := redisstore.New(redisstore.Config{URL: "redis://" + slow + "?pool_size=1", Zone: "z", Timeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 12
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, err := s.Decide(context.Background(), []redisstore.Item{bucket("t/many", 1.0/3600, n/2, 1)})
			switch {
			case err != nil:
				t.Error(err)
			case res.OK:
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != n/2 {
		t.Fatalf("%d admitted of %d concurrent calls; want exactly the burst of %d", admitted.Load(), n, n/2)
	}
}

// proxy forwards TCP connections to target: relay runs for each
// connection accepted (c) and its connection to target (u), and starts
// what copies between them. It returns the proxy's address.
func proxy(t *testing.T, target string, relay func(c, u net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			t.Cleanup(func() { _ = c.Close(); _ = u.Close() })
			relay(c, u)
		}
	}()
	return l.Addr().String()
}

// slowProxy forwards TCP connections to target and delays each chunk of
// the replies by delay. It returns its address.
func slowProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	return proxy(t, target, func(c, u net.Conn) {
		go func() { _, _ = io.Copy(u, c) }()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := u.Read(buf)
				if err != nil {
					_ = c.Close()
					return
				}
				time.Sleep(delay)
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	})
}

// A remembered refusal is answered locally for at most RecheckAfter: a
// count another instance gave back (a refund) is then seen, instead of a
// quota reading exhausted until the period ends.
func TestRememberedRefusalIsCheckedAgain(t *testing.T) {
	r := harness.StartRedis(t)
	s, now := clockedStore(t, r)
	other := newStore(t, r, "z")
	item := quotaItem("i/back", quota.Day, 3, 1)
	for range 3 {
		if res := decide(t, other, item); !res.OK {
			t.Fatalf("charging: %+v", res)
		}
	}
	if res := decide(t, s, item); res.OK || res.Local {
		t.Fatalf("4th call %+v, want a refusal by Redis", res)
	}
	if err := other.Refund(context.Background(), []redisstore.Item{item}); err != nil {
		t.Fatal(err)
	}
	if res := decide(t, s, item); !res.Local {
		t.Fatalf("right after: %+v, want the refusal answered from memory", res)
	}
	*now = now.Add(redisstore.RecheckAfter)
	if res := decide(t, s, item); !res.OK {
		t.Fatalf("after RecheckAfter: %+v, want Redis asked again and the call admitted", res)
	}
}

// A remembered refusal holds back calls that ask as much or more, not a
// cheaper call, which Redis may still admit: one token left refuses a
// call of cost 3, not one of cost 1.
func TestShortCircuitLetsACheaperCallThrough(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	if res := decide(t, s, bucket("t/cheap", 1.0/60, 5, 4)); !res.OK {
		t.Fatalf("draining call refused: %+v", res)
	}
	if res := decide(t, s, bucket("t/cheap", 1.0/60, 5, 3)); res.OK || res.Local {
		t.Fatalf("call of cost 3 with 1 token left: %+v, want a refusal by Redis", res)
	}
	if res := decide(t, s, bucket("t/cheap", 1.0/60, 5, 1)); !res.OK || res.Local {
		t.Fatalf("call of cost 1 with 1 token left: %+v, want admitted by Redis", res)
	}
}

// A remembered key whose limits changed since is not known under the new
// ones: a call of it is decided in Redis, though another of its keys is
// remembered refused, whose wait alone a refusal from memory would name.
func TestShortCircuitAsksRedisOfAKeyUnderChangedLimits(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	short, long := bucket("t/short", 1, 1, 1), bucket("t/long", 1.0/3600, 1, 1)
	if res := decide(t, s, short, long); !res.OK {
		t.Fatalf("draining call refused: %+v", res)
	}
	if res := decide(t, s, short, long); res.OK || res.Local {
		t.Fatalf("second call %+v, want Redis to refuse it and both keys remembered", res)
	}
	changed := long
	changed.Rate = 1.0 / 1800
	if res := decide(t, s, short, changed); res.OK || res.Local {
		t.Fatalf("a call with t/long's rate changed: %+v, want it decided in Redis", res)
	}
	// So too after a change that left its limits as they were but moved
	// the time they are in force since (a reload that changed others):
	// the time since is credited at them, whatever the bucket was last
	// charged under.
	for i, local := range []bool{false, true} { // the first remembers t/long under its limits again
		if res := decide(t, s, short, long); res.OK || res.Local != local {
			t.Fatalf("call %d under t/long's limits again: %+v, want Local %v", i+1, res, local)
		}
	}
	long.Since = time.Now()
	if res := decide(t, s, short, long); res.OK || res.Local {
		t.Fatalf("a call with t/long's limits in force since later: %+v, want it decided in Redis", res)
	}
}

// A cheaper call of a remembered key may fit, so it refuses nothing
// alone; beside another key's remembered refusal it is weighed, with
// what its level shows: a bucket left short of one token for a minute
// outlasts the other key's second.
func TestShortCircuitWeighsACheaperCallOfARememberedKey(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	slow, fast := bucket("t/slow", 1.0/60, 2, 2), bucket("t/fast", 1, 1, 1)
	if res := decide(t, s, slow, fast); !res.OK {
		t.Fatalf("draining call refused: %+v", res)
	}
	if res := decide(t, s, slow, fast); res.OK || res.Local {
		t.Fatalf("second call %+v, want Redis to refuse it and both keys remembered", res)
	}
	cheaper := slow
	cheaper.N = 1
	res := decide(t, s, cheaper, fast)
	if res.OK || !res.Local || res.Refused != 0 || res.Wait < 50*time.Second {
		t.Fatalf("a call of cost 1 of t/slow beside t/fast: %+v, want a local refusal naming t/slow's minute", res)
	}
	if res := decide(t, s, cheaper); res.Local {
		t.Fatalf("a call of cost 1 of t/slow alone: %+v, want it decided in Redis", res)
	}
}

// A bucket item without a positive rate and burst is an error, not a
// bucket that never admits or always does.
func TestBucketWithoutRateOrBurstIsAnError(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	for _, it := range []redisstore.Item{bucket("t/zero", 1, 0, 1), bucket("t/zero", 0, 5, 1), bucket("t/zero", -1, 5, 1)} {
		if _, err := s.Decide(context.Background(), []redisstore.Item{it}); err == nil {
			t.Errorf("bucket rate %v burst %d decided, want an error", it.Rate, it.Burst)
		}
	}
}

// URLs go-redis parses but no server answers are refused; the forms
// Redis URLs take are accepted.
func TestCheckURL(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:6379", "redis://localhost", "rediss://:pw@cache.example:6380/3", "redis://user:pw@[::1]:6379/0", "unix:///run/redis.sock?db=2", "redis://127.0.0.1:6379/2147483647"} {
		if err := redisstore.CheckURL(u, false); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"redis://127.0.0.1:6379/-1", "redis://127.0.0.1:6379/2147483648", "redis://127.0.0.1:99999", "redis://127.0.0.1:0", "http://127.0.0.1:6379", "redis://127.0.0.1:6379/x",
		"redis::pw@127.0.0.1", "redis:127.0.0.1:6379", "redis://:pw@127.0.0.1:6379:9", "redis://127.0.0.1:6379?addr=127.0.0.1:6380"} {
		if err := redisstore.CheckURL(u, false); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
}

// A cluster's URL names one node, and further ones as addr parameters; it
// names no DB but 0, the only one a cluster has.
func TestCheckClusterURL(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:7000", "redis://127.0.0.1:7000/", "redis://127.0.0.1:7000/0", "rediss://user:pw@node.example:6380",
		"redis://:pw@127.0.0.1:7000?addr=127.0.0.1:7001&addr=[::1]:7002"} {
		if err := redisstore.CheckURL(u, true); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"redis://127.0.0.1:7000/3", "redis://127.0.0.1:99999", "redis://127.0.0.1:7000?addr=127.0.0.1:0", "redis://127.0.0.1:7000?addr=nope",
		"unix:///run/redis.sock", "http://127.0.0.1:7000", "redis://127.0.0.1:7000?db=2", "redis://127.0.0.1:7000?addr=u:pw@127.0.0.1:7001",
		"redis::pw@127.0.0.1:7000", "redis://127.0.0.1:7000:9", "redis://127.0.0.1:7000?addr=127.0.0.1:7001:9"} {
		if err := redisstore.CheckURL(u, true); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
}

// An error about a URL never quotes it: its password would reach the logs
// and the answer to an admin API load.
func TestCheckURLErrorHidesThePassword(t *testing.T) {
	for _, u := range []string{"redis://:topsecretpw@127.0.0.1:notaport", "redis://user:topsecretpw@127.0.0.1:6379/x", "redis://:topsecretpw@127.0.0.1:99999", "redis://:topsecretpw@[::1", "redis://:topsecretpw@127.0.0.1:6379/?nope=1"} {
		for _, cluster := range []bool{false, true} {
			err := redisstore.CheckURL(u, cluster)
			if err == nil {
				t.Fatalf("%s accepted (cluster %v)", u, cluster)
			}
			if strings.Contains(err.Error(), "topsecretpw") {
				t.Errorf("the error for %s (cluster %v) quotes the password: %v", u, cluster, err)
			}
		}
	}
	// A cluster's further nodes are host:port alone: credentials given
	// there are not quoted back.
	for _, u := range []string{"redis://:topsecretpw@127.0.0.1:7000?addr=user:topsecretpw@127.0.0.1:7001",
		"redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=:topsecretpw@127.0.0.1:7002"} {
		err := redisstore.CheckURL(u, true)
		if err == nil || strings.Contains(err.Error(), "topsecretpw") || !strings.Contains(err.Error(), "addr parameter") {
			t.Errorf("%s: %v, want an error naming the addr parameter without the password", u, err)
		}
		// Without cluster, addr is no option at all: the error says so.
		err = redisstore.CheckURL(u, false)
		if err == nil || strings.Contains(err.Error(), "topsecretpw") || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("%s without cluster: %v, want an error saying addr is a cluster's, without the password", u, err)
		}
	}
	// An option's value that does not parse may be a password typed in
	// the wrong place: go-redis quotes it, the error does not.
	for _, u := range []string{"redis://:topsecretpw@127.0.0.1:7000?pool_size=topsecretpw",
		"redis://127.0.0.1:7000?dial_timeout=topsecretpw", "redis://127.0.0.1:7000?read_timeout=topsecretpw",
		"redis://127.0.0.1:7000?max_retries=topsecretpw", "redis://127.0.0.1:7000?protocol=topsecretpw"} {
		for _, cluster := range []bool{false, true} {
			err := redisstore.CheckURL(u, cluster)
			if err == nil || strings.Contains(err.Error(), "topsecretpw") || !strings.Contains(err.Error(), "invalid") {
				t.Errorf("%s (cluster %v): %v, want an error naming the option without its value", u, cluster, err)
			}
		}
	}
	// A mistyped addr may hold a password where its port belongs, or be
	// one: it is not quoted back either.
	for _, u := range []string{"redis://127.0.0.1:7000?addr=127.0.0.1:7001:topsecretpw",
		"redis://127.0.0.1:7000?addr=topsecretpw", "redis://127.0.0.1:7000?addr=127.0.0.1:7001/topsecretpw",
		"redis://127.0.0.1:7000?addr=127.0.0.1:topsecretpw"} {
		err := redisstore.CheckURL(u, true)
		if err == nil || strings.Contains(err.Error(), "topsecretpw") || !strings.Contains(err.Error(), "addr parameter") ||
			strings.Count(err.Error(), "parsing redis") != 1 {
			t.Errorf("%s: %v, want an error naming the addr parameter without quoting it, and the URL it parses once", u, err)
		}
	}
	// A password holding a character a URL must percent-encode makes the
	// parser split the URL inside it: no piece of it may be quoted.
	for _, c := range []struct {
		url    string
		pieces []string
	}{
		{"redis://:Xk7#q2Zt9@127.0.0.1:6379/0", []string{"Xk7", "q2Zt9"}},
		{"redis://:4711?Secret9@127.0.0.1:6379/0", []string{"4711", "Secret9"}},
		{"redis://:4711/Secret9@127.0.0.1:6379/0", []string{"4711", "Secret9"}},
		{"redis://:Pa55%wo@127.0.0.1:6379", []string{"Pa55", "%wo"}},
		{"redis://admin:Pa55 zq9@127.0.0.1:6379", []string{"Pa55", "zq9"}},
		{"rediss://admin:a#b/c?d@cache.example:6380/2", []string{"a#b", "c?d"}},
		{"redis://:QzS3{crT}@127.0.0.1:6379/0", []string{"QzS3", "crT"}},
	} {
		for _, cluster := range []bool{false, true} {
			err := redisstore.CheckURL(c.url, cluster)
			if err == nil {
				t.Fatalf("%s accepted (cluster %v)", c.url, cluster)
			}
			for _, p := range c.pieces {
				if strings.Contains(err.Error(), p) {
					t.Errorf("the error for %s (cluster %v) quotes %q of the password: %v", c.url, cluster, p, err)
				}
			}
			if !strings.Contains(err.Error(), "percent-encode") {
				t.Errorf("the error for %s (cluster %v) does not say to encode the password: %v", c.url, cluster, err)
			}
		}
	}
}

// A refusal is remembered until the key fits again, to the moment, not
// until the whole-second Retry-After it tells: a bucket of 5/s refills its
// token in 200ms, and a call 100ms later is answered from memory, short of
// the token, but one at 250ms asks Redis. Else a caller told "Retry in 1s"
// by another instance, whose refusal came later, would find this one's
// memory outlasting that promise.
func TestShortCircuitHoldsUntilTheKeyFits(t *testing.T) {
	r := harness.StartRedis(t)
	s, now := clockedStore(t, r)
	item := bucket("t/ra", 5, 1, 1)
	if res := decide(t, s, item); !res.OK {
		t.Fatalf("first call refused: %+v", res)
	}
	first := decide(t, s, item)
	if first.OK || first.Local || first.Wait > 250*time.Millisecond {
		t.Fatalf("second call %+v, want a refusal by Redis for about 200ms", first)
	}
	*now = now.Add(100 * time.Millisecond)
	res := decide(t, s, item)
	if !res.Local || res.Wait <= 0 || res.Wait > first.Wait-100*time.Millisecond || res.Held >= 1 {
		t.Fatalf("100ms later %+v, want answered from memory until the refill, short of the token", res)
	}
	*now = now.Add(first.Wait - 50*time.Millisecond)
	if res := decide(t, s, item); res.Local {
		t.Fatalf("past the refill %+v, want Redis asked again", res)
	}
}

// A call Redis admits shows its keys are not over their limits: a refusal
// remembered for one of them is forgotten, so that limits raised and
// lowered again meanwhile do not bring it back as a wait that is gone.
func TestAdmissionForgetsRememberedRefusals(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	tight := bucket("t/up", 1.0/60, 1, 1)
	if res := decide(t, s, tight); !res.OK {
		t.Fatalf("first call refused: %+v", res)
	}
	if res := decide(t, s, tight); res.OK || res.Local {
		t.Fatalf("second call %+v, want a refusal by Redis", res)
	}
	raised := bucket("t/up", 100, 100, 1)
	raised.Since = time.Now()         // a config change raises the limits
	time.Sleep(50 * time.Millisecond) // a token at the raised rate: no fresh burst comes with it
	if res := decide(t, s, raised); !res.OK {
		t.Fatalf("under raised limits %+v, want admitted", res)
	}
	if res := decide(t, s, tight); res.Local {
		t.Fatalf("under the first limits again %+v, want Redis asked, not the refusal remembered before", res)
	}
}

// A call Redis admits may leave a key short of that call's cost: the
// next such call is decided in Redis all the same, but when a refusal
// remembered for another key of it answers it locally, the wait named is
// the longer of the two. Else a caller whose own bucket its last call
// emptied would be told the shared bucket's second, and refused again by
// its own bucket then.
func TestShortCircuitNamesTheWaitAnAdmissionLeft(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "z")
	global := bucket("global", 1, 1, 1)
	x := []redisstore.Item{bucket("t/x", 0.1, 1, 1), global}
	if res := decide(t, s, x...); !res.OK {
		t.Fatalf("x's call refused: %+v", res)
	}
	// What the admission left does not refuse alone: another caller's
	// call, short of the global token, is decided in Redis.
	w := decide(t, s, bucket("t/w", 0.1, 1, 1), global)
	if w.OK || w.Local || w.Refused != 1 {
		t.Fatalf("w's call %+v, want the global bucket refused by Redis", w)
	}
	before := r.Calls(t)
	res := decide(t, s, x...)
	if res.OK || !res.Local || res.Refused != 0 || res.Wait < 8*time.Second || res.Held >= 1 {
		t.Fatalf("x's next call %+v, want a local refusal naming x's own bucket, about 10s from a token", res)
	}
	if n := harness.CallsBetween(before, r.Calls(t)); n != 0 {
		t.Fatalf("the local refusal cost %d Redis commands", n)
	}
	if n := s.Remembered(); n != 1 {
		t.Fatalf("Remembered() = %d, want 1: the global bucket's refusal, not what x's admission left", n)
	}
}

// Preload puts the scripts in a Redis that never ran them, and only those
// it lacks.
func TestPreloadLoadsTheScriptsRedisLacks(t *testing.T) {
	r := harness.StartRedis(t)
	s := newStore(t, r, "preload")
	client := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	loaded, err := client.ScriptExists(ctx, redisstore.PreloadedScripts...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range loaded {
		if !ok {
			t.Fatalf("script %s not in Redis's cache after Preload", redisstore.PreloadedScripts[i])
		}
	}
	// The zone preloads every few seconds: scripts Redis has are not
	// sent again.
	before := r.Calls(t)["script|load"]
	if err := s.Preload(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.Calls(t)["script|load"] - before; n != 0 {
		t.Fatalf("Preload sent %d scripts Redis had", n)
	}
}

// The probe's ping fails where every decision fails: for a user whose
// ACL lets it run scripts and read and write the zone's keys but not
// TIME, which the decisions call (a least-privilege ACL built from
// categories leaves it out), one that may not write, and one that may
// touch the fingerprint key alone. A ping that answered for such a user
// told the zone Redis was back every few seconds, and its next call
// failed again. A user with the README's least-privilege ACL pings.
func TestPingFailsForAUserThatCannotDecide(t *testing.T) {
	r := harness.StartRedis(t)
	r.Do(t, "ACL", "SETUSER", "notime", "on", ">pw", "~mcprl:*", "resetchannels", "-@all", "+@scripting", "+@read", "+@write", "+@connection")
	r.Do(t, "ACL", "SETUSER", "nowrite", "on", ">pw", "~mcprl:*", "resetchannels", "-@all", "+@scripting", "+@read", "+time")
	r.Do(t, "ACL", "SETUSER", "fpkeyonly", "on", ">pw", "~mcprl:*:fpkey", "~mcprl:*:epoch", "resetchannels", "-@all", "+@scripting", "+@read", "+@write", "+time")
	r.Do(t, "ACL", "SETUSER", "least", "on", ">pw", "~mcprl:*", "resetchannels", "-@all", "+@scripting", "+@read", "+@write", "+time")
	open := func(user string) *redisstore.Store {
		s, err := redisstore.New(redisstore.Config{URL: "redis://" + user + ":pw@" + r.Addr, Zone: "acl", Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	ctx := context.Background()
	for _, user := range []string{"notime", "nowrite", "fpkeyonly"} {
		limited := open(user)
		if _, _, err := limited.FingerprintKey(ctx, nil); err != nil && user != "nowrite" {
			t.Fatalf("%s: the fingerprint key: %v", user, err)
		}
		if _, err := limited.Decide(ctx, []redisstore.Item{bucket("t/a", 1, 5, 1)}); err == nil {
			t.Fatalf("%s: a decision succeeded: the case this test is about", user)
		}
		if err := limited.Ping(ctx); err == nil {
			t.Fatalf("%s: ping by a user that cannot decide succeeded", user)
		}
	}
	least := open("least")
	if err := least.Ping(ctx); err != nil {
		t.Fatalf("ping by a user with the least-privilege ACL: %v", err)
	}
	if res := decide(t, least, bucket("t/a", 1, 5, 1)); !res.OK {
		t.Fatalf("%+v, want the least-privilege user's decision admitted", res)
	}
}
