package mcplimit_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// planSite is the reference plan setup: an earlier handler puts the plan
// in {http.vars.plan} (here from a header, which is fine for a test but
// would let a real client pick its own plan), a paid tier and a tighter
// trial tier share one zone, and callers without a plan get the
// top-level limits. The tiers' rates are written as SPEC writes them.
const planSite = `route {
	vars plan {http.request.header.X-Plan}
	mcp_ratelimit {
		tenant 2/m
		quota 50/day
		tier paid {
			match {http.vars.plan} paid
			tenant 20/min
			quota 10000/month
			cost analyze_photo 5
		}
		tier trial {
			match {http.vars.plan} trial
			tenant 5/min
			quota 200/month
		}
	}
	reverse_proxy $BACKEND
}`

// callTool posts a tools/call of tool with the given headers.
func (e *env) callTool(id int, tool string, hdr ...string) *harness.Response {
	e.t.Helper()
	return e.post(harness.ToolCall(id, tool, map[string]any{}), hdr...)
}

// passes makes n calls of tool that must all pass.
func (e *env) passes(n int, tool string, hdr ...string) {
	e.t.Helper()
	for i := range n {
		if r := e.callTool(100+i, tool, hdr...); r.Status != http.StatusOK {
			e.t.Fatalf("%s call %d of %d: %d %s", tool, i+1, n, r.Status, r.Body)
		}
	}
}

func TestTiersGiveEachPlanItsOwnLimits(t *testing.T) {
	e := startSite(t, planSite)
	trial := []string{"Authorization", "Bearer valid-trial", "X-Plan", "trial"}
	paid := []string{"Authorization", "Bearer valid-paid", "X-Plan", "paid"}
	none := []string{"Authorization", "Bearer valid-noplan"}
	for _, h := range [][]string{trial, paid, none} {
		e.prove(strings.TrimPrefix(h[1], "Bearer "), h[2:]...)
	}

	e.passes(5, "echo", trial...)
	r := e.callTool(1, "echo", trial...)
	got := refusal(t, r, http.StatusTooManyRequests, "tenant")
	if !strings.Contains(got.Error.Message, "per-minute limit (5/min, burst 5)") {
		t.Fatalf("trial refusal does not state the trial limit: %s", got.Error.Message)
	}

	e.passes(20, "echo", paid...)
	r = e.callTool(2, "echo", paid...)
	got = refusal(t, r, http.StatusTooManyRequests, "tenant")
	if !strings.Contains(got.Error.Message, "per-minute limit (20/min, burst 20)") {
		t.Fatalf("paid refusal does not state the paid limit: %s", got.Error.Message)
	}

	// No plan: the top-level limits.
	e.passes(2, "echo", none...)
	refusal(t, e.callTool(3, "echo", none...), http.StatusTooManyRequests, "tenant")
}

func TestTierPerToolCost(t *testing.T) {
	e := startSite(t, planSite)
	paid := []string{"Authorization", "Bearer valid-paidphoto", "X-Plan", "paid"}
	trial := []string{"Authorization", "Bearer valid-trialphoto", "X-Plan", "trial"}
	e.prove("valid-paidphoto", "X-Plan", "paid")
	e.prove("valid-trialphoto", "X-Plan", "trial")

	// Paid: analyze_photo costs 5 of the burst of 20.
	e.passes(4, "analyze_photo", paid...)
	before := e.backend.ToolCalls()
	refusal(t, e.callTool(1, "analyze_photo", paid...), http.StatusTooManyRequests, "tenant")
	if e.backend.ToolCalls() != before {
		t.Fatal("a refused photo call reached the backend")
	}
	// Trial sets no cost: a photo costs 1 there.
	e.passes(5, "analyze_photo", trial...)
	refusal(t, e.callTool(2, "analyze_photo", trial...), http.StatusTooManyRequests, "tenant")
}

