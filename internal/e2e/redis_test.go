package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

const rzone = "r"

// redisSite is a site body deciding zone r in Redis; extra goes inside
// the mcp_ratelimit block.
func redisSite(url, extra string) string {
	return fmt.Sprintf("mcp_ratelimit {\n zone %s\n flush_interval 1s\n store redis %s {\n  timeout 100ms\n }\n %s\n}\nreverse_proxy $BACKEND", rzone, url, extra)
}

// startRedisProcesses starts n Caddy processes on one Redis, each with its
// own storage directory: only Redis is shared.
func startRedisProcesses(t *testing.T, n int, site string) ([]*harness.Process, *harness.Backend) {
	t.Helper()
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	ps := make([]*harness.Process, n)
	for i := range ps {
		ps[i] = harness.StartProcess(t, bin, site, backend.Addr, harness.TempDir(t, "storage"+strconv.Itoa(i)), "")
	}
	return ps, backend
}

// rawCall sends a tools/call and returns the outcome ("ok" or data.limit)
// without a *testing.T, for goroutines.
func rawCall(url, token, tool string, hdr ...string) (string, error) {
	body := harness.ToolCall(1, tool, map[string]any{"text": "hi"})
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := harness.Send(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return "ok", nil
	}
	var rb refusalBody
	if err := json.Unmarshal(b, &rb); err != nil || rb.Error == nil {
		return "", fmt.Errorf("status %d body %s: not a refusal", resp.StatusCode, b)
	}
	return rb.Error.Data.Limit, nil
}

// flood sends per calls to each process at once and counts outcomes.
func flood(t *testing.T, ps []*harness.Process, per int, token string, hdr ...string) map[string]int {
	t.Helper()
	var (
		mu   sync.Mutex
		out  = map[string]int{}
		errs []error
		wg   sync.WaitGroup
	)
	for _, p := range ps {
		for range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := rawCall(p.URL, token, "echo", hdr...)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				out[got]++
			}()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d calls failed: %v", len(errs), errs[0])
	}
	return out
}

// redisEval runs a one-value Lua script on r.
func redisEval(t *testing.T, r *harness.Redis, script string, args ...string) string {
	t.Helper()
	return r.Do(t, append([]string{"EVAL", script, "0"}, args...)...)
}

// reachesRedisOnce waits until the n counts of an outage are in Redis,
// then checks they stay n: pushed once.
func reachesRedisOnce(t *testing.T, r *harness.Redis, n int64) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, "the outage's counts to reach Redis", func() bool {
		return sumQuota(t, r) == n
	})
	time.Sleep(2 * time.Second)
	if got := sumQuota(t, r); got != n {
		t.Fatalf("Redis counts %d, want the outage's %d, once", got, n)
	}
}

// reload loads the Caddyfile cfg into p through its admin endpoint.
func reload(t *testing.T, p *harness.Process, cfg string) {
	t.Helper()
	resp, err := http.Post(p.Admin+"/load", "text/caddyfile", strings.NewReader(cfg))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %d %s", resp.StatusCode, body)
	}
}

// sumQuota sums today's identity quota counters of zone r in Redis.
func sumQuota(t *testing.T, r *harness.Redis) int64 {
	t.Helper()
	return sumQuotaOf(t, r, "i")
}

// sumQuotaOf sums today's quota counters of zone r in Redis whose keys are
// of kind (i for identities, g for groups).
func sumQuotaOf(t *testing.T, r *harness.Redis, kind string) int64 {
	t.Helper()
	s := redisEval(t, r, `local n = 0
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do n = n + tonumber(redis.call('GET', k)) end
return n`, "mcprl:{"+rzone+"}:q:"+kind+"/*:d:"+time.Now().UTC().Format(time.DateOnly))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("quota sum %q", s)
	}
	return n
}

func TestRedisExactAcrossInstances(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	// Tenant: burst 10, refilling once an hour. The "big" plan lifts the
	// tenant bucket, leaving the 25/day quota.
	ps, backend := startRedisProcesses(t, 3, redisSite(r.URL,
		"tenant 1/h burst 10\n quota 25/day\n global off\n tier big {\n  match {http.request.header.X-Plan} big\n  tenant 1000/s burst 1000\n }"))
	for _, tok := range []string{"valid-burst", "valid-quota"} {
		for _, p := range ps {
			prove(t, p, tok)
		}
	}
	t.Run("three instances admit exactly the tenant burst between them", func(t *testing.T) {
		got := flood(t, ps, 10, "valid-burst")
		if got["ok"] != 10 || got["tenant"] != 20 {
			t.Fatalf("outcomes %v, want exactly 10 admitted and 20 tenant refusals", got)
		}
	})
	t.Run("three instances admit exactly the quota between them", func(t *testing.T) {
		got := flood(t, ps, 12, "valid-quota", "X-Plan", "big")
		if got["ok"] != 25 || got["quota"] != 11 {
			t.Fatalf("outcomes %v, want exactly 25 admitted and 11 quota refusals", got)
		}
		if n := sumQuota(t, r); n != 10+25 {
			t.Fatalf("Redis holds %d counts today, want 35", n)
		}
	})
	if got := backend.ToolCalls(); got != 35 {
		t.Fatalf("backend saw %d tool calls, want 35", got)
	}
}

func TestRedisGlobalRefusalLeavesTenantUntouched(t *testing.T) {
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 2, redisSite(r.URL, "tenant 1/h burst 10\n quota off\n global 1/h burst 2"))
	for _, p := range ps {
		prove(t, p, "valid-g")
	}
	// The global bucket is one for all instances: two calls, one on each,
	// spend it.
	mustCall(t, ps[0], "valid-g", "ok")
	mustCall(t, ps[1], "valid-g", "ok")
	for _, p := range ps {
		mustCall(t, p, "valid-g", "global")
	}
	tokens := redisEval(t, r, `local k = redis.call('KEYS', ARGV[1]) return redis.call('HGET', k[1], 'tokens')`, "mcprl:{"+rzone+"}:b:t/*")
	v, err := strconv.ParseFloat(tokens, 64)
	if err != nil {
		t.Fatalf("tenant bucket level %q", tokens)
	}
	if v < 7.99 || v > 8.01 {
		t.Fatalf("tenant bucket holds %v tokens after 2 admitted calls and 2 global refusals, want 8", v)
	}
}

