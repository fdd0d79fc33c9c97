// Package e2e runs several Caddy processes built from ./cmd/caddy on one
// storage directory, to test what only separate processes can show: the
// shared quota's sum across instances, restarts, crashes and storage
// failures.
package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

const (
	zone  = "q"
	flush = time.Second
)

// site is the Caddyfile site body of every process: zone q, a 1s flush,
// a tenant bucket that never refuses and a daily quota of limit.
func site(limit int) string {
	return fmt.Sprintf("mcp_ratelimit {\n zone %s\n flush_interval 1s\n tenant 1000/s burst 1000\n quota %d/day\n}\nreverse_proxy $BACKEND", zone, limit)
}

// skipNearMidnight skips tests that would straddle the UTC day boundary,
// where the daily quota resets.
// startProven starts one Caddy process with quota limit on its own
// storage directory and proves token on it.
func startProven(t *testing.T, limit int, token string) (*harness.Process, *harness.Backend, string) {
	t.Helper()
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	p := harness.StartProcess(t, harness.BuildCaddy(t), site(limit), backend.Addr, storage, "")
	prove(t, p, token)
	return p, backend, storage
}

func skipNearMidnight(t *testing.T) {
	t.Helper()
	now := time.Now().UTC()
	y, m, d := now.Date()
	if time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC).Sub(now) < 2*time.Minute {
		t.Skip("too close to 00:00 UTC, when the daily quota resets")
	}
}

type refusalBody struct {
	Error *struct {
		Message string `json:"message"`
		Data    struct {
			Limit string `json:"limit"`
			Code  string `json:"code"`
		} `json:"data"`
	} `json:"error"`
}

// outcome classifies a response: "ok" (200), or the refusal's data.limit.
func outcome(t *testing.T, r *harness.Response) string {
	t.Helper()
	if r.Status == http.StatusOK {
		return "ok"
	}
	var b refusalBody
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Error == nil {
		t.Fatalf("status %d, body %s: not a refusal", r.Status, r.Body)
	}
	if b.Error.Data.Limit == "quota" && (r.Status != http.StatusTooManyRequests || b.Error.Data.Code != "QUOTA_EXHAUSTED") {
		t.Fatalf("quota refusal with status %d code %q: %s", r.Status, b.Error.Data.Code, r.Body)
	}
	return b.Error.Data.Limit
}

var ids int

func call(t *testing.T, p *harness.Process, token string) string {
	t.Helper()
	ids++
	r := harness.Post(t, p.URL+"/mcp", harness.ToolCall(ids, "echo", map[string]any{"text": "hi"}), "Authorization", "Bearer "+token)
	return outcome(t, r)
}

func mustCall(t *testing.T, p *harness.Process, token, want string) {
	t.Helper()
	if got := call(t, p, token); got != want {
		t.Fatalf("call on %s: %s, want %s", p.URL, got, want)
	}
}

// prove has the backend accept token through p.
func prove(t *testing.T, p *harness.Process, token string) {
	t.Helper()
	r := harness.Post(t, p.URL+"/mcp", harness.Initialize(1), "Authorization", "Bearer "+token)
	if r.Status != http.StatusOK {
		t.Fatalf("proving %s on %s: %d %s", token, p.URL, r.Status, r.Body)
	}
}

// waitFlush waits until p has completed at least n more successful flushes
// than it had when called.
func waitFlush(t *testing.T, p *harness.Process, n uint64) {
	t.Helper()
	base := harness.GetZone(t, p.Admin, zone).QuotaStore.Flushes
	harness.Eventually(t, time.Duration(n+3)*flush*2, fmt.Sprintf("%d flushes on %s", n, p.URL), func() bool {
		return harness.GetZone(t, p.Admin, zone).QuotaStore.Flushes >= base+n
	})
}