func TestTierChangeMidPeriodKeepsTheCounts(t *testing.T) {
	e := startSite(t, planSite)
	const tok = "valid-upgrader"
	auth := "Bearer " + tok
	e.prove(tok, "X-Plan", "trial")
	e.passes(5, "echo", "Authorization", auth, "X-Plan", "trial")
	refusal(t, e.callTool(1, "echo", "Authorization", auth, "X-Plan", "trial"), http.StatusTooManyRequests, "tenant")

	// Upgraded to paid: the drained bucket now refills at the paid rate,
	// but there is no fresh burst of 20.
	r := e.callTool(2, "echo", "Authorization", auth, "X-Plan", "paid")
	got := refusal(t, r, http.StatusTooManyRequests, "tenant")
	if !strings.Contains(got.Error.Message, "20/m") {
		t.Fatalf("the refusal after the upgrade should state the paid limit: %s", got.Error.Message)
	}

	// The monthly quota count carried over too: the 5 trial calls are
	// counted against the paid quota.
	fp := cliFingerprint(t, e, "default", auth)
	used := identityQuotaUsed(t, e, "default", fp)
	if used["month"] != 5 {
		t.Fatalf("quota used after the upgrade: %v, want month=5", used)
	}

	// Downgrade: a paid identity with 2 tokens left keeps just those 2,
	// it is not refilled to the trial burst of 5.
	const tok2 = "valid-downgrader"
	auth2 := "Bearer " + tok2
	e.prove(tok2, "X-Plan", "paid")
	e.passes(18, "echo", "Authorization", auth2, "X-Plan", "paid")
	passed := 0
	for i := range 5 {
		if r := e.callTool(10+i, "echo", "Authorization", auth2, "X-Plan", "trial"); r.Status == http.StatusOK {
			passed++
		} else {
			refusal(t, r, http.StatusTooManyRequests, "tenant")
		}
	}
	if passed != 2 {
		t.Fatalf("after the downgrade %d calls passed, want the 2 tokens left", passed)
	}
	fp2 := cliFingerprint(t, e, "default", auth2)
	if used := identityQuotaUsed(t, e, "default", fp2); used["month"] != 20 {
		t.Fatalf("quota used across the downgrade: %v, want month=20", used)
	}
}

// A tenant moving to another tier earns its old tier's rate for the time
// before the move: a drained trial tenant upgraded 100ms later holds what
// 1/m earned in 100ms, not what 100/s would have (10 tokens).
func TestTierMoveCreditsTheIdleTimeAtTheOldTier(t *testing.T) {
	const block = "preauth 100/s burst 100\nquota off\n" +
		"tier paid {\nmatch {http.request.header.X-Plan} paid\ntenant 100/s burst 100\n}\n" +
		"tier trial {\nmatch {http.request.header.X-Plan} trial\ntenant 1/m burst 2\n}"
	t.Run("local", func(t *testing.T) { tierMoveKeepsTheLevel(t, start(t, "zone tiermove\n"+block), "valid-tiermove") })
	t.Run("redis", func(t *testing.T) {
		e := start(t, "zone tiermove_redis\n"+block+"\nstore redis "+harness.StartRedis(t).URL)
		tierMoveKeepsTheLevel(t, e, "valid-tiermove-redis")
	})
}

// tierMoveKeepsTheLevel drains tok's trial bucket and checks that its
// first call as paid, 100ms later, is refused by the tenant layer.
func tierMoveKeepsTheLevel(t *testing.T, e *env, tok string) {
	trial := []string{"Authorization", "Bearer " + tok, "X-Plan", "trial"}
	e.prove(tok, "X-Plan", "trial")
	e.passes(2, "echo", trial...)
	refusal(t, e.callTool(1, "echo", trial...), http.StatusTooManyRequests, "tenant")
	time.Sleep(100 * time.Millisecond)
	got := refusal(t, e.callTool(2, "echo", "Authorization", "Bearer "+tok, "X-Plan", "paid"), http.StatusTooManyRequests, "tenant")
	if !strings.Contains(got.Error.Message, "100/s") {
		t.Fatalf("the refusal after the move should state the paid limit: %s", got.Error.Message)
	}
}

// A tenant moving to another tier is moved by its first request there,
// admitted or not: drained as slow (a token every 6s) and refused as fast
// (a token a second), it is told to wait a second and the same call works
// then, also where every layer looks before any takes (a group layer).
func TestTierMoveRefusedRetryWorksAfterTheWaitItNames(t *testing.T) {
	const block = "preauth 100/s burst 100\nquota off\n" +
		"tier slow {\nmatch {http.request.header.X-Plan} slow\ntenant 10/m burst 2\n}\n" +
		"tier fast {\nmatch {http.request.header.X-Plan} fast\ntenant 60/m burst 1\n}"
	for _, c := range []struct{ name, extra string }{
		{"reserving", ""},
		{"looking_first", "\ngroup {http.request.header.X-Org} 100/s burst 100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, "zone tiermove_"+c.name+"\n"+block+c.extra)
			tok := "valid-tiermove-retry-" + c.name
			slow := []string{"Authorization", "Bearer " + tok, "X-Plan", "slow", "X-Org", "acme"}
			fast := []string{"Authorization", "Bearer " + tok, "X-Plan", "fast", "X-Org", "acme"}
			e.prove(tok, slow[2:]...)
			e.passes(2, "echo", slow...)
			r := e.callTool(1, "echo", fast...)
			refusal(t, r, http.StatusTooManyRequests, "tenant")
			ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
			if ra != 1 {
				t.Fatalf("Retry-After %q, want the fast tier's 1s", r.Header.Get("Retry-After"))
			}
			time.Sleep(time.Duration(ra) * time.Second)
			if r := e.callTool(2, "echo", fast...); r.Status != http.StatusOK {
				t.Fatalf("the same call after Retry-After: %d %s", r.Status, r.Body)
			}
		})
	}
}