func TestRedisOutageFailsOpenAndPushesCounts(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	ps, backend := startRedisProcesses(t, 1, redisSite(r.URL,
		"tenant 1000/s burst 1000\n quota 1000/day\n tool analyze_photo {\n  fail_closed\n }"))
	p := ps[0]
	prove(t, p, "valid-o")
	for range 3 {
		mustCall(t, p, "valid-o", "ok")
	}
	if n := sumQuota(t, r); n != 3 {
		t.Fatalf("Redis holds %d, want 3", n)
	}
	if harness.GetStore(t, p.Admin, rzone).Degraded {
		t.Fatal("degraded before the outage")
	}

	r.Kill()
	const outage = 6
	for range outage {
		mustCall(t, p, "valid-o", "ok")
	}
	st := harness.GetStore(t, p.Admin, rzone)
	if !st.Degraded || st.LastError == "" || st.Pending == 0 {
		t.Fatalf("store during the outage: %+v, want degraded with an error and pending counts", st)
	}
	if v, ok := harness.Metric(t, p.Admin, `mcp_ratelimit_quota_degraded{zone="r"}`); !ok || v != 1 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v (found %v), want 1", v, ok)
	}
	if v, ok := harness.Metric(t, p.Admin, `mcp_ratelimit_store_errors_total{zone="r"}`); !ok || v < 1 {
		t.Fatalf("mcp_ratelimit_store_errors_total = %v (found %v), want ≥ 1", v, ok)
	}
	// A fail_closed tool is refused with 503 STORE_UNAVAILABLE.
	resp := harness.Post(t, p.URL+"/mcp", harness.ToolCall(5, "analyze_photo", nil), "Authorization", "Bearer valid-o")
	if resp.Status != http.StatusServiceUnavailable || !strings.Contains(string(resp.Body), "STORE_UNAVAILABLE") {
		t.Fatalf("fail_closed tool during the outage: %d %s", resp.Status, resp.Body)
	}

	// Redis returns (empty: it has no persistence here) on the same port:
	// it is raised back to the 3 it held with the outage's calls pushed.
	r.Start(t)
	harness.Eventually(t, 15*time.Second, "the store to recover", func() bool {
		return !harness.GetStore(t, p.Admin, rzone).Degraded
	})
	if st := harness.GetStore(t, p.Admin, rzone); st.Pending != 0 || st.Pushed == 0 {
		t.Fatalf("store after recovery: %+v, want nothing pending", st)
	}
	if n := sumQuota(t, r); n != 3+outage {
		t.Fatalf("Redis holds %d counts after recovery, want the 3 it held and the %d made during the outage", n, outage)
	}
	if v, _ := harness.Metric(t, p.Admin, `mcp_ratelimit_quota_degraded{zone="r"}`); v != 0 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v after recovery", v)
	}
	// Deciding in Redis again: the next call is counted there.
	mustCall(t, p, "valid-o", "ok")
	if n := sumQuota(t, r); n != 3+outage+1 {
		t.Fatalf("Redis holds %d after one more call, want %d", n, 3+outage+1)
	}
	mustCall(t, p, "valid-o", "ok") // fail_closed tools work again too
	if resp := harness.Post(t, p.URL+"/mcp", harness.ToolCall(6, "analyze_photo", nil), "Authorization", "Bearer valid-o"); resp.Status != http.StatusOK {
		t.Fatalf("fail_closed tool after recovery: %d %s", resp.Status, resp.Body)
	}
	if got := backend.ToolCalls(); got != 3+outage+3 {
		t.Fatalf("backend saw %d tool calls, want %d", got, 3+outage+3)
	}
}

func TestRedisFloodOfRefusalsStaysLocal(t *testing.T) {
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 1, redisSite(r.URL, "tenant 1/h burst 2\n quota off\n global off"))
	p := ps[0]
	prove(t, p, "valid-f")
	mustCall(t, p, "valid-f", "ok")
	mustCall(t, p, "valid-f", "ok")
	before := r.Calls(t)
	const n = 100
	for range n {
		mustCall(t, p, "valid-f", "tenant")
	}
	cmds := harness.CallsBetween(before, r.Calls(t))
	t.Logf("%d refused calls cost %d Redis commands", n, cmds)
	if cmds > 5 {
		t.Fatalf("%d refused calls of one key cost %d Redis commands, want at most a handful (≤ 5: the script and the commands it runs)", n, cmds)
	}
	if v, ok := harness.Metric(t, p.Admin, `mcp_ratelimit_store_local_hits_total{zone="r"}`); !ok || v < n-1 {
		t.Fatalf("mcp_ratelimit_store_local_hits_total = %v (found %v), want ≥ %d", v, ok, n-1)
	}
}

// provenOnRedis starts n instances sharing only a Redis store, with extra
// in their mcp_ratelimit blocks, and proves token on each.
func provenOnRedis(t *testing.T, n int, extra, token string) ([]*harness.Process, *harness.Backend, *harness.Redis) {
	t.Helper()
	r := harness.StartRedis(t)
	ps, backend := startRedisProcesses(t, n, redisSite(r.URL, extra))
	for _, p := range ps {
		prove(t, p, token)
	}
	return ps, backend, r
}

// twoProvenOnRedis starts two instances sharing only a Redis store (tenant
// 1/h burst 10, quota 100/day) and proves token on both.
func twoProvenOnRedis(t *testing.T, token string) ([]*harness.Process, *harness.Redis) {
	t.Helper()
	ps, _, r := provenOnRedis(t, 2, "tenant 1/h burst 10\n quota 100/day", token)
	return ps, r
}