func TestQuotaSharedAcrossInstances(t *testing.T) {
	skipNearMidnight(t)
	const limit, n = 30, 3
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	ps := make([]*harness.Process, n)
	for i := range ps {
		ps[i] = harness.StartProcess(t, bin, site(limit), backend.Addr, storage, "")
		if d, err := time.ParseDuration(os.Getenv("E2E_STAGGER")); err == nil {
			time.Sleep(d)
		}
	}
	const token = "valid-shared"
	for _, p := range ps {
		prove(t, p, token)
	}
	var admitted int64
	ok := t.Run("the sum is enforced across instances within the stated bound", func(t *testing.T) {
		// One call per instance per round, a round every 500ms: each
		// instance admits at most k calls per flush interval.
		const pace = 500 * time.Millisecond
		k := int64((flush + pace - 1) / pace)
		perInstance := make([]int64, n)
		start := time.Now()
		for {
			roundStart := time.Now()
			refused := 0
			for i, p := range ps {
				switch got := call(t, p, token); got {
				case "ok":
					admitted++
					perInstance[i]++
				case "quota":
					refused++
				default:
					t.Fatalf("instance %d: refused by %s", i, got)
				}
			}
			if os.Getenv("E2E_DEBUG") != "" {
				fl := make([]uint64, n)
				for i, p := range ps {
					fl[i] = harness.GetZone(t, p.Admin, zone).QuotaStore.Flushes
				}
				t.Logf("%v admitted %d per instance %v flushes %v", time.Since(start).Round(time.Millisecond), admitted, perInstance, fl)
			}
			if refused == n {
				break
			}
			if time.Since(start) > 40*time.Second {
				t.Fatalf("instances still admit after %v: %d admitted (%v)", time.Since(start), admitted, perInstance)
			}
			time.Sleep(pace - time.Since(roundStart))
		}
		// The README's bound: each instance pushes every interval and
		// re-reads the shared totals every tenth of an interval, so a count
		// is seen everywhere within 1.1 intervals of being made:
		// limit + (N-1)·⌈1.1k⌉. E2E_STAGGER=330ms spreads the flush phases.
		bound := limit + (n-1)*((11*k+9)/10)
		t.Logf("admitted %d (per instance %v) in %v; limit %d, bound %d",
			admitted, perInstance, time.Since(start).Round(time.Millisecond), limit, bound)
		if admitted < limit {
			t.Fatalf("admitted %d < limit %d: instances refused before the sum reached the limit", admitted, limit)
		}
		if admitted > bound {
			t.Fatalf("admitted %d > limit + (N-1)·⌈1.1k⌉ = %d", admitted, bound)
		}
		if got := int64(backend.ToolCalls()); got != admitted {
			t.Fatalf("backend saw %d tool calls, %d admitted", got, admitted)
		}
		// After a flush of each, every instance refuses, and storage holds
		// the exact sum.
		for _, p := range ps {
			waitFlush(t, p, 1)
		}
		for i, p := range ps {
			if got := call(t, p, token); got != "quota" {
				t.Fatalf("instance %d after flushes: %s, want a quota refusal", i, got)
			}
		}
		if got := harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)); got != admitted {
			t.Fatalf("stored total %d, admitted %d", got, admitted)
		}
	})
	if !ok {
		return
	}
	t.Run("an idle instance started later refuses the exhausted tenant after one flush", func(t *testing.T) {
		p := harness.StartProcess(t, bin, site(limit), backend.Addr, storage, "")
		started := time.Now()
		// The identity was proven on the other instances and persisted:
		// the new instance knows it without an initialize, and its first
		// call must already be a quota refusal, not a pre-auth one.
		var got string
		harness.Eventually(t, 2*flush+time.Second, "the new instance to refuse the exhausted tenant", func() bool {
			got = call(t, p, token)
			if got == "ok" {
				admitted++
			}
			return got == "quota"
		})
		t.Logf("new instance refused (%s) %v after start", got, time.Since(started).Round(time.Millisecond))
		if got := int64(backend.ToolCalls()); got != admitted {
			t.Fatalf("the new instance admitted %d calls of an exhausted tenant", got-admitted)
		}
		// It has flushed (read) once and still refuses.
		waitFlush(t, p, 1)
		mustCall(t, p, token, "quota")
	})
}