func TestOverrideRaisesOneTenantsQuotaLive(t *testing.T) {
	const block = "tenant off\nquota 3/day"
	e := start(t, block)
	a := []string{"Authorization", "Bearer valid-tenant-a"}
	b := []string{"Authorization", "Bearer valid-tenant-b"}
	e.prove("valid-tenant-a")
	e.prove("valid-tenant-b")
	for _, h := range [][]string{a, b} {
		e.passes(3, "echo", h...)
		refusal(t, e.callTool(1, "echo", h...), http.StatusTooManyRequests, "quota")
	}

	// "Contact us for a higher quota": an override for A, loaded as a
	// Caddyfile, with the fingerprint the operator gets from the CLI.
	fpA := cliFingerprint(t, e, "default", "Bearer valid-tenant-a")
	fpB := cliFingerprint(t, e, "default", "Bearer valid-tenant-b")
	if fpA == fpB {
		t.Fatal("two identities share a fingerprint")
	}
	e.reloadWith(t, block+"\noverride "+fpA+" {\n quota 10/day\n}")
	e.settle(a...)
	e.passes(7, "echo", a...)
	refusal(t, e.callTool(2, "echo", a...), http.StatusTooManyRequests, "quota")
	refusal(t, e.callTool(3, "echo", b...), http.StatusTooManyRequests, "quota")

	// The same through the JSON admin API: add one for B, lower A's.
	path := e.caddy.HandlerPath(t, "mcp_ratelimit")
	if st, body := e.caddy.AdminDo(t, http.MethodPut, path+"/overrides/"+fpB, []byte(`{"quota":{"day":5}}`)); st != http.StatusOK {
		t.Fatalf("PUT override for B: %d %s", st, body)
	}
	e.settle(a...)
	e.passes(2, "echo", b...)
	refusal(t, e.callTool(4, "echo", b...), http.StatusTooManyRequests, "quota")
	if st, body := e.caddy.AdminDo(t, http.MethodPatch, path+"/overrides/"+fpA, []byte(`{"quota":{"day":12}}`)); st != http.StatusOK {
		t.Fatalf("PATCH override for A: %d %s", st, body)
	}
	e.settle(a...)
	e.passes(2, "echo", a...)
	got := refusal(t, e.callTool(5, "echo", a...), http.StatusTooManyRequests, "quota")
	if !strings.Contains(got.Error.Message, "(12)") {
		t.Fatalf("A's refusal should name its overridden quota of 12: %s", got.Error.Message)
	}
	// The admin API shows the override on the identity.
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/default/identities/"+fpA, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"override":true`) {
		t.Fatalf("identity view of A: %d %s", st, body)
	}
	// Removing B's override puts it back on the top-level quota (5 used of 3).
	if st, body := e.caddy.AdminDo(t, http.MethodDelete, path+"/overrides/"+fpB, nil); st != http.StatusOK {
		t.Fatalf("DELETE override for B: %d %s", st, body)
	}
	e.settle(a...)
	got = refusal(t, e.callTool(6, "echo", b...), http.StatusTooManyRequests, "quota")
	if !strings.Contains(got.Error.Message, "(3)") {
		t.Fatalf("B's refusal should name the top-level quota of 3 again: %s", got.Error.Message)
	}
}

// An override that sets only part of a limit (a tenant burst, through the
// JSON API) takes the rest from the identity's tier, not from the
// top-level limits: a paid tenant's higher burst keeps the paid rate.
func TestPartialOverrideKeepsTheTiersRest(t *testing.T) {
	e := startSite(t, planSite)
	paid := []string{"Authorization", "Bearer valid-partial", "X-Plan", "paid"}
	e.prove("valid-partial", "X-Plan", "paid")
	fp := cliFingerprint(t, e, "default", "Bearer valid-partial")
	path := e.caddy.HandlerPath(t, "mcp_ratelimit")
	if st, body := e.caddy.AdminDo(t, http.MethodPut, path+"/overrides/"+fp, []byte(`{"tenant":{"burst":30}}`)); st != http.StatusOK {
		t.Fatalf("PUT override: %d %s", st, body)
	}
	e.settle(paid...)
	r := e.callTool(1, "echo", paid...)
	if r.Status != http.StatusOK {
		t.Fatalf("paid call: %d %s", r.Status, r.Body)
	}
	// 20/m with burst 30: a window of 90s.
	if pol := r.Header.Get("RateLimit-Policy"); !slices.Contains(strings.Split(pol, ", "), `"tenant";q=30;w=90`) {
		t.Fatalf("RateLimit-Policy %q, want the paid rate 20/m with the override's burst 30", pol)
	}
}