func TestRedisRateLimitHeadersCountEveryInstancesCalls(t *testing.T) {
	skipNearMidnight(t)
	ps, _ := twoProvenOnRedis(t, "valid-headers")
	for range 3 {
		mustCall(t, ps[1], "valid-headers", "ok")
	}
	// The 4th call, on the other instance, sees the 3 made on the first.
	resp := harness.Post(t, ps[0].URL+"/mcp", harness.ToolCall(4, "echo", map[string]any{"text": "hi"}), "Authorization", "Bearer valid-headers")
	rl := resp.Header.Get("RateLimit")
	if resp.Status != http.StatusOK || !strings.Contains(rl, `"tenant";r=6;`) || !strings.Contains(rl, `"quota-day";r=96;`) {
		t.Fatalf("RateLimit %q (status %d), want tenant r=6 and quota-day r=96 as Redis counts them", rl, resp.Status)
	}
}

// Refusals decided by Redis carry Redis's levels too, never the idle
// local state's: the refused layer used up, the others as Redis holds
// them. A refusal answered locally (a known refusal, no round trip) keeps
// the refused layer's level and leaves out what it does not know.
func TestRedisRefusalsCarryRedisRateLimitValues(t *testing.T) {
	skipNearMidnight(t)
	rateLimit := func(p *harness.Process, token, wantLimit string) string {
		t.Helper()
		resp := harness.Post(t, p.URL+"/mcp", harness.ToolCall(9, "echo", map[string]any{"text": "hi"}), "Authorization", "Bearer "+token)
		if resp.Status != http.StatusTooManyRequests || !strings.Contains(string(resp.Body), `"limit":"`+wantLimit+`"`) {
			t.Fatalf("status %d %s, want a %s refusal", resp.Status, resp.Body, wantLimit)
		}
		return resp.Header.Get("RateLimit")
	}
	t.Run("tenant", func(t *testing.T) {
		ps, _ := twoProvenOnRedis(t, "valid-rt")
		for i := range 10 {
			mustCall(t, ps[i%2], "valid-rt", "ok")
		}
		if rl := rateLimit(ps[0], "valid-rt", "tenant"); !strings.Contains(rl, `"tenant";r=0;`) || !strings.Contains(rl, `"quota-day";r=90;`) {
			t.Fatalf("refusal by Redis: RateLimit %q, want tenant r=0 and quota-day r=90", rl)
		}
		rl := rateLimit(ps[0], "valid-rt", "tenant")
		if !strings.Contains(rl, `"tenant";r=0;`) || strings.Contains(rl, "quota-day") {
			t.Fatalf("known refusal: RateLimit %q, want tenant r=0 and no guess for the quota", rl)
		}
	})
	t.Run("quota", func(t *testing.T) {
		r := harness.StartRedis(t)
		ps, _ := startRedisProcesses(t, 2, redisSite(r.URL, "tenant 1/h burst 10\n quota 3/day"))
		for i, p := range ps {
			prove(t, p, "valid-rq")
			mustCall(t, p, "valid-rq", "ok")
			if i == 0 {
				mustCall(t, p, "valid-rq", "ok")
			}
		}
		if rl := rateLimit(ps[0], "valid-rq", "quota"); !strings.Contains(rl, `"tenant";r=7;`) || !strings.Contains(rl, `"quota-day";r=0;`) {
			t.Fatalf("refusal by Redis: RateLimit %q, want tenant r=7 and quota-day r=0", rl)
		}
		rl := rateLimit(ps[0], "valid-rq", "quota")
		if !strings.Contains(rl, `"quota-day";r=0;`) || strings.Contains(rl, "tenant") {
			t.Fatalf("known refusal: RateLimit %q, want quota-day r=0 and no guess for the tenant", rl)
		}
	})
}

// redisFingerprint returns the fingerprint of the one identity that has a
// quota count in zone r today, as Redis names its quota key.
func redisFingerprint(t *testing.T, r *harness.Redis) string {
	t.Helper()
	key := redisEval(t, r, `return redis.call('KEYS', ARGV[1])[1]`, "mcprl:{"+rzone+"}:q:i/*:d:*")
	return strings.TrimSuffix(strings.TrimPrefix(key, "mcprl:{"+rzone+"}:q:i/"), ":d:"+time.Now().UTC().Format(time.DateOnly))
}

// With store redis the handler fingerprints under the key in Redis, which
// is not the one in each instance's own storage: the fingerprint command
// must print what the handler uses, whichever instance's config it reads.
// Should Redis lose the key, the command run first offers it the key the
// instances use (as they do), not its storage's, which would become every
// instance's key and change every fingerprint.
func TestRedisFingerprintCommandUsesTheKeyInRedis(t *testing.T) {
	skipNearMidnight(t)
	ps, r := twoProvenOnRedis(t, "valid-fp")
	mustCall(t, ps[0], "valid-fp", "ok")
	want := redisFingerprint(t, r)
	command := func(p *harness.Process) string {
		out := p.Exec(t, "Bearer valid-fp\n", "mcp-ratelimit", "fingerprint", "--zone", rzone, "--config", "{config}", "--adapter", "caddyfile")
		return strings.TrimSpace(out)
	}
	for i, p := range ps {
		if got := command(p); got != want {
			t.Errorf("instance %d: the command printed %q; the handler uses %s", i, got, want)
		}
	}
	r.Do(t, "FLUSHALL")
	if got := command(ps[1]); got != want { // its storage holds another key
		t.Fatalf("after Redis lost the key the command printed %q, want %s", got, want)
	}
	mustCall(t, ps[0], "valid-fp", "ok")
	if got := redisFingerprint(t, r); got != want {
		t.Fatalf("after Redis lost the key the handler fingerprints %s, want %s", got, want)
	}
}

