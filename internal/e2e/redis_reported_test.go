package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A crash during a Redis outage, once the calls made locally are in
// storage, goes on from what Redis had counted plus those: the host's
// copy holds what Redis reported with the calls counted locally since,
// which the copy does not hide.
func TestRedisOutageCrashAddsWhatRedisReportedToStorage(t *testing.T) {
	skipNearMidnight(t)
	const token = "valid-crash-reported"
	r := harness.StartRedis(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	p := harness.StartProcess(t, harness.BuildCaddy(t), redisSite(r.URL, "tenant 1/h burst 10\n quota 6/day"), backend.Addr, storage, "")
	prove(t, p, token)
	for range 3 {
		mustCall(t, p, token, "ok") // counted in Redis
	}
	r.Kill()
	for range 2 {
		mustCall(t, p, token, "ok") // counted locally
	}
	harness.Eventually(t, 10*time.Second, "the outage's calls in storage", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, rzone)) == 2
	})
	p.Kill()
	p.Restart(t) // Redis still down
	prove(t, p, token)
	mustCall(t, p, token, "ok")
	mustCall(t, p, token, "quota") // 3 in Redis, 2 before the crash, 1 after
}

// A Redis that loses its data while instances run (a restart without
// persistence, FLUSHALL) is raised back by each of them, within seconds,
// to the counts it knows: the identities each served find their quota
// spent, as before the loss.
func TestRunningInstancesRaiseARedisThatLostItsData(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 2, redisSite(r.URL, "tenant 1/h burst 10\n quota 3/day"))
	tokens := []string{"valid-lost-a", "valid-lost-b"}
	for i, p := range ps {
		prove(t, p, tokens[i])
		for range 3 {
			mustCall(t, p, tokens[i], "ok")
		}
	}
	if n := sumQuota(t, r); n != 6 {
		t.Fatalf("Redis holds %d for six calls, want 6", n)
	}
	r.Do(t, "FLUSHALL")
	harness.Eventually(t, 15*time.Second, "Redis raised back to six calls", func() bool {
		return sumQuota(t, r) == 6
	})
	for i, p := range ps {
		mustCall(t, p, tokens[i], "quota")
	}
}

// When Redis comes back empty with an instance that starts beside it (a
// host that rebooted), the start raises Redis to what its host's copy
// held, and a running instance that finds the loss raises it to what it
// knew: the calls are counted once.
func TestARestartBesideARedisThatLostItsDataAndARunningInstanceCountOnce(t *testing.T) {
	skipNearMidnight(t)
	const token = "valid-lost-reboot"
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 2, redisSite(r.URL, "tenant 1/h burst 20\n quota 7/day"))
	a, b := ps[0], ps[1]
	prove(t, a, token)
	prove(t, b, token)
	for range 3 {
		mustCall(t, a, token, "ok") // Redis reports 3 to a
	}
	for range 2 {
		mustCall(t, b, token, "ok") // and 5 to b
	}
	a.Stop() // its host's copy holds 3
	r.Kill()
	r.Start(t) // empty
	a.Restart(t)
	harness.Eventually(t, 20*time.Second, "Redis raised back to five calls", func() bool {
		return sumQuota(t, r) >= 5
	})
	time.Sleep(2 * time.Second) // any later push, seed or restore done
	if n := sumQuota(t, r); n != 5 {
		t.Fatalf("Redis holds %d for five calls, want 5", n)
	}
	prove(t, a, token)
	mustCall(t, a, token, "ok")
	mustCall(t, b, token, "ok")
	mustCall(t, b, token, "quota")
}

// Processes sharing a data directory each keep their own copy of what
// Redis reported: one that stops last does not replace what another was
// told, and a start during an outage goes on from the largest.
func TestRedisReportedCopiesOfProcessesSharingADataDirectory(t *testing.T) {
	skipNearMidnight(t)
	const token = "valid-shared-reported"
	r := harness.StartRedis(t)
	site := redisSite(r.URL, "tenant 1/h burst 10\n quota 6/day")
	a, b, _ := startSharingData(t, site, harness.TempDir(t, "storageA"), harness.TempDir(t, "storageB"))
	prove(t, b, token)
	mustCall(t, b, token, "ok") // Redis reports 1 to b
	prove(t, a, token)
	for range 4 {
		mustCall(t, a, token, "ok") // and 5 to a
	}
	a.Stop()
	b.Stop() // last: its copy holds 1
	r.Kill()
	a.Restart(t)
	prove(t, a, token)
	mustCall(t, a, token, "ok")
	mustCall(t, a, token, "quota") // 5 reported to a, 1 after
}