func TestDryRunRefusesNothingButCountsWouldBeRefusals(t *testing.T) {
	e := start(t, "zone dry\ndry_run\ntenant 1/m burst 1\nquota off")
	e.prove("valid-dry")
	e.spend("valid-dry", 5)
	if n := e.backend.ToolCalls(); n != 5 {
		t.Fatalf("backend saw %d calls, want all 5", n)
	}
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	dry := promValue(string(body), "mcp_ratelimit_dry_run_refusals_total", `layer="tenant"`, `zone="dry"`)
	if dry != 4 {
		t.Fatalf("mcp_ratelimit_dry_run_refusals_total{layer=tenant} = %v, want 4", dry)
	}
	if real := promValue(string(body), "mcp_ratelimit_refusals_total", `layer="tenant"`, `zone="dry"`); real > 0 {
		t.Fatalf("mcp_ratelimit_refusals_total{layer=tenant} = %v in dry run, want 0", real)
	}
}

// A dry-run request is refused by a layer at most once, as enforcing would
// refuse it once: an unproven call of cost 3 that the pre-auth layer
// refuses for its first token is not refused again for the other two.
func TestDryRunCountsOneRefusalPerLayerAndRequest(t *testing.T) {
	body := dryRunCalls(t, start(t, "zone dryp\ndry_run\npreauth 1/h burst 2\ncost echo 3"), 3)
	// Enforcing: each call is refused once (2 tokens left, 3 asked).
	if dry := promValue(body, "mcp_ratelimit_dry_run_refusals_total", `layer="preauth"`, `zone="dryp"`); dry != 3 {
		t.Fatalf("mcp_ratelimit_dry_run_refusals_total{layer=preauth} = %v after 3 calls, want 3", dry)
	}
}

// A dry-run request a later layer would refuse gives back the pre-auth
// token it took, as enforcement gives it back: unproven calls that the
// global layer would refuse leave pre-auth where enforcement would, so
// pre-auth would refuse none of them.
func TestDryRunWouldBeRefusalGivesBackItsPreauthToken(t *testing.T) {
	body := dryRunCalls(t, start(t, "zone drypre\ndry_run\npreauth 1/h burst 2\nglobal 1/h burst 1\nquota off"), 3)
	if n := promValue(body, "mcp_ratelimit_dry_run_refusals_total", `layer="global"`, `zone="drypre"`); n != 2 {
		t.Fatalf("would-be global refusals: %v, want 2", n)
	}
	if n := promValue(body, "mcp_ratelimit_dry_run_refusals_total", `layer="preauth"`, `zone="drypre"`); n != 0 {
		t.Fatalf("would-be pre-auth refusals: %v, want 0: enforcement gives a refused call's token back", n)
	}
}

// dryRunCalls makes n unproven calls, each forwarded in dry run, and
// returns the metrics that follow.
func dryRunCalls(t *testing.T, e *env, n int) string {
	t.Helper()
	for i := range n {
		if r := e.call(i); r.Status != http.StatusOK {
			t.Fatalf("unproven call %d in dry run: %d %s", i, r.Status, r.Body)
		}
	}
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	return string(body)
}

// A dry-run pre-auth refusal is logged with the request's cost, as an
// enforcing one is, though the request was refused before its body was
// read.
func TestDryRunPreauthRefusalLogsTheRequestCost(t *testing.T) {
	opts, path := logOptions(t)
	e := start(t, "zone drylog\ndry_run\npreauth 1/h burst 1\ncost echo 3", opts)
	for i := range 3 {
		if r := e.call(i); r.Status != http.StatusOK {
			t.Fatalf("unproven call %d in dry run: %d %s", i, r.Status, r.Body)
		}
	}
	var costs []any
	for _, ev := range logEvents(t, path) {
		if ev["msg"] == "would refuse (dry run)" && ev["zone"] == "drylog" && ev["layer"] == "preauth" {
			costs = append(costs, ev["cost"])
		}
	}
	if len(costs) != 3 {
		t.Fatalf("%d dry-run pre-auth refusals logged, want 3", len(costs))
	}
	for i, c := range costs {
		if c != float64(3) {
			t.Errorf("dry-run pre-auth refusal %d logged cost %v, want the request's 3", i, c)
		}
	}
}