func TestRedisAdminIdentityViewShowsEveryInstancesUse(t *testing.T) {
	skipNearMidnight(t)
	ps, r := twoProvenOnRedis(t, "valid-admin")
	for range 2 {
		mustCall(t, ps[0], "valid-admin", "ok")
	}
	for range 3 {
		mustCall(t, ps[1], "valid-admin", "ok")
	}
	fp := redisFingerprint(t, r)
	// Instance 0 shows the 5 calls of both instances, not its own 2.
	resp, err := http.Get(ps[0].Admin + "/mcp_ratelimit/" + rzone + "/identities/" + fp)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var id struct {
		Source         string           `json:"source"`
		QuotaUsed      map[string]int64 `json:"quota_used"`
		TenantTokens   *float64         `json:"tenant_tokens"`
		TenantTokensAt string           `json:"tenant_tokens_at"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&id); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("identity view of %s: %d, %v", fp, resp.StatusCode, err)
	}
	if id.Source != "redis" || id.QuotaUsed["day"] != 5 {
		t.Fatalf("identity view %+v, want source redis and day 5 (both instances' calls)", id)
	}
	if at, err := time.Parse(time.RFC3339Nano, id.TenantTokensAt); id.TenantTokens == nil || *id.TenantTokens < 4.9 || *id.TenantTokens > 5.1 ||
		err != nil || time.Since(at).Abs() > time.Minute {
		t.Fatalf("tenant bucket %v at %q, want 5 of 10 left as of the last call", id.TenantTokens, id.TenantTokensAt)
	}
}

// An instance that starts while Redis is unreachable fingerprints under
// the key in its own storage; when Redis returns it must adopt the key
// every other instance uses there, or each instance would hand out its
// own allowance.
func TestRedisInstanceStartedDuringAnOutageAdoptsTheSharedKey(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	r.Kill()
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	site := redisSite(r.URL, "tenant 1/h burst 4\n quota 100/day")
	a := harness.StartProcess(t, bin, site, backend.Addr, harness.TempDir(t, "storageA"), "")
	r.Start(t)
	b := harness.StartProcess(t, bin, site, backend.Addr, harness.TempDir(t, "storageB"), "")
	harness.Eventually(t, 30*time.Second, "instance A to decide in Redis again", func() bool {
		return !harness.GetStore(t, a.Admin, rzone).Degraded
	})
	for _, p := range []*harness.Process{a, b} {
		prove(t, p, "valid-outage-key")
	}
	for i := range 4 {
		mustCall(t, []*harness.Process{a, b}[i%2], "valid-outage-key", "ok")
	}
	// One burst of 4 for both instances, as Redis holds one bucket.
	for _, p := range []*harness.Process{a, b} {
		mustCall(t, p, "valid-outage-key", "tenant")
	}
	if keys := redisEval(t, r, `return #redis.call('KEYS', ARGV[1])`, "mcprl:{"+rzone+"}:b:t/*"); keys != "1" {
		t.Fatalf("%s tenant buckets in Redis for one token, want 1: the instances fingerprint differently", keys)
	}
}

// A zone that gains `store redis` on a reload fingerprints under the key
// the other instances already keep in Redis, not its own.
func TestRedisStoreAddedOnReloadAdoptsTheSharedKey(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	const sharedKey = "0123456789abcdef0123456789abcdef" // stored by another instance
	r.Do(t, "SET", "mcprl:{"+rzone+"}:fpkey", sharedKey)
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	p := harness.StartProcess(t, bin, fmt.Sprintf("mcp_ratelimit {\n zone %s\n}\nreverse_proxy $BACKEND", rzone), backend.Addr, storage, "")
	cfg := harness.Config(redisSite(r.URL, "tenant 1/h burst 4"), backend.Addr, p.Port, p.AdminPort, storage, "")
	reload(t, p, cfg)
	prove(t, p, "valid-reload")
	mustCall(t, p, "valid-reload", "ok")
	m := hmac.New(sha256.New, []byte(sharedKey))
	m.Write([]byte("Bearer valid-reload"))
	fp := hex.EncodeToString(m.Sum(nil)[:16])
	if n := redisEval(t, r, `return #redis.call('KEYS', ARGV[1])`, "mcprl:{"+rzone+"}:b:t/"+fp); n != "1" {
		t.Fatalf("no tenant bucket under the fingerprint of the shared key (%s); keys: %s", fp,
			redisEval(t, r, `return table.concat(redis.call('KEYS', ARGV[1]), ' ')`, "mcprl:{"+rzone+"}:*"))
	}
	// The shared key replaces the one in Caddy storage: a restart without
	// the store fingerprints as the store did.
	harness.Eventually(t, 10*time.Second, "the shared key in Caddy storage", func() bool {
		key, _ := os.ReadFile(filepath.Join(storage, "mcp_ratelimit", rzone, "fingerprint.key"))
		return string(key) == sharedKey
	})
}

// threeCallsInAnOutage starts one instance on a Redis store (tenant 1/h
// burst 10, quota 100/day), proves token, stops Redis and makes three
// calls, which the instance decides and counts locally.
func threeCallsInAnOutage(t *testing.T, token string) (*harness.Redis, *harness.Process) {
	t.Helper()
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 1, redisSite(r.URL, "tenant 1/h burst 10\n quota 100/day"))
	p := ps[0]
	prove(t, p, token)
	r.Kill()
	for range 3 {
		mustCall(t, p, token, "ok") // decided locally while Redis is down
	}
	return r, p
}

// Counts an outage left are pushed once: after Redis took them, the host's
// copy of them is gone, so a restart finds nothing to push again.
func TestRedisOutageCountsPushedLeaveNothingForARestart(t *testing.T) {
	skipNearMidnight(t)
	r, p := threeCallsInAnOutage(t, "valid-pushed-restart")
	r.Start(t)
	reachesRedisOnce(t, r, 3)
	p.Restart(t)
	reachesRedisOnce(t, r, 3)
}