// A crash while Redis decides loses at most a flush interval of what
// Redis reported to the instance: the host's copy is kept at every flush,
// so a restart during an outage goes on from it.
func TestRedisCrashWhileHealthyKeepsWhatRedisReported(t *testing.T) {
	skipNearMidnight(t)
	const token = "valid-crash-healthy"
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 1, redisSite(r.URL, "tenant 1/h burst 10\n quota 3/day"))
	p := ps[0]
	prove(t, p, token)
	for range 3 {
		mustCall(t, p, token, "ok") // counted in Redis only
	}
	copies := filepath.Join(p.Home, "data", "caddy", "mcp_ratelimit-redis-reported", hex.EncodeToString([]byte(rzone))+".*.counts")
	harness.Eventually(t, 10*time.Second, "the host's copy of what Redis reported", func() bool {
		names, _ := filepath.Glob(copies)
		for _, name := range names {
			if b, _ := os.ReadFile(name); bytes.Contains(b, []byte(" 3\n")) {
				return true
			}
		}
		return false
	})
	p.Kill()
	r.Kill()
	p.Restart(t)
	prove(t, p, token)
	mustCall(t, p, token, "quota")
}

// Counts an outage left in storage at a stop are pushed once when two
// instances sharing that storage start together: the one that takes them
// pushes them before it removes them, so the other, which raises Redis to
// the counts storage holds (the outage's among them), does not find them
// gone from storage and not yet in Redis.
func TestRedisOutageCountsSavedAtAStopArePushedOnceByTwoStarts(t *testing.T) {
	skipNearMidnight(t)
	r, a, b := callsInAnOutageOnSharedStorage(t, "valid-two-starts", 1)
	b.Stop() // the call is saved in storage, to be pushed
	r.Start(t)
	a.Restart(t)
	b.Restart(t)
	time.Sleep(3 * time.Second) // pushes, seeds and probes done
	if n := sumQuota(t, r); n != 1 {
		t.Fatalf("Redis holds %d for the outage's one call, want 1", n)
	}
}

// An instance that raises Redis to the counts storage holds (a start with
// the store) while another still holds the calls it counted during an
// outage, not yet pushed, leaves those out: their maker pushes them, and
// carrying them too would count each twice.
func TestRedisOutageCallsOfARunningInstanceAreNotCarriedTwiceByAStart(t *testing.T) {
	skipNearMidnight(t)
	const token = "valid-running-outage"
	r, a, b := callsInAnOutageOnSharedStorage(t, token, 2)
	time.Sleep(1500 * time.Millisecond) // and marked as bound for Redis, at the same flush
	b.Pause(t)                          // its push waits until a has started
	r.Start(t)
	a.Restart(t)
	b.Resume(t)
	harness.Eventually(t, 15*time.Second, "b's calls pushed", func() bool {
		return harness.GetStore(t, b.Admin, rzone).Pushed > 0 && !harness.GetStore(t, b.Admin, rzone).Degraded
	})
	if n := sumQuota(t, r); n != 2 {
		t.Fatalf("Redis holds %d for the outage's two calls, want 2", n)
	}
	mustCall(t, a, token, "ok")
	mustCall(t, b, token, "ok")
	mustCall(t, a, token, "quota")
}

// The calls an instance counts while a reload removed its store are
// pushed when it is added back: an instance that raised Redis to the
// counts storage holds meanwhile (a start with the store) left them out.
func TestRedisCallsMadeWithoutTheStoreAreNotCarriedTwiceByAStart(t *testing.T) {
	skipNearMidnight(t)
	const token = "valid-removed-store"
	r := harness.StartRedis(t)
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	extra := "tenant 1/h burst 10\n quota 5/day"
	site := redisSite(r.URL, extra)
	a := harness.StartProcess(t, bin, site, backend.Addr, storage, "")
	prove(t, a, token)
	mustCall(t, a, token, "ok") // in Redis
	without := fmt.Sprintf("mcp_ratelimit {\n zone %s\n flush_interval 1s\n %s\n}\nreverse_proxy $BACKEND", rzone, extra)
	reload(t, a, harness.Config(without, backend.Addr, a.Port, a.AdminPort, storage, ""))
	for range 2 {
		mustCall(t, a, token, "ok") // without the store, flushed to storage
	}
	harness.Eventually(t, 10*time.Second, "the calls without the store in storage", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, rzone)) == 2
	})
	time.Sleep(1500 * time.Millisecond) // and marked as bound for Redis, at the same flush
	b := harness.StartProcess(t, bin, site, backend.Addr, storage, "")
	reload(t, a, harness.Config(site, backend.Addr, a.Port, a.AdminPort, storage, ""))
	harness.Eventually(t, 15*time.Second, "a's calls pushed", func() bool {
		return sumQuota(t, r) >= 3
	})
	time.Sleep(2 * time.Second) // any later push or seed done
	if n := sumQuota(t, r); n != 3 {
		t.Fatalf("Redis holds %d for three calls, want 3", n)
	}
	mustCall(t, b, token, "ok")
	mustCall(t, a, token, "ok")
	mustCall(t, b, token, "quota")
}