// A request that costs nothing (a ping) refused by pre-auth or by the
// anonymous layer, each of which takes 1 of it, is logged with that cost.
func TestUncostedRequestRefusalLogsWhatTheLayerTakes(t *testing.T) {
	opts, path := logOptions(t)
	e := start(t, "zone freelog\npreauth 1/h burst 3\nanonymous 1/h burst 1", opts)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	// Without a credential: the anonymous bucket refuses the second (and
	// gives its pre-auth token back); with a junk one, pre-auth the third.
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer junk"}} {
		refused := false
		for range 3 {
			if r := harness.Post(t, e.mcp, ping, hdr...); r.Status == http.StatusTooManyRequests {
				refused = true
				break
			}
		}
		if !refused {
			t.Fatalf("pings %v: none refused", hdr)
		}
	}
	costs := map[any]any{}
	for _, ev := range logEvents(t, path) {
		if ev["msg"] == "refused" && ev["zone"] == "freelog" {
			costs[ev["layer"]] = ev["cost"]
		}
	}
	if len(costs) != 2 || costs["preauth"] != float64(1) || costs["anonymous"] != float64(1) {
		t.Fatalf("refusals logged with costs %v, want preauth and anonymous with 1", costs)
	}
}

// In dry run each quota layer decides and is counted once per request: the
// identity's quota (per day and per month, one layer) and the tool's.
func TestDryRunCountsEachQuotaLayerOnce(t *testing.T) {
	e := start(t, "zone dryq\ndry_run\ntenant 100/s burst 100\nquota 2/day\nquota 2/month\ntool echo {\n quota 2/day\n quota 2/month\n}")
	e.prove("valid-dryq")
	e.spend("valid-dryq", 4)
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	for _, layer := range []string{"quota", "tool_quota"} {
		if n := promValue(string(body), "mcp_ratelimit_dry_run_refusals_total", `layer="`+layer+`"`, `zone="dryq"`); n != 2 {
			t.Errorf("dry-run %s refusals after 2 calls over it = %v, want 2", layer, n)
		}
	}
	// A quota that would refuse counts nothing: it stands at its limit,
	// where enforcement would have left it.
	fp := cliFingerprint(t, e, "dryq", "Bearer valid-dryq")
	if used := identityQuotaUsed(t, e, "dryq", fp); used["day"] != 2 || used["month"] != 2 {
		t.Errorf("quota used after 4 calls in dry run against 2/day and 2/month: %v, want 2 each", used)
	}
}

// A dry-run request that one layer would refuse takes nothing from the
// others, as enforcement would have refused it whole: the tool quota's
// would-be refusals count neither in the identity's quota nor in its
// tenant bucket, so each layer stands where enforcement would have left it.
func TestDryRunWouldBeRefusalTakesNothingFromOtherLayers(t *testing.T) {
	e := start(t, "zone drytake\ndry_run\ntenant 1/h burst 10\nquota 10/day\ntool echo {\n quota 1/day\n}")
	e.prove("valid-drytake")
	e.spend("valid-drytake", 4)
	fp := cliFingerprint(t, e, "drytake", "Bearer valid-drytake")
	if used := identityQuotaUsed(t, e, "drytake", fp); used["day"] != 1 {
		t.Errorf("identity quota used after 1 call and 3 the tool quota would refuse: %v, want day 1", used)
	}
	r := e.call(9, "Authorization", "Bearer valid-drytake")
	if left := rateLimit(t, r)["tenant"][0]; left != 9 {
		t.Errorf("tenant tokens left after the one call enforcement would admit: %d, want 9 (%q)", left, r.Header.Get("RateLimit"))
	}
}