// A call decided locally during a Redis outage that a layer after the
// quota refuses (the global bucket) takes its count back: only the
// admitted calls are pushed when Redis returns.
func TestRedisOutageRefusedCallsAreNotPushed(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 1, redisSite(r.URL, "tenant 1/h burst 10\n quota 100/day\n global 1/h burst 3"))
	p := ps[0]
	prove(t, p, "valid-outage-global")
	r.Kill()
	for range 3 {
		mustCall(t, p, "valid-outage-global", "ok")
	}
	for range 2 {
		mustCall(t, p, "valid-outage-global", "global")
	}
	r.Start(t)
	reachesRedisOnce(t, r, 3)
}

// Counts made during a Redis outage that the instance could not push
// before it stopped are saved in Caddy storage and pushed by its next
// start once Redis answers: "nothing lost" holds across a restart. The
// start that takes them removes them from storage, so a later start does
// not push them again.
func TestRedisOutageCountsSurviveARestart(t *testing.T) {
	skipNearMidnight(t)
	r, p := threeCallsInAnOutage(t, "valid-restart")
	p.Restart(t) // Redis still down: the counts cannot be pushed at shutdown
	r.Start(t)   // back, and empty: persistence is off
	reachesRedisOnce(t, r, 3)
	p.Restart(t)
	reachesRedisOnce(t, r, 3)
}

// The global bucket in Redis is one for all instances and all callers:
// unproven ones too, once they have paid their address's pre-auth token.
// Garbage credentials, alternating between two instances, get 3 calls to
// the backend between them against a global burst of 3, not 3 each.
func TestRedisGlobalBucketIsSharedByUnprovenCallers(t *testing.T) {
	r := harness.StartRedis(t)
	ps, _ := startRedisProcesses(t, 2, redisSite(r.URL, "preauth 100/s burst 100\n tenant off\n quota off\n global 1/h burst 3"))
	for i := range 6 {
		p := ps[i%2]
		resp := harness.Post(t, p.URL+"/mcp", harness.ToolCall(i, "echo", map[string]any{"text": "hi"}), "Authorization", "Bearer garbage-"+strconv.Itoa(i))
		want := http.StatusUnauthorized // the backend's answer
		if i >= 3 {
			want = http.StatusTooManyRequests
		}
		if resp.Status != want || want == http.StatusTooManyRequests && !strings.Contains(string(resp.Body), "GLOBAL_RATE_LIMITED") {
			t.Fatalf("unproven call %d on instance %d: %d %s, want %d", i+1, i%2, resp.Status, resp.Body, want)
		}
	}
}

// An identity that used its quota through one instance is refused by
// another that never saw it: its first call there, unproven, is charged
// in Redis to the quotas Redis holds a count of, as a forgotten identity's
// is. A garbage credential's call leaves no count behind.
func TestRedisQuotaUsedElsewhereHoldsForAnUnprovenCall(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	ps, backend := startRedisProcesses(t, 2, redisSite(r.URL, "preauth 100/s burst 100\n tenant 100/s burst 100\n quota 3/day\n global off"))
	prove(t, ps[0], "valid-elsewhere")
	for range 3 {
		mustCall(t, ps[0], "valid-elsewhere", "ok")
	}
	mustCall(t, ps[1], "valid-elsewhere", "quota")
	// Another identity's first call on the second instance is charged in
	// Redis, and the 2xx that proves it there does not count it twice.
	prove(t, ps[0], "valid-elsewhere-2")
	mustCall(t, ps[0], "valid-elsewhere-2", "ok")
	mustCall(t, ps[1], "valid-elsewhere-2", "ok") // unproven on ps[1]
	mustCall(t, ps[1], "valid-elsewhere-2", "ok")
	mustCall(t, ps[1], "valid-elsewhere-2", "quota")
	if got := backend.ToolCalls(); got != 6 {
		t.Fatalf("backend saw %d tool calls, want the two quotas' 6", got)
	}
	resp := harness.Post(t, ps[1].URL+"/mcp", harness.ToolCall(9, "echo", map[string]any{"text": "hi"}), "Authorization", "Bearer garbage-elsewhere")
	if resp.Status != http.StatusUnauthorized {
		t.Fatalf("garbage credential's call: %d %s, want the backend's 401", resp.Status, resp.Body)
	}
	if n := sumQuota(t, r); n != 6 {
		t.Fatalf("Redis holds %d identity counts, want the 6 admitted calls' only", n)
	}
}

// In dry run every layer decides as usual with Redis too, and a request a
// layer would refuse takes nothing from the others, as enforcement would
// have refused it whole. Tenant burst 2, quota 3/day: calls 3 and 4 would
// be tenant refusals, so the quota counts only calls 1 and 2 and refuses
// nothing — as without Redis.
func TestRedisDryRunDecidesEveryLayer(t *testing.T) {
	skipNearMidnight(t)
	ps, backend, r := provenOnRedis(t, 1, "tenant 1/h burst 2\n quota 3/day\n global off\n dry_run", "valid-dry")
	p := ps[0]
	for range 4 {
		mustCall(t, p, "valid-dry", "ok")
	}
	if got := backend.ToolCalls(); got != 4 {
		t.Fatalf("backend saw %d tool calls, want all 4 admitted in dry run", got)
	}
	for layer, want := range map[string]float64{"tenant": 2, "quota": 0} {
		v, _ := harness.Metric(t, p.Admin, `mcp_ratelimit_dry_run_refusals_total{layer="`+layer+`",zone="r"}`)
		if v != want {
			t.Errorf("dry-run %s refusals = %v, want %v", layer, v, want)
		}
	}
	if n := sumQuota(t, r); n != 2 {
		t.Fatalf("Redis holds %d quota counts, want 2: the would-be tenant refusals count nothing", n)
	}
}

