package mcplimit_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// keys returns the sorted keys of m.
func adminKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// wantKeys fails unless m has at least the given keys.
func wantKeys(t *testing.T, what string, m map[string]any, want ...string) {
	t.Helper()
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q (has %v)", what, k, adminKeys(m))
		}
	}
}

func TestAdminAPIShape(t *testing.T) {
	e := start(t, "zone adm\npreauth 1/m burst 2\ntenant 1/m burst 1\nquota 100/day")
	e.prove("valid-adm")
	if r := e.call(1, "Authorization", "Bearer valid-adm"); r.Status != http.StatusOK {
		t.Fatalf("call: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(2, "Authorization", "Bearer valid-adm"), http.StatusTooManyRequests, "tenant")
	e.call(3)
	refusal(t, e.call(4), http.StatusTooManyRequests, "preauth")

	z := adminZone(t, e.caddy, "adm")
	wantKeys(t, "zone", z, "limits", "tracked", "refusals", "dry_run_refusals", "admitted", "inflight", "upstream_throttled", "quota_store")
	layers := []string{"preauth", "tenant", "group", "quota", "group_quota", "tool_quota", "global", "concurrency", "anonymous", "store"}
	for _, field := range []string{"refusals", "dry_run_refusals"} {
		m, ok := z[field].(map[string]any)
		if !ok {
			t.Fatalf("%s is %T", field, z[field])
		}
		wantKeys(t, field, m, layers...)
	}
	refusals := z["refusals"].(map[string]any)
	if refusals["tenant"] != float64(1) || refusals["preauth"] != float64(1) || refusals["global"] != float64(0) {
		t.Errorf("refusals %v, want tenant 1, preauth 1, others 0", refusals)
	}
	if z["admitted"] != float64(3) || z["inflight"] != float64(0) || z["upstream_throttled"] != float64(0) {
		t.Errorf("admitted %v inflight %v upstream %v, want 3 0 0", z["admitted"], z["inflight"], z["upstream_throttled"])
	}
	tracked, _ := z["tracked"].(map[string]any)
	wantKeys(t, "tracked", tracked, "preauth_buckets", "tenant_buckets", "known")
	if tracked["known"] != float64(1) {
		t.Errorf("tracked.known %v, want 1", tracked["known"])
	}
	store, _ := z["quota_store"].(map[string]any)
	wantKeys(t, "quota_store", store, "degraded", "last_error", "last_flush")
	if store["degraded"] != false {
		t.Errorf("quota_store.degraded = %v", store["degraded"])
	}
	limits, _ := z["limits"].(map[string]any)
	wantKeys(t, "limits", limits, "tenant", "quota", "preauth", "global")
	if ten, _ := limits["tenant"].(map[string]any); ten["rate"] != "1/m" || ten["burst"] != float64(1) {
		t.Errorf("limits.tenant = %v, want 1/m burst 1", limits["tenant"])
	}
	if q, _ := limits["quota"].(map[string]any); q["day"] != float64(100) {
		t.Errorf("limits.quota = %v, want day 100", limits["quota"])
	}

	// One zone alone has the same shape.
	status, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/adm", nil)
	var one map[string]any
	if status != http.StatusOK || json.Unmarshal(body, &one) != nil {
		t.Fatalf("GET /mcp_ratelimit/adm: %d %s", status, body)
	}
	wantKeys(t, "single zone", one, "limits", "refusals", "quota_store")

	fp := fingerprintOf(t, e.caddy.Storage, "adm", "Bearer valid-adm")
	var id map[string]any
	e.caddy.AdminJSON(t, "/mcp_ratelimit/adm/identities/"+fp, &id)
	if id["proven"] != true || id["fingerprint"] != fp {
		t.Fatalf("identity %v: want proven true", id)
	}
	if used, _ := id["quota_used"].(map[string]any); used["day"] != float64(1) {
		t.Errorf("identity quota_used %v, want day 1", id["quota_used"])
	}

	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/mcp_ratelimit/nosuchzone", http.StatusNotFound},
		{"GET", "/mcp_ratelimit/nosuchzone/identities/" + fp, http.StatusNotFound},
		{"GET", "/mcp_ratelimit/adm/identities/" + strings.Repeat("0", 32), http.StatusNotFound},
		{"GET", "/mcp_ratelimit/adm/identities/not-a-fingerprint", http.StatusBadRequest},
		{"GET", "/mcp_ratelimit/adm/other/" + fp, http.StatusNotFound},
		{"POST", "/mcp_ratelimit/", http.StatusMethodNotAllowed},
		{"POST", "/mcp_ratelimit/adm", http.StatusMethodNotAllowed},
		{"DELETE", "/mcp_ratelimit/adm/identities/" + fp, http.StatusMethodNotAllowed},
	} {
		if got, body := e.caddy.AdminDo(t, c.method, c.path, []byte("{}")); got != c.status {
			t.Errorf("%s %s: %d, want %d (%s)", c.method, c.path, got, c.status, body)
		}
	}
}

// A tool's policy shows the cost a call is charged, 1 without a cost line.
func TestAdminShowsToolCostsInForce(t *testing.T) {
	e := start(t, "zone admtools\ntool slow {\narg millis max 5000\n}\ntool photo {\ncost 3\n}")
	limits, _ := adminZone(t, e.caddy, "admtools")["limits"].(map[string]any)
	tools, _ := limits["tools"].(map[string]any)
	for name, want := range map[string]float64{"slow": 1, "photo": 3} {
		if tool, _ := tools[name].(map[string]any); tool["cost"] != want {
			t.Errorf("limits.tools.%s = %v, want cost %v", name, tools[name], want)
		}
	}
}

func TestAdminShowsQuotaStoreDegradedAndRecovered(t *testing.T) {
	e := start(t, "zone deg\nflush_interval 1s\ntenant 10/s burst 20\nquota 1000/day")
	e.prove("valid-deg")
	if r := e.call(1, "Authorization", "Bearer valid-deg"); r.Status != http.StatusOK {
		t.Fatalf("call: %d", r.Status)
	}
	storeState := func() map[string]any {
		s, _ := adminZone(t, e.caddy, "deg")["quota_store"].(map[string]any)
		return s
	}
	harness.Eventually(t, 5*time.Second, "a successful flush", func() bool {
		s := storeState()
		return s["last_flush"] != nil && s["degraded"] == false
	})

	// The storage directory becomes a regular file.
	dir := e.caddy.Storage
	restore := harness.BreakStorage(t, dir)

	if r := e.call(2, "Authorization", "Bearer valid-deg"); r.Status != http.StatusOK {
		t.Fatalf("a counted call while storage breaks must be served: %d %s", r.Status, r.Body)
	}
	harness.Eventually(t, 10*time.Second, "quota_store.degraded true", func() bool {
		return storeState()["degraded"] == true
	})
	if s := storeState(); s["last_error"] == "" || s["last_error"] == nil {
		t.Errorf("degraded store without last_error: %v", s)
	}
	_, samples := scrapeMetrics(t, e.caddy)
	mustMetric(t, samples, "mcp_ratelimit_quota_degraded", map[string]string{"zone": "deg"}, 1)
	// The store shows degraded as the failing flush finds storage gone,
	// a moment before that flush ends and counts as an error.
	harness.Eventually(t, 5*time.Second, "flushes_total{result=error} ≥ 1", func() bool {
		_, samples := scrapeMetrics(t, e.caddy)
		v, _ := metricValue(samples, "mcp_ratelimit_flushes_total", map[string]string{"zone": "deg", "result": "error"})
		return v >= 1
	})
	// Fail open: quotas keep working in memory.
	if r := e.call(3, "Authorization", "Bearer valid-deg"); r.Status != http.StatusOK {
		t.Fatalf("call while degraded: %d %s", r.Status, r.Body)
	}

	restore()
	harness.Eventually(t, 10*time.Second, "quota_store.degraded false again", func() bool {
		return storeState()["degraded"] == false
	})
	_, samples = scrapeMetrics(t, e.caddy)
	mustMetric(t, samples, "mcp_ratelimit_quota_degraded", map[string]string{"zone": "deg"}, 0)
	// Nothing lost: every counted call reaches storage.
	fp := fingerprintOf(t, dir, "deg", "Bearer valid-deg")
	harness.Eventually(t, 5*time.Second, "pending counts pushed", func() bool {
		s := storeState()
		p, _ := s["pending"].(float64)
		return p == 0
	})
	if used := identityQuotaUsed(t, e, "deg", fp); used["day"] != 3 {
		t.Errorf("quota used %v after recovery, want day 3", used)
	}
}

func TestPatchThroughConfigKeepsDrainedBucketAndOverridesApplyToOneIdentity(t *testing.T) {
	e := start(t, "zone live\ntenant 1/m burst 3\nquota off\npreauth 1/m burst 5")
	e.prove("valid-alice")
	e.prove("valid-bob")
	for _, who := range []string{"alice", "bob"} {
		for i := range 3 {
			if r := e.call(i, "Authorization", "Bearer valid-"+who); r.Status != http.StatusOK {
				t.Fatalf("%s call %d: %d", who, i, r.Status)
			}
		}
		refusal(t, e.call(9, "Authorization", "Bearer valid-"+who), http.StatusTooManyRequests, "tenant")
	}

	hp := e.caddy.HandlerPath(t, "mcp_ratelimit")
	if status, body := e.caddy.AdminDo(t, http.MethodPatch, hp+"/tenant", []byte(`{"rate":"2/m","burst":3}`)); status != http.StatusOK {
		t.Fatalf("PATCH %s/tenant: %d %s", hp, status, body)
	}
	// A changed limit never hands out a fresh burst.
	refusal(t, e.call(10, "Authorization", "Bearer valid-alice"), http.StatusTooManyRequests, "tenant")
	limits, _ := adminZone(t, e.caddy, "live")["limits"].(map[string]any)
	if ten, _ := limits["tenant"].(map[string]any); ten["rate"] != "2/m" || ten["burst"] != float64(3) {
		t.Fatalf("admin shows tenant %v, want 2/m burst 3", limits["tenant"])
	}

	// One identity gets a far higher rate through a live override.
	fpAlice := fingerprintOf(t, e.caddy.Storage, "live", "Bearer valid-alice")
	override := fmt.Sprintf(`{%q:{"tenant":{"rate":"100/s","burst":10}}}`, fpAlice)
	if status, body := e.caddy.AdminDo(t, http.MethodPut, hp+"/overrides", []byte(override)); status != http.StatusOK {
		t.Fatalf("PUT %s/overrides: %d %s", hp, status, body)
	}
	time.Sleep(200 * time.Millisecond) // alice's drained bucket refills at 100/s
	// The identity view shows the level her next call finds, under the
	// new limit, not the old rate's until she calls again.
	var view map[string]any
	e.caddy.AdminJSON(t, "/mcp_ratelimit/live/identities/"+fpAlice, &view)
	if tokens, _ := view["tenant_tokens"].(float64); tokens < 9 || tokens > 10 {
		t.Errorf("identity view tenant_tokens %v after the override, want 9-10 (100/s burst 10 for 200ms)", view["tenant_tokens"])
	}
	if r := e.call(11, "Authorization", "Bearer valid-alice"); r.Status != http.StatusOK {
		t.Fatalf("alice with an override: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(12, "Authorization", "Bearer valid-bob"), http.StatusTooManyRequests, "tenant")
	limits, _ = adminZone(t, e.caddy, "live")["limits"].(map[string]any)
	if ov, _ := limits["overrides"].(map[string]any); ov[fpAlice] == nil || len(ov) != 1 {
		t.Fatalf("admin overrides %v, want only alice's", limits["overrides"])
	}
	_, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/live/identities/"+fpAlice, nil)
	if !strings.Contains(string(body), `"override":true`) {
		t.Errorf("identity view lacks override: %s", body)
	}
}

// Operators learn fingerprints from the admin API: the zone's proven
// identities, most recently used first.
func TestAdminListsProvenIdentitiesMostRecentFirst(t *testing.T) {
	e := start(t, "zone list\nquota 100/day")
	e.prove("valid-one")
	e.prove("valid-two")
	if r := e.call(1, "Authorization", "Bearer valid-one"); r.Status != http.StatusOK {
		t.Fatalf("call: %d %s", r.Status, r.Body)
	}
	one := fingerprintOf(t, e.caddy.Storage, "list", "Bearer valid-one")
	two := fingerprintOf(t, e.caddy.Storage, "list", "Bearer valid-two")
	type listing struct {
		Total      int `json:"total"`
		Identities []struct {
			Fingerprint string    `json:"fingerprint"`
			LastUsed    time.Time `json:"last_used"`
		} `json:"identities"`
	}
	fps := func(l listing) []string {
		var out []string
		for _, id := range l.Identities {
			out = append(out, id.Fingerprint)
		}
		return out
	}
	var all listing
	e.caddy.AdminJSON(t, "/mcp_ratelimit/list/identities", &all)
	if got := fps(all); all.Total != 2 || len(got) != 2 || got[0] != one || got[1] != two {
		t.Fatalf("listing %v (total %d), want [%s %s]: the last used first", got, all.Total, one, two)
	}
	if !all.Identities[0].LastUsed.After(all.Identities[1].LastUsed) {
		t.Errorf("last_used %v, want decreasing", all.Identities)
	}
	var first listing
	e.caddy.AdminJSON(t, "/mcp_ratelimit/list/identities?limit=1", &first)
	if got := fps(first); first.Total != 2 || len(got) != 1 || got[0] != one {
		t.Fatalf("limit=1: %v (total %d), want [%s] of 2", got, first.Total, one)
	}
	for _, bad := range []string{"0", "-1", "x"} {
		if status, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/list/identities?limit="+bad, nil); status != http.StatusBadRequest {
			t.Errorf("limit=%s: %d, want 400 (%s)", bad, status, body)
		}
	}
}

// The admin API shows an override as the limits in force for its identity.
// What the override leaves unset comes from the tier a request matches, so
// it shows them over the top-level limits and over each tier, and says
// which fields it sets.
func TestAdminShowsOverrideOverEachTier(t *testing.T) {
	e := start(t, "zone ovtier\ntenant 1/m burst 2\nquota 100/day\ntier gold {\nmatch {http.request.header.X-Plan} gold\ntenant 1/m burst 6\nconcurrency 1\ncost photo 3\n}")
	fp := fingerprintOf(t, e.caddy.Storage, "ovtier", "Bearer valid-o")
	hp := e.caddy.HandlerPath(t, "mcp_ratelimit")
	if status, body := e.caddy.AdminDo(t, http.MethodPut, hp+"/overrides", []byte(fmt.Sprintf(`{%q:{"quota":{"day":40}}}`, fp))); status != http.StatusOK {
		t.Fatalf("PUT %s/overrides: %d %s", hp, status, body)
	}
	limits, _ := adminZone(t, e.caddy, "ovtier")["limits"].(map[string]any)
	overrides, _ := limits["overrides"].(map[string]any)
	ov, _ := overrides[fp].(map[string]any)
	b, _ := json.Marshal(ov)
	var got struct {
		Tenant struct{ Burst int }
		Quota  struct{ Day int }
		Sets   []string
		InTier map[string]struct {
			Tenant      struct{ Burst int }
			Quota       struct{ Day int }
			Concurrency struct {
				PerIdentity int `json:"per_identity"`
			}
			Costs map[string]int
		} `json:"in_tier"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("override view %s: %v", b, err)
	}
	gold := got.InTier["gold"]
	if got.Tenant.Burst != 2 || got.Quota.Day != 40 || !slices.Equal(got.Sets, []string{"quota"}) ||
		gold.Tenant.Burst != 6 || gold.Quota.Day != 40 || gold.Concurrency.PerIdentity != 1 || gold.Costs["photo"] != 3 {
		t.Fatalf("override view %s: want top-level tenant burst 2 and, in tier gold, burst 6, 1 call in flight, cost photo 3; quota 40/day in both; sets [quota]", b)
	}
}

// With trust_identity, identities are proven on sight and never recorded
// in the proven set: the identity view shows one the zone holds state of
// as proven, and still does not know one it holds nothing of.
func TestIdentityViewWithTrustIdentity(t *testing.T) {
	e := start(t, "zone admtrust\nidentity {http.request.header.X-User}\ntrust_identity\ntenant 1/h burst 2")
	if r := e.call(1, "X-User", "u1"); r.Status != http.StatusOK {
		t.Fatalf("trusted call: %d %s", r.Status, r.Body)
	}
	var id map[string]any
	e.caddy.AdminJSON(t, "/mcp_ratelimit/admtrust/identities/"+fingerprintOf(t, e.caddy.Storage, "admtrust", "u1"), &id)
	if id["proven"] != true {
		t.Fatalf("identity view %v: want proven true under trust_identity", id)
	}
	if st, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/admtrust/identities/"+strings.Repeat("0", 32), nil); st != http.StatusNotFound {
		t.Fatalf("an identity the zone holds nothing of: %d %s, want 404", st, body)
	}
}

// After a limit change under tiers, which tier an identity's next call
// matches is not known, but no tier lets that call find more than the
// largest burst in force: the identity view never shows more.
func TestIdentityViewUnderTiersNeverExceedsTheLargestBurst(t *testing.T) {
	e := start(t, "zone tierview\ntenant 1/m burst 5\nquota off\ntier paid {\nmatch {http.request.header.X-Plan} paid\ntenant 1/m burst 6\n}")
	e.prove("valid-tierview")
	e.spend("valid-tierview", 1)
	hp := e.caddy.HandlerPath(t, "mcp_ratelimit")
	for path, limit := range map[string]string{"/tenant": `{"rate":"1/m","burst":2}`, "/tiers/0/tenant": `{"rate":"1/m","burst":3}`} {
		if status, body := e.caddy.AdminDo(t, http.MethodPatch, hp+path, []byte(limit)); status != http.StatusOK {
			t.Fatalf("PATCH %s%s: %d %s", hp, path, status, body)
		}
	}
	fp := fingerprintOf(t, e.caddy.Storage, "tierview", "Bearer valid-tierview")
	var view map[string]any
	e.caddy.AdminJSON(t, "/mcp_ratelimit/tierview/identities/"+fp, &view)
	if tokens, ok := view["tenant_tokens"].(float64); !ok || tokens > 3 {
		t.Fatalf("identity view tenant_tokens %v with bursts 2 and 3 in force, want at most 3", view["tenant_tokens"])
	}
}