// A dry run's answer to a call it would refuse carries the RateLimit
// fields the refusal would: the refusing bucket's t is the Retry-After
// enforcement names, for the request's whole cost, not the seconds until
// the bucket is full. Each sequence runs enforcing, then in dry run.
func TestDryRunWouldBeRefusalCarriesTheRefusalsRateLimit(t *testing.T) {
	for i, tc := range []struct {
		name, block, token string
		calls              int    // the last is refused
		last               string // the last call's arguments, if not echo's usual
		want               string
	}{
		// 3 tokens, 2 a call: the second call lacks 1 token (60s), and the
		// bucket is full after 120s.
		{"tenant", "tenant 1/m burst 3\nquota off\ncost echo 2", "valid-dryrl", 2, "", `"tenant";r=1;t=60`},
		// The tenant and group buckets lack a token for as long: a tie,
		// which enforcement gives to the first layer that refused.
		{"tenant and group alike", "tenant 1/m burst 2\nquota off\ngroup {http.request.header.Authorization} 1/m burst 2", "valid-dryrl", 3, "", `"tenant";r=0;t=60`},
		// Enforcement refuses the argument before any bucket decides.
		{"tenant, with a body out of bounds", "tenant 1/m burst 3\nquota off\ntool echo {\n cost 2\n arg limit max 5\n}", "valid-dryrl", 2, `{"limit":50}`, `"tenant";r=1;t=120`},
		// The second call's first token is taken (and kept), the rest lack:
		// its 2 tokens come in 120s, the bucket is full in 180s.
		{"pre-auth, short for the rest of the cost", "preauth 1/m burst 3\ncost echo 2", "rejected", 2, "", `"preauth";r=0;t=120`},
		// The third call is short of its first token, which enforcement
		// refuses before reading the body; its wait is still for both.
		{"pre-auth, short before the body", "preauth 1/m burst 3\ncost echo 2", "rejected", 3, "", `"preauth";r=0;t=120`},
		// Enforcement refuses the argument, which no wait lets pass,
		// rather than the first token: the bucket reads as it stands,
		// empty and full again in 180s.
		{"pre-auth, short before a body out of bounds", "preauth 1/m burst 3\ntool echo {\n cost 2\n arg limit max 5\n}", "rejected", 3, `{"limit":50}`, `"preauth";r=0;t=180`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for j, mode := range []string{"enforcing", "dry_run"} {
				block := fmt.Sprintf("zone dryrl%d%d\n%s", i, j, tc.block)
				if mode == "dry_run" {
					block += "\ndry_run"
				}
				e := start(t, block)
				if tc.token != "rejected" {
					e.prove(tc.token)
				}
				auth := []string{"Authorization", "Bearer " + tc.token}
				for k := range tc.calls - 1 {
					e.call(k, auth...)
				}
				var r *harness.Response
				if tc.last == "" {
					r = e.call(tc.calls, auth...)
				} else {
					r = e.post(argCall(tc.calls, tc.last), auth...)
				}
				refused := r.Status == http.StatusTooManyRequests || r.Status == http.StatusBadRequest
				if refused != (mode == "enforcing") {
					t.Fatalf("%s: last call answered %d %s", mode, r.Status, r.Body)
				}
				if got := r.Header.Get("RateLimit"); got != tc.want {
					t.Errorf("%s: RateLimit %q, want %q", mode, got, tc.want)
				}
			}
		})
	}
}

// A call pre-auth would refuse in dry run is forwarded, and its 2xx
// proves the credential (the backend accepted it), but the call is not
// counted in the quota as a proving call is: enforcement would not have
// run it.
func TestDryRunWouldBeRefusedProvingCallIsNotCounted(t *testing.T) {
	e := start(t, "zone dryprove\ndry_run\npreauth 1/h burst 1\nquota 10/day")
	if r := e.call(1, "Authorization", "Bearer nope-dryprove"); r.Status != http.StatusUnauthorized {
		t.Fatalf("rejected credential: %d %s", r.Status, r.Body)
	}
	if r := e.call(2, "Authorization", "Bearer valid-dryprove"); r.Status != http.StatusOK {
		t.Fatalf("call pre-auth would refuse, in dry run: %d %s", r.Status, r.Body)
	}
	fp := cliFingerprint(t, e, "dryprove", "Bearer valid-dryprove")
	if used := identityQuotaUsed(t, e, "dryprove", fp); used["day"] != 0 {
		t.Errorf("quota used by a call pre-auth would refuse: %v, want none", used)
	}
}

// A body enforcement refuses as sent (here over an arg bound) keeps the
// pre-auth token that paid for reading it, in dry run too: after two such
// calls an unproven caller's burst of 2 is spent.
func TestDryRunArgRefusalKeepsThePreauthToken(t *testing.T) {
	e := start(t, "zone dryarg\ndry_run\npreauth 1/h burst 2\ntool slow {\n arg millis max 10\n}")
	for i := range 2 {
		if r := e.post(harness.ToolCall(i, "slow", map[string]any{"millis": 50})); r.Status != http.StatusOK {
			t.Fatalf("unproven call %d over an arg bound in dry run: %d %s", i, r.Status, r.Body)
		}
	}
	if r := e.call(3); r.Status != http.StatusOK {
		t.Fatalf("third unproven call in dry run: %d %s", r.Status, r.Body)
	}
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	if n := promValue(string(body), "mcp_ratelimit_dry_run_refusals_total", `layer="preauth"`, `zone="dryarg"`); n != 1 {
		t.Errorf("dry-run pre-auth refusals = %v, want 1: the arg refusals kept their tokens", n)
	}
}