// A body rule's refusal (an arg bound) is decided before Redis is asked,
// so it names the policies without their levels: the idle local buckets
// would claim a full burst that Redis does not hold.
func TestRedisArgRefusalClaimsNoLocalLevels(t *testing.T) {
	skipNearMidnight(t)
	ps, _, _ := provenOnRedis(t, 1, "tenant 1/h burst 5\n quota 9/day\n global off\n tool echo {\n  arg limit max 5\n }", "valid-argrl")
	p := ps[0]
	for range 2 {
		mustCall(t, p, "valid-argrl", "ok")
	}
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"limit":50}}}`
	r := harness.Post(t, p.URL+"/mcp", body, "Authorization", "Bearer valid-argrl")
	if r.Status != http.StatusBadRequest {
		t.Fatalf("call over the arg bound: %d %s, want 400", r.Status, r.Body)
	}
	if v := r.Header.Get("RateLimit"); v != "" {
		t.Errorf("RateLimit %q on an arg refusal in Redis mode, want none (Redis was not asked)", v)
	}
	if v := r.Header.Get("RateLimit-Policy"); !strings.Contains(v, `"tenant";q=5`) {
		t.Errorf("RateLimit-Policy %q, want the tenant policy named", v)
	}
}

// A call a layer would refuse in dry run is forwarded with the levels
// Redis found, as enforcement's refusal reports them: what the other
// layers took was given back, so they stand there, and the refusing
// bucket's t is the refusal's Retry-After (one token, not two).
func TestRedisDryRunWouldBeRefusalCarriesRedisLevels(t *testing.T) {
	skipNearMidnight(t)
	ps, _, _ := provenOnRedis(t, 1, "tenant 1/h burst 2\n quota 10/day\n global off\n dry_run", "valid-dryrl")
	p := ps[0]
	for i := range 3 {
		r := harness.Post(t, p.URL+"/mcp", harness.ToolCall(i, "echo", map[string]any{"text": "x"}), "Authorization", "Bearer valid-dryrl")
		if r.Status != http.StatusOK {
			t.Fatalf("call %d in dry run: %d %s", i, r.Status, r.Body)
		}
		tenant, quota := fmt.Sprintf(`"tenant";r=%d;`, max(1-i, 0)), fmt.Sprintf(`"quota-day";r=%d;`, 10-min(i+1, 2))
		if i == 2 {
			tenant += "t=3600,"
		}
		if v := r.Header.Get("RateLimit"); !strings.Contains(v, tenant) || !strings.Contains(v, quota) {
			t.Errorf("call %d: RateLimit %q, want %s and %s (two calls counted)", i, v, tenant, quota)
		}
	}
}

// Redis reports the first item that does not fit; the refusal still names
// the layer that holds the call back longest, from the levels Redis
// returns: an exhausted quota behind an empty tenant bucket.
func TestRedisRefusalNamesTheLongestWait(t *testing.T) {
	skipNearMidnight(t)
	ps, _, _ := provenOnRedis(t, 1, "tenant 1/s burst 3\n quota 3/day\n global off", "valid-longest")
	p := ps[0]
	for range 3 {
		mustCall(t, p, "valid-longest", "ok")
	}
	mustCall(t, p, "valid-longest", "quota")
}

// In dry run with Redis each layer is counted once per request, as without
// Redis: a quota per day and per month is one layer.
func TestRedisDryRunCountsEachQuotaLayerOnce(t *testing.T) {
	skipNearMidnight(t)
	ps, _, _ := provenOnRedis(t, 1, "tenant 100/s burst 100\n quota 2/day\n quota 2/month\n tool echo {\n  quota 2/day\n  quota 2/month\n }\n dry_run", "valid-dryq")
	p := ps[0]
	for range 4 {
		mustCall(t, p, "valid-dryq", "ok")
	}
	for _, layer := range []string{"quota", "tool_quota"} {
		if v, _ := harness.Metric(t, p.Admin, `mcp_ratelimit_dry_run_refusals_total{layer="`+layer+`",zone="r"}`); v != 2 {
			t.Errorf("dry-run %s refusals after 2 calls over it = %v, want 2", layer, v)
		}
	}
}

// An instance with storage of its own restarted while Redis is unreachable
// keeps fingerprinting with Redis's key, which it cached on its host when
// it adopted it: the counts it makes meanwhile go to the tenant's one
// fingerprint when Redis returns, not to one no instance uses.
func TestRedisRestartDuringAnOutageKeepsRedisKey(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	site := redisSite(r.URL, "tenant 1/h burst 10\n quota 100/day")
	harness.StartProcess(t, bin, site, backend.Addr, harness.TempDir(t, "storageA"), "") // seeds Redis's key
	b := harness.StartProcess(t, bin, site, backend.Addr, harness.TempDir(t, "storageB"), "")
	prove(t, b, "valid-cached-key")
	mustCall(t, b, "valid-cached-key", "ok")
	r.Pause(t)
	b.Restart(t)
	prove(t, b, "valid-cached-key")
	for range 2 {
		mustCall(t, b, "valid-cached-key", "ok") // decided locally
	}
	r.Resume(t)
	harness.Eventually(t, 30*time.Second, "the outage's counts to reach Redis", func() bool {
		return sumQuota(t, r) == 3
	})
	if keys := redisEval(t, r, `return #redis.call('KEYS', ARGV[1])`, "mcprl:{"+rzone+"}:q:i/*"); keys != "1" {
		t.Fatalf("the tenant's counts are under %s fingerprints, want 1", keys)
	}
}