// callsInAnOutageOnSharedStorage starts two instances sharing storage and
// Redis (quota 4/day), stops a and Redis, and has b admit calls calls of
// token, counted locally, until storage holds them.
func callsInAnOutageOnSharedStorage(t *testing.T, token string, calls int64) (r *harness.Redis, a, b *harness.Process) {
	t.Helper()
	r = harness.StartRedis(t)
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	site := redisSite(r.URL, "tenant 1/h burst 10\n quota 4/day")
	a = harness.StartProcess(t, bin, site, backend.Addr, storage, "")
	b = harness.StartProcess(t, bin, site, backend.Addr, storage, "")
	a.Stop()
	r.Kill()
	prove(t, b, token)
	for range calls {
		mustCall(t, b, token, "ok")
	}
	harness.Eventually(t, 10*time.Second, "the outage's calls in storage", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, rzone)) == calls
	})
	return r, a, b
}

// A start does not count twice a call another instance counted for Redis
// (one made while its zone had no store, pushed to Redis once the store is
// back, to storage at its next flush) that reached storage only after
// this instance's stop: Redis had reported it to this instance, so its
// copy of what Redis reported holds it, and storage holds it at the start.
func TestRedisCallsThatReachStorageAfterAStopAreNotCarriedTwiceByItsStart(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	block := "tenant 1/h burst 10\n group {http.request.header.X-Org} 100/s burst 100\n group_quota 5/day"
	siteWith := func(store string) string {
		// b flushes only when it stops: its call waits for storage
		// while a sees it in Redis.
		return fmt.Sprintf("mcp_ratelimit {\n zone %s\n flush_interval 1h\n %s\n %s\n}\nreverse_proxy $BACKEND", rzone, store, block)
	}
	withStore := "store redis " + r.URL + " {\n  timeout 100ms\n }"
	a := harness.StartProcess(t, bin, redisSite(r.URL, block), backend.Addr, storage, "")
	b := harness.StartProcess(t, bin, siteWith(withStore), backend.Addr, storage, "")
	groupCall := func(p *harness.Process, token, want string) {
		t.Helper()
		if got, err := rawCall(p.URL, token, "echo", "X-Org", "acme"); err != nil || got != want {
			t.Fatalf("call of %s on %s: %s (%v), want %s", token, p.URL, got, err, want)
		}
	}
	inStorage := func() int64 {
		var n int64
		for k, v := range harness.StoredDayCounts(t, storage, rzone) {
			if strings.HasPrefix(k, "g/") {
				n += v
			}
		}
		return n
	}
	prove(t, a, "valid-alice")
	prove(t, b, "valid-bob")
	groupCall(a, "valid-alice", "ok") // decided in Redis, not counted in storage
	reload(t, b, harness.Config(siteWith(""), backend.Addr, b.Port, b.AdminPort, storage, ""))
	groupCall(b, "valid-bob", "ok") // counted on b for Redis
	reload(t, b, harness.Config(siteWith(withStore), backend.Addr, b.Port, b.AdminPort, storage, ""))
	harness.Eventually(t, 5*time.Second, "b's call in Redis", func() bool { return sumQuotaOf(t, r, "g") == 2 })
	b.Pause(t)
	groupCall(a, "valid-alice", "ok") // Redis reports 3 to a
	a.Stop()
	if n := inStorage(); n != 0 {
		t.Fatalf("storage holds %d group calls at a's stop, want none (b's not flushed yet)", n)
	}
	b.Resume(t)
	b.Stop() // flushes b's call to storage
	if n := inStorage(); n != 1 {
		t.Fatalf("storage holds %d group calls after b's stop, want b's 1", n)
	}
	a.Restart(t)
	time.Sleep(2 * time.Second) // seeded
	if n := sumQuotaOf(t, r, "g"); n != 3 {
		t.Fatalf("Redis holds %d for the group's three calls, want 3", n)
	}
	groupCall(a, "valid-alice", "ok")
	groupCall(a, "valid-alice", "ok")
	groupCall(a, "valid-alice", "group_quota")
}