// In dry run the body limits an operator tunes, max_batch and arg bounds,
// only record would-be refusals and the calls go on, taking nothing;
// the rules that keep the body readable (here Content-Encoding) still
// refuse, since nothing could say what such a body would cost.
func TestDryRunRecordsBatchAndArgBoundsButStillRefusesUnreadableBodies(t *testing.T) {
	e := start(t, "zone drybody\ndry_run\ntenant 100/s burst 100\nquota off\nmax_batch 2\ntool slow {\n arg millis max 10\n}")
	e.prove("valid-drybody")
	auth := []string{"Authorization", "Bearer valid-drybody"}
	before := e.backend.ToolCalls()
	if r := e.post(batch(1, 3), auth...); r.Status != http.StatusOK {
		t.Fatalf("a batch over max_batch in dry run: %d %s, want it forwarded", r.Status, r.Body)
	}
	if r := e.post(harness.ToolCall(5, "slow", map[string]any{"millis": 50}), auth...); r.Status != http.StatusOK {
		t.Fatalf("a call over an arg bound in dry run: %d %s, want it forwarded", r.Status, r.Body)
	}
	if n := e.backend.ToolCalls() - before; n != 4 {
		t.Fatalf("%d calls reached the backend, want the batch's 3 and the slow call", n)
	}
	if r := e.post(harness.ToolCall(6, "echo", map[string]any{"text": "z"}), append(auth, "Content-Encoding", "gzip")...); r.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("an encoded body in dry run: %d %s, want 415", r.Status, r.Body)
	}
	unchanged(t, e, before+4, "an encoded body in dry run")
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	if n := promValue(string(body), "mcp_ratelimit_dry_run_refusals_total", `layer="request"`, `zone="drybody"`); n != 2 {
		t.Errorf("dry-run request refusals = %v, want 2 (the batch, the arg bound)", n)
	}
	if n := promValue(string(body), "mcp_ratelimit_refusals_total", `layer="request"`, `zone="drybody"`); n != 1 {
		t.Errorf("request refusals = %v, want 1 (the encoded body)", n)
	}
}