// A refusal by a local layer (here the identity's concurrency cap) asks
// what the instance knows of Redis too: while Redis's global bucket is
// known to need a minute, "retry in 1s" would be a lie.
func TestRedisLocalRefusalNamesAKnownRedisWait(t *testing.T) {
	ps, _, _ := provenOnRedis(t, 1, "tenant 100/s burst 100\n quota off\n global 1/m burst 3\n concurrency 10 per_identity 1\n preauth 100/s burst 100", "valid-known")
	p := ps[0]
	prove(t, p, "valid-other")
	slow := make(chan int, 1)
	go func() {
		slow <- harness.Post(t, p.URL+"/mcp", harness.ToolCall(1, "slow", map[string]any{"millis": 3000}), "Authorization", "Bearer valid-known").Status
	}()
	harness.Eventually(t, 5*time.Second, "the slow call to be in flight", func() bool {
		n, _ := harness.Metric(t, p.Admin, `mcp_ratelimit_inflight{zone="`+rzone+`"}`)
		return n == 1
	})
	for range 2 {
		mustCall(t, p, "valid-other", "ok")
	}
	mustCall(t, p, "valid-other", "global") // Redis refuses: now known here
	if got := call(t, p, "valid-known"); got != "global" {
		t.Fatalf("a call over its identity's concurrency cap while Redis's global bucket is known empty: %s, want the global refusal", got)
	}
	if st := <-slow; st != http.StatusOK {
		t.Fatalf("the slow call: %d", st)
	}
}