func TestQuotaStorageFailureFailsOpenAndLosesNothing(t *testing.T) {
	skipNearMidnight(t)
	const limit = 1000
	const token = "valid-outage"
	p, backend, storage := startProven(t, limit, token)
	admitted := int64(0)
	callN := func(n int) {
		t.Helper()
		for range n {
			mustCall(t, p, token, "ok")
			admitted++
		}
	}
	callN(3)
	harness.Eventually(t, 5*flush, "the first counts to be stored", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)) == admitted
	})

	repair := harness.BreakStorage(t, storage)
	callN(4)
	harness.Eventually(t, 5*flush, "the zone to report degraded", func() bool {
		return harness.GetZone(t, p.Admin, zone).QuotaStore.Degraded
	})
	st := harness.GetZone(t, p.Admin, zone).QuotaStore
	if st.LastError == "" || st.Pending == 0 {
		t.Fatalf("degraded store view without error or pending counts: %+v", st)
	}
	if v, ok := harness.Metric(t, p.Admin, `mcp_ratelimit_quota_degraded{zone="q"}`); !ok || v != 1 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v (found %v), want 1", v, ok)
	}
	// Serving continues while degraded, through several failed flushes.
	for range 3 {
		callN(2)
		time.Sleep(flush / 2)
	}
	if !harness.GetZone(t, p.Admin, zone).QuotaStore.Degraded {
		t.Fatal("degraded cleared while the storage is still broken")
	}

	repair()
	// A lock file left behind by a flush interrupted by the breakage goes
	// stale after certmagic's 10s, and a flush waits up to 10s for a lock:
	// on a loaded machine recovery can take a few of those.
	harness.Eventually(t, 45*time.Second, "the zone to recover", func() bool {
		return !harness.GetZone(t, p.Admin, zone).QuotaStore.Degraded
	})
	if st := harness.GetZone(t, p.Admin, zone).QuotaStore; st.Pending != 0 {
		t.Fatalf("after recovery %d entries still pending: %+v", st.Pending, st)
	}
	if v, _ := harness.Metric(t, p.Admin, `mcp_ratelimit_quota_degraded{zone="q"}`); v != 0 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v after recovery, want 0", v)
	}
	if got := harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)); got != admitted {
		t.Fatalf("stored total %d after recovery, %d admitted: counts of the outage were lost", got, admitted)
	}
	if got := int64(backend.ToolCalls()); got != admitted {
		t.Fatalf("backend saw %d, admitted %d", got, admitted)
	}
}

func TestQuotaKillLosesAtMostOneInterval(t *testing.T) {
	skipNearMidnight(t)
	const limit = 20
	const token = "valid-kill"
	p, _, storage := startProven(t, limit, token)
	for range 5 {
		mustCall(t, p, token, "ok")
	}
	harness.Eventually(t, 5*flush, "the first 5 counts to be stored", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)) == 5
	})
	for range 3 {
		mustCall(t, p, token, "ok")
	}
	p.Kill()
	stored := harness.SumIdentities(harness.StoredDayCounts(t, storage, zone))
	t.Logf("stored after kill -9: %d of 8", stored)
	if stored < 5 || stored > 8 {
		t.Fatalf("stored %d after kill -9, want between 5 (flushed before the last interval) and 8", stored)
	}
	// A restart continues from what was flushed: exactly limit-stored
	// more calls pass on this single instance.
	p.Restart(t)
	passed := int64(0)
	for {
		got := call(t, p, token)
		if got != "ok" {
			if got != "quota" {
				t.Fatalf("after restart: refused by %s", got)
			}
			break
		}
		passed++
		if passed > limit {
			t.Fatal("the restarted instance ignores the stored count")
		}
	}
	if passed != limit-stored {
		t.Fatalf("after restart %d calls passed, want limit %d - stored %d", passed, limit, stored)
	}
}

func TestQuotaRestartKeepsRefusingWithoutReproving(t *testing.T) {
	skipNearMidnight(t)
	const limit = 5
	const token = "valid-restart"
	p, backend, storage := startProven(t, limit, token)
	for range limit {
		mustCall(t, p, token, "ok")
	}
	mustCall(t, p, token, "quota")
	// Graceful stop: the final flush stores the counts and the proven
	// identity, even within the first flush interval.
	p.Stop()
	if got := harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)); got != limit {
		t.Fatalf("stored %d after a graceful stop, want %d", got, limit)
	}
	p.Restart(t)
	// No initialize: the identity must still be proven (data.limit quota,
	// not preauth) and exhausted.
	r := harness.Post(t, p.URL+"/mcp", harness.ToolCall(99, "echo", map[string]any{"text": "hi"}), "Authorization", "Bearer "+token)
	if got := outcome(t, r); got != "quota" {
		t.Fatalf("after restart: %s (%d %s), want a quota refusal", got, r.Status, r.Body)
	}
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if got := backend.ToolCalls(); got != limit {
		t.Fatalf("backend saw %d tool calls, want %d", got, limit)
	}
}