// settle waits after a config change until the site answers new
// connections again (an old server shutting down may reset one), probing
// with an unmetered GET carrying hdr (a proven identity's, so the probes
// cost nothing).
func (e *env) settle(hdr ...string) {
	e.t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	ok := 0
	for range 250 {
		req, _ := http.NewRequest(http.MethodGet, e.caddy.URL+"/settle-probe", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if ok++; ok == 3 {
				return
			}
		} else {
			ok = 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatal("the site did not settle after a config change")
}

// promValue returns the value of the first sample of name whose label
// set contains every one of labels, or -1 when there is none.
func promValue(text, name string, labels ...string) float64 {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\{([^}]*)\}\s+(\S+)`)
	for _, line := range strings.Split(text, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(m[1], l) {
				ok = false
			}
		}
		if ok {
			v, _ := strconv.ParseFloat(m[2], 64)
			return v
		}
	}
	return -1
}

// cliFingerprint runs `caddy mcp-ratelimit fingerprint` against a
// Caddyfile with e's storage, as an operator would, and returns the
// fingerprint of value.
func cliFingerprint(t *testing.T, e *env, zone, value string) string {
	t.Helper()
	bin := harness.BuildCaddy(t)
	cfg := filepath.Join(t.TempDir(), "Caddyfile")
	text := harness.Config("respond ok", e.backend.Addr, harness.FreePort(t), harness.FreePort(t), e.caddy.Storage, "")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp-ratelimit", "fingerprint", "--zone", zone, "--config", cfg)
	cmd.Stdin = strings.NewReader(value + "\n")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("fingerprint CLI: %v\n%s", err, stderr)
	}
	fp := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(fp) {
		t.Fatalf("fingerprint CLI printed %q, want 32 lowercase hex characters", out)
	}
	return fp
}

// identityQuotaUsed returns quota_used of GET
// /mcp_ratelimit/<zone>/identities/<fp>.
func identityQuotaUsed(t *testing.T, e *env, zone, fp string) map[string]int64 {
	t.Helper()
	var v struct {
		QuotaUsed map[string]int64 `json:"quota_used"`
	}
	e.caddy.AdminJSON(t, "/mcp_ratelimit/"+zone+"/identities/"+fp, &v)
	return v.QuotaUsed
}

// slowInBackground starts a tools/call of the slow tool that lasts millis,
// and returns a channel that receives its status when it ends.
func (e *env) slowInBackground(millis int, hdr ...string) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(harness.ToolCall(1, "slow", map[string]any{"millis": millis})))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// A bucket's refusal given while a concurrency cap is full as well
// promises nothing: after its wait the same call passes only once a call
// in flight has ended, which no one can time.
func TestRateRefusalBesideAFullConcurrencyCapPromisesNothing(t *testing.T) {
	e := start(t, "zone busycap\ntenant 1/m burst 2\nquota off\nconcurrency 1")
	auth := []string{"Authorization", "Bearer valid-busycap"}
	e.prove("valid-busycap")
	e.spend("valid-busycap", 1)
	done := e.slowInBackground(3000, auth...) // the last token, and the one slot
	harness.Eventually(t, 5*time.Second, "the slow call in flight", func() bool { return e.inflight("busycap") == 1 })
	got := refusal(t, e.call(2, auth...), http.StatusTooManyRequests, "tenant")
	if m := got.Error.Message; strings.Contains(m, "will work then") || !strings.Contains(m, "once one of the calls in flight on this server has finished too (limit 1)") {
		t.Fatalf("tenant refusal with the concurrency cap full: %q", m)
	}
	if status := <-done; status != http.StatusOK {
		t.Fatalf("the slow call: %d", status)
	}
}

// A plan's concurrency caps its identities; it never raises the zone-wide
// cap, which is the server's, and a lone number in a tier is the
// identity's cap, not a zone-wide one.
func TestPlanConcurrencyNeverRaisesTheZoneCap(t *testing.T) {
	e := startSite(t, `route {
	vars plan {http.request.header.X-Plan}
	mcp_ratelimit {
		zone planconc
		tenant off
		quota off
		concurrency 2 per_identity 3
		tier big {
			match {http.vars.plan} big
			concurrency 10 per_identity 10
		}
		tier one {
			match {http.vars.plan} one
			concurrency 1
		}
	}
	reverse_proxy $BACKEND
}`)
	big := []string{"Authorization", "Bearer valid-conc-big", "X-Plan", "big"}
	e.prove("valid-conc-big", "X-Plan", "big")
	e.prove("valid-conc-a")
	e.prove("valid-conc-b")
	a := e.slowInBackground(2500, "Authorization", "Bearer valid-conc-a")
	b := e.slowInBackground(2500, "Authorization", "Bearer valid-conc-b")
	harness.Eventually(t, 5*time.Second, "two calls in flight", func() bool { return e.inflight("planconc") == 2 })
	got := refusal(t, e.callTool(1, "echo", big...), http.StatusTooManyRequests, "concurrency")
	if !strings.Contains(got.Error.Message, "on this server (limit 2)") {
		t.Fatalf("the big plan's call is not held to the zone's cap of 2: %s", got.Error.Message)
	}
	<-a
	<-b

	one1 := []string{"Authorization", "Bearer valid-conc-one1", "X-Plan", "one"}
	one2 := []string{"Authorization", "Bearer valid-conc-one2", "X-Plan", "one"}
	e.prove("valid-conc-one1", "X-Plan", "one")
	e.prove("valid-conc-one2", "X-Plan", "one")
	held := e.slowInBackground(2500, one1...)
	harness.Eventually(t, 5*time.Second, "one call in flight", func() bool { return e.inflight("planconc") == 1 })
	got = refusal(t, e.callTool(2, "echo", one1...), http.StatusTooManyRequests, "concurrency")
	if !strings.Contains(got.Error.Message, "for this API key (limit 1)") {
		t.Fatalf("a lone number in a tier is not the identity's cap: %s", got.Error.Message)
	}
	// Another identity of the same tier has its own cap of 1.
	e.passes(1, "echo", one2...)
	<-held
}

// Every identity is counted in each period some limit of the zone sets,
// even under limits that set none there: a move to a tier (or an
// override) that limits that period is held to what was used in it.
func TestTierLimitingAnotherPeriodSeesWhatWasUsedInIt(t *testing.T) {
	e := startSite(t, `route /mcp* {
	vars plan {http.request.header.X-Plan}
	mcp_ratelimit {
		zone periods
		tenant 100/s burst 100
		quota 100/day
		tier capped {
			match {vars.plan} capped
			quota 3/month
		}
	}
	reverse_proxy $BACKEND
}`)
	const tok = "valid-periods"
	e.prove(tok)
	e.passes(5, "echo", "Authorization", "Bearer "+tok)
	before := e.backend.ToolCalls()
	refusal(t, e.callTool(1, "echo", "Authorization", "Bearer "+tok, "X-Plan", "capped"), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call under 3/month after 5 this month")
}