// A request costing more than the tenant's burst never fits as sent; with
// Redis too, its refusal names the wait until a request of the burst's
// size fits, by the level Redis reports, not an hour.
func TestRedisNeverFittingRequestNamesTheWaitForTheBurst(t *testing.T) {
	ps, _, _ := provenOnRedis(t, 1, "tenant 1/s burst 3\n quota off\n global off\n cost big 5", "valid-never")
	p := ps[0]
	big := func() (retryAfter string, maxPerRequest int) {
		t.Helper()
		r := harness.Post(t, p.URL+"/mcp", harness.ToolCall(1, "big", nil), "Authorization", "Bearer valid-never")
		var b refusalAnswer
		if err := json.Unmarshal(r.Body, &b); err != nil || b.Error == nil || b.Error.Data.Limit != "tenant" || r.Status != http.StatusTooManyRequests {
			t.Fatalf("a call costing 5 against burst 3: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("Retry-After"), b.Error.Data.MaxPerRequest
	}
	if ra, max := big(); ra != "1" || max != 3 {
		t.Fatalf("full bucket: Retry-After %s, maxPerRequest %d; want 1 and 3", ra, max)
	}
	for range 3 {
		mustCall(t, p, "valid-never", "ok")
	}
	if ra, _ := big(); ra != "3" && ra != "2" { // 3 tokens at 1/s, less what refilled meanwhile
		t.Fatalf("drained bucket: Retry-After %s, want the 2-3 s until 3 tokens are back", ra)
	}
}

// refusalAnswer is the part of a refusal's JSON-RPC error these tests read.
type refusalAnswer struct {
	Error *struct {
		Message string `json:"message"`
		Data    struct {
			Limit         string `json:"limit"`
			MaxPerRequest int    `json:"maxPerRequest"`
		} `json:"data"`
	} `json:"error"`
}

// A request over the tenant's burst, while the quota has less left than
// the burst, is told what fits both: the quota's remainder, not the burst.
func TestRedisNeverFittingRequestNamesWhatTheQuotaHasLeft(t *testing.T) {
	ps, _, _ := provenOnRedis(t, 1, "tenant 1/s burst 3\n quota 4/day\n global off\n cost big 5", "valid-neverleft")
	p := ps[0]
	for range 2 {
		mustCall(t, p, "valid-neverleft", "ok")
	}
	r := harness.Post(t, p.URL+"/mcp", harness.ToolCall(1, "big", nil), "Authorization", "Bearer valid-neverleft")
	var b refusalAnswer
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Error == nil || r.Status != http.StatusTooManyRequests {
		t.Fatalf("a call costing 5 against burst 3 and 2 left of the quota: %d %s", r.Status, r.Body)
	}
	if b.Error.Data.Limit != "tenant" || b.Error.Data.MaxPerRequest != 2 || !strings.Contains(b.Error.Message, "never be admitted") {
		t.Fatalf("want the tenant's never-as-sent refusal with maxPerRequest 2 (the quota's remainder): %s", r.Body)
	}
}

// A fail_closed tool refused while Redis is unreachable is told to retry
// when the store may be back: at Redis's next probe, not after a flush
// interval of the storage it does not use; and after that wait it passes.
func TestRedisStoreUnavailableNamesTheNextProbe(t *testing.T) {
	r := harness.StartRedis(t)
	site := fmt.Sprintf("mcp_ratelimit {\n zone %s\n flush_interval 30s\n store redis %s {\n  timeout 100ms\n }\n tool analyze_photo {\n  fail_closed\n }\n}\nreverse_proxy $BACKEND", rzone, r.URL)
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	p := harness.StartProcess(t, bin, site, backend.Addr, harness.TempDir(t, "storage"), "")
	prove(t, p, "valid-probe")
	r.Kill()
	mustCall(t, p, "valid-probe", "ok") // finds Redis gone: degraded
	photo := func() (int, string) {
		resp := harness.Post(t, p.URL+"/mcp", harness.ToolCall(5, "analyze_photo", nil), "Authorization", "Bearer valid-probe")
		return resp.Status, resp.Header.Get("Retry-After")
	}
	status, ra := photo()
	wait, _ := strconv.Atoi(ra)
	if status != http.StatusServiceUnavailable || wait < 1 || wait > 6 {
		t.Fatalf("fail_closed tool during the outage: %d, Retry-After %q; want 503 within Redis's probe backoff (≤ 6s), not the 30s flush interval", status, ra)
	}
	r.Start(t)
	status, ra = photo()
	wait, _ = strconv.Atoi(ra)
	if status == http.StatusOK {
		return // the probe came first
	}
	time.Sleep(time.Duration(wait)*time.Second + 300*time.Millisecond)
	if status, _ := photo(); status != http.StatusOK {
		t.Fatalf("fail_closed tool %ds after its Retry-After, with Redis back: %d", wait, status)
	}
}

// A reload that adds `store redis` to a running zone carries the quota
// counts of the current period to Redis: a tenant does not get its quota
// afresh because the decision moved.
func TestRedisStoreAddedOnReloadKeepsTheQuotaSpent(t *testing.T) {
	skipNearMidnight(t)
	r := harness.StartRedis(t)
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	p := harness.StartProcess(t, bin, fmt.Sprintf("mcp_ratelimit {\n zone %s\n quota 5/day\n}\nreverse_proxy $BACKEND", rzone), backend.Addr, storage, "")
	prove(t, p, "valid-seed")
	for range 3 {
		mustCall(t, p, "valid-seed", "ok")
	}
	cfg := harness.Config(redisSite(r.URL, "quota 5/day"), backend.Addr, p.Port, p.AdminPort, storage, "")
	reload(t, p, cfg)
	mustCall(t, p, "valid-seed", "ok")
	mustCall(t, p, "valid-seed", "ok")
	mustCall(t, p, "valid-seed", "quota")
	if n := sumQuota(t, r); n != 5 {
		t.Fatalf("Redis holds %d for the day, want the 3 counted locally and the 2 since", n)
	}
}

// A reload that moves `store redis` to another Redis carries the counts
// there too, those the old Redis reported included: the new one holds
// none of them, and a tenant must not get its quota afresh.
func TestRedisStoreMovedOnReloadKeepsTheQuotaSpent(t *testing.T) {
	skipNearMidnight(t)
	first, second := harness.StartRedis(t), harness.StartRedis(t)
	backend := harness.StartBackend(t)
	storage := harness.TempDir(t, "storage")
	p := harness.StartProcess(t, harness.BuildCaddy(t), redisSite(first.URL, "quota 5/day"), backend.Addr, storage, "")
	prove(t, p, "valid-moved")
	for range 3 {
		mustCall(t, p, "valid-moved", "ok")
	}
	reload(t, p, harness.Config(redisSite(second.URL, "quota 5/day"), backend.Addr, p.Port, p.AdminPort, storage, ""))
	if n := sumQuota(t, second); n != 3 {
		t.Fatalf("the new Redis holds %d for the day, want the 3 counted in the old one", n)
	}
	mustCall(t, p, "valid-moved", "ok")
	mustCall(t, p, "valid-moved", "ok")
	mustCall(t, p, "valid-moved", "quota")
}

// A crash during a Redis outage loses at most a second of the counts made
// locally: they are kept on the host as they are made, taken back by the
// next start there and pushed once Redis answers, and only once.
func TestRedisOutageCountsSurviveACrash(t *testing.T) {
	skipNearMidnight(t)
	r, p := threeCallsInAnOutage(t, "valid-crash")
	time.Sleep(2500 * time.Millisecond) // more than the second between copies
	p.Kill()                            // no graceful stop: nothing saved at shutdown
	r.Start(t)
	p.Restart(t)
	reachesRedisOnce(t, r, 3)
}

// Should Redis lose the fingerprint key (eviction, a restart without
// persistence), a running instance stores its own again within seconds,
// so an instance started later computes the same fingerprints.
func TestRedisLostFingerprintKeyIsStoredAgain(t *testing.T) {
	ps, backend, r := provenOnRedis(t, 1, "tenant 100/s burst 100\n quota 4/day", "valid-lostkey")
	key := "mcprl:{" + rzone + "}:fpkey"
	before := r.Do(t, "GET", key)
	if before == "" {
		t.Fatal("no fingerprint key in Redis")
	}
	mustCall(t, ps[0], "valid-lostkey", "ok")
	mustCall(t, ps[0], "valid-lostkey", "ok")
	r.Do(t, "DEL", key)
	harness.Eventually(t, 15*time.Second, "the fingerprint key stored again", func() bool {
		return r.Do(t, "GET", key) == before
	})
	// An instance started now shares the quota of the first.
	late := harness.StartProcess(t, harness.BuildCaddy(t), redisSite(r.URL, "tenant 100/s burst 100\n quota 4/day"), backend.Addr, harness.TempDir(t, "late"), "")
	prove(t, late, "valid-lostkey")
	mustCall(t, late, "valid-lostkey", "ok")
	mustCall(t, late, "valid-lostkey", "ok")
	mustCall(t, late, "valid-lostkey", "quota")
}

// A request costing more than the quota has left is told what is left,
// from Redis's counts (every instance's calls). Answered again from
// memory, the refusal stands but claims nothing about what fits now: the
// remembered count may be stale.
func TestRedisQuotaRefusalSaysWhatIsLeft(t *testing.T) {
	skipNearMidnight(t)
	ps, _, _ := provenOnRedis(t, 2, "tenant off\n quota 3/day\n global off\n cost photo 2", "valid-left")
	mustCall(t, ps[0], "valid-left", "ok")
	mustCall(t, ps[1], "valid-left", "ok")
	for i := range 2 { // decided in Redis, then remembered locally
		r := harness.Post(t, ps[0].URL+"/mcp", harness.ToolCall(1, "photo", nil), "Authorization", "Bearer valid-left")
		var b refusalAnswer
		wantMax := 1
		if i == 1 {
			wantMax = 0
		}
		if err := json.Unmarshal(r.Body, &b); err != nil || b.Error == nil || b.Error.Data.Limit != "quota" ||
			b.Error.Data.MaxPerRequest != wantMax || !strings.Contains(b.Error.Message, "more than the 1 left") {
			t.Fatalf("refusal %d of a call costing 2 with 1 of 3 left: %d %s", i, r.Status, r.Body)
		}
	}
	mustCall(t, ps[0], "valid-left", "ok")
	mustCall(t, ps[1], "valid-left", "quota")
}
