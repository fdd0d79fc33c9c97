package mcplimit_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// zoneStatus returns GET /mcp_ratelimit/<zone>.
func zoneStatusOf(t *testing.T, c *harness.Caddy, zone string) map[string]any {
	t.Helper()
	var out map[string]any
	c.AdminJSON(t, "/mcp_ratelimit/"+zone, &out)
	return out
}

// settleAfterReload waits until the site answers new connections
// steadily after a config load. On Linux Caddy rebinds the port with
// SO_REUSEPORT, so for a moment after a load the old socket can still
// take a connection and then reset it when it closes (a Caddy/kernel
// behaviour, not this module's). The probes are notifications from a
// proven identity, which no layer charges.
func settleAfterReload(t *testing.T, e *env, auth string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for ok := 0; ok < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("the site did not answer steadily after the reload")
		}
		req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			ok = 0
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("a notification was refused: it must cost nothing")
		}
		ok++
	}
}

func jsonEqual(t *testing.T, got any, want string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %s: %v", want, err)
	}
	g, _ := json.Marshal(got)
	var gv any
	_ = json.Unmarshal(g, &gv)
	return reflect.DeepEqual(gv, w)
}

// forceReload makes Caddy reload even an unchanged config.
var forceReload = []string{"Cache-Control", "must-revalidate"}

func TestReloadAndPatchKeepBucketsAndApplyTheNewLimit(t *testing.T) {
	e := start(t, "zone reload\npreauth 1/m burst 5\ntenant 1/m burst 3\nquota off")
	const auth = "Bearer valid-rita"
	e.prove("valid-rita")
	for i := range 2 {
		if r := e.call(i, "Authorization", auth); r.Status != http.StatusOK {
			t.Fatalf("call %d within burst: %d %s", i, r.Status, r.Body)
		}
	}

	// 1. POST the running config back to /load, unchanged and forced.
	st, cfg := e.caddy.AdminDo(t, http.MethodGet, "/config/", nil)
	if st != http.StatusOK {
		t.Fatalf("GET /config/: %d", st)
	}
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", cfg); st != http.StatusOK {
		t.Fatalf("POST /load (same config): %d %s", st, body)
	}
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", cfg, forceReload...); st != http.StatusOK {
		t.Fatalf("POST /load (forced reload): %d %s", st, body)
	}
	settleAfterReload(t, e, auth)
	// The bucket kept its level: one token left of 3, not a fresh burst.
	if r := e.call(10, "Authorization", auth); r.Status != http.StatusOK {
		t.Fatalf("the last token of the burst was lost across the reload: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(11, "Authorization", auth), http.StatusTooManyRequests, "tenant")

	// The identity stayed proven across the reload (no pre-auth refusal).
	s := zoneStatusOf(t, e.caddy, "reload")
	tracked := s["tracked"].(map[string]any)
	if tracked["known"].(float64) < 1 || tracked["tenant_buckets"].(float64) < 1 {
		t.Fatalf("the zone lost its state across the reload: tracked %v", tracked)
	}

	// 2. PATCH the tenant limit live: a larger burst and a faster rate.
	path := e.caddy.HandlerPath(t, "mcp_ratelimit")
	if st, body := e.caddy.AdminDo(t, http.MethodPatch, path+"/tenant", []byte(`{"rate":"2/m","burst":10}`)); st != http.StatusOK {
		t.Fatalf("PATCH %s/tenant: %d %s", path, st, body)
	}
	settleAfterReload(t, e, auth)
	s = zoneStatusOf(t, e.caddy, "reload")
	limits := s["limits"].(map[string]any)
	if !jsonEqual(t, limits["tenant"], `{"rate":"2/m","burst":10}`) {
		t.Fatalf("the admin API does not show the patched tenant limit: %v", limits["tenant"])
	}
	// A larger burst is no fresh burst: the drained bucket stays drained.
	refusal(t, e.call(12, "Authorization", auth), http.StatusTooManyRequests, "tenant")
	tracked = s["tracked"].(map[string]any)
	if tracked["known"].(float64) < 1 || tracked["tenant_buckets"].(float64) < 1 {
		t.Fatalf("the zone lost its state across the PATCH: tracked %v", tracked)
	}
	refusals := s["refusals"].(map[string]any)
	if refusals["tenant"].(float64) < 1 {
		t.Fatalf("tenant refusals counted before the PATCH were lost: %v", refusals)
	}

	// Requests keep working: another tenant gets its (new) burst, and the
	// drained tenant's non-metered traffic passes.
	e.prove("valid-sam")
	for i := range 10 {
		if r := e.call(20+i, "Authorization", "Bearer valid-sam"); r.Status != http.StatusOK {
			t.Fatalf("new tenant call %d under the patched burst of 10: %d %s", i, r.Status, r.Body)
		}
	}
	refusal(t, e.call(30, "Authorization", "Bearer valid-sam"), http.StatusTooManyRequests, "tenant")
	if r := e.post(`{"jsonrpc":"2.0","id":40,"method":"tools/list"}`, "Authorization", auth); r.Status == http.StatusTooManyRequests {
		t.Fatalf("a non-metered request was refused after the PATCH: %s", r.Body)
	}

	// 3. Switch the tenant layer off live.
	if st, body := e.caddy.AdminDo(t, http.MethodPatch, path+"/tenant", []byte(`{"off":true}`)); st != http.StatusOK {
		t.Fatalf("PATCH tenant off: %d %s", st, body)
	}
	settleAfterReload(t, e, auth)
	if got := zoneStatusOf(t, e.caddy, "reload")["limits"].(map[string]any)["tenant"]; got != "off" {
		t.Fatalf("tenant off not in force: %v", got)
	}
	if r := e.call(50, "Authorization", auth); r.Status != http.StatusOK {
		t.Fatalf("with the tenant layer off the call must pass: %d %s", r.Status, r.Body)
	}
}

func TestDefaultsAreInForceForAnEmptyBlock(t *testing.T) {
	e := start(t, "")
	got := zoneStatusOf(t, e.caddy, "default")["limits"].(map[string]any)
	want := map[string]string{
		"preauth":        `{"rate":"1/s","burst":5}`,
		"tenant":         `{"rate":"5/s","burst":20}`,
		"quota":          `{"day":5000}`,
		"global":         `{"rate":"100/s","burst":200}`,
		"anonymous":      `"off"`,
		"concurrency":    `{"max":0,"per_identity":0}`,
		"meter":          `["tools/call"]`,
		"max_body":       `1048576`,
		"max_batch":      `32`,
		"known_ttl":      `"24h0m0s"`,
		"max_known":      `100000`,
		"flush_interval": `"30s"`,
		"ipv4_prefix":    `32`,
		"ipv6_prefix":    `64`,
		"error_code":     `-31004`,
		"refuse_with":    `"status"`,
		"dry_run":        `false`,
		"trust_identity": `false`,
		"gateways":       `[]`,
		"tiers":          `[]`,
		"overrides":      `{}`,
	}
	for k, w := range want {
		if !jsonEqual(t, got[k], w) {
			t.Errorf("default %s = %v, want %s", k, got[k], w)
		}
	}
	if _, ok := got["group"]; ok {
		t.Errorf("no group layer by default: %v", got["group"])
	}
}

func TestAdaptedJSONCanBeEditedAndPostedToLoad(t *testing.T) {
	e := start(t, "zone rt\ntenant 1/m burst 5\nquota off")
	// Adapt a Caddyfile for the same ports, edit the handler's JSON, POST it.
	site := "mcp_ratelimit {\nzone rt\ntenant 1/m burst 5\nquota off\n}\nreverse_proxy $BACKEND"
	js := harness.Adapt(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
	var cfg any
	if err := json.Unmarshal(js, &cfg); err != nil {
		t.Fatal(err)
	}
	hs := handlersInOrder(cfg)
	var h map[string]any
	for _, x := range hs {
		if x["handler"] == "mcp_ratelimit" {
			h = x
		}
	}
	if h == nil {
		t.Fatalf("no mcp_ratelimit handler in %s", js)
	}
	h["tenant"] = map[string]any{"rate": "1/m", "burst": 2}
	h["refuse_with"] = "jsonrpc"
	h["error_code"] = -31050
	edited, _ := json.Marshal(cfg)
	e.prove("valid-tom") // before the load: the zone's known-good set survives it
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", edited); st != http.StatusOK {
		t.Fatalf("POST /load of edited adapt output: %d %s", st, body)
	}
	settleAfterReload(t, e, "Bearer valid-tom")
	limits := zoneStatusOf(t, e.caddy, "rt")["limits"].(map[string]any)
	if !jsonEqual(t, limits["tenant"], `{"rate":"1/m","burst":2}`) || limits["refuse_with"] != "jsonrpc" || limits["error_code"] != float64(-31050) {
		t.Fatalf("edited limits not in force: %v", limits)
	}
	e.spend("valid-tom", 2)
	r := e.call(3, "Authorization", "Bearer valid-tom")
	if r.Status != http.StatusOK {
		t.Fatalf("refuse_with jsonrpc answers HTTP 200, got %d %s", r.Status, r.Body)
	}
	var got rpcError
	r.JSON(t, &got)
	if got.Error == nil || got.Error.Code != -31050 || got.Error.Data.Limit != "tenant" {
		t.Fatalf("want a tenant refusal with code -31050: %s", r.Body)
	}

	// The round trip also works back: GET /config/ output POSTs cleanly.
	_, now := e.caddy.AdminDo(t, http.MethodGet, "/config/", nil)
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", now, forceReload...); st != http.StatusOK {
		t.Fatalf("re-POSTing GET /config/: %d %s", st, body)
	}
}

func TestZoneIsReleasedWhenNoConfigUsesIt(t *testing.T) {
	e := start(t, "zone leaving\nquota off")
	if st, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/leaving", nil); st != http.StatusOK {
		t.Fatalf("zone not there while in use: %d %s", st, body)
	}
	// The same site with another zone: "leaving" has no handler left.
	e.reloadWith(t, "zone staying\nquota off")
	if st, _ := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/leaving", nil); st != http.StatusNotFound {
		t.Fatalf("a zone no config uses is still held: GET answered %d", st)
	}
	if st, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/staying", nil); st != http.StatusOK {
		t.Fatalf("the new zone is missing: %d %s", st, body)
	}
}

// A zone a load leaves unused and a later load names again (renamed and
// back, or its route deleted and added again: two loads through the
// admin API) finds its buckets where they were: no fresh burst for a
// tenant or a keyless caller; its metrics go on from their totals. The same name under another fingerprint
// key, or in another storage, is another zone: its buckets start full.
func TestZoneRenamedAndBackKeepsItsBuckets(t *testing.T) {
	const limits = "preauth 1/m burst 2\ntenant 1/m burst 3\nquota off"
	e := start(t, "zone parked\n"+limits)
	const auth = "Bearer valid-parked"
	e.prove("valid-parked")
	e.spend("valid-parked", 3)
	refusal(t, e.call(1, "Authorization", auth), http.StatusTooManyRequests, "tenant")
	if r := e.call(2); r.Status != http.StatusOK {
		t.Fatalf("the keyless caller's last pre-auth token: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(3), http.StatusTooManyRequests, "preauth")

	e.reloadWith(t, "zone parked_elsewhere\n"+limits)
	e.reloadWith(t, "zone parked\n"+limits)
	settleAfterReload(t, e, auth)
	refusal(t, e.call(4, "Authorization", auth), http.StatusTooManyRequests, "tenant")
	refusal(t, e.call(5), http.StatusTooManyRequests, "preauth")
	// Its metrics' totals went on too.
	if got := zoneStatusOf(t, e.caddy, "parked")["refusals"].(map[string]any); got["tenant"] != 2.0 || got["preauth"] != 2.0 {
		t.Fatalf("refusals after the zone came back: %v, want 2 tenant and 2 pre-auth", got)
	}
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_refusals_total{layer="tenant",zone="parked"}`); v != 2 {
		t.Fatalf("mcp_ratelimit_refusals_total for the tenant layer is %v after the zone came back, want 2", v)
	}

	// Under another key in the same storage (one restored from elsewhere,
	// say) the bucket keys were made under the old one: buckets start
	// full. The settling probes are unproven under that key, each paying
	// a pre-auth token of the larger burst: a parked drained bucket has
	// none.
	e.reloadWith(t, "zone parked_elsewhere\n"+limits)
	keyFile := filepath.Join(e.caddy.Storage, "mcp_ratelimit", "parked", "fingerprint.key")
	if err := os.WriteFile(keyFile, bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	const wider = "preauth 1/m burst 20\nquota off"
	e.reloadWith(t, "zone parked\n"+wider)
	settleAfterReload(t, e, auth)
	for i := 0; ; i++ {
		r := e.call(6)
		if r.Status == http.StatusTooManyRequests {
			break
		}
		if r.Status != http.StatusOK || i == 20 {
			t.Fatalf("keyless call %d under another key: %d %s", i+1, r.Status, r.Body)
		}
	}
	// In another storage, under the same key (the host's copy of it), it
	// is another deployment's zone: buckets start full too.
	e.reloadWith(t, "zone parked_elsewhere\n"+limits)
	e.caddy.Load(t, harness.Config("mcp_ratelimit {\nzone parked\n"+wider+"\n}\nreverse_proxy $BACKEND",
		e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, t.TempDir(), ""))
	settleAfterReload(t, e, auth)
	if r := e.call(7); r.Status != http.StatusOK {
		t.Fatalf("a keyless call to the zone in another storage: %d %s", r.Status, r.Body)
	}
}

// A call in flight across the two loads that take its zone away and back
// is still counted in flight, and its slot of the concurrency cap is held
// until it ends; the zone's gauges read the zone that took them up.
func TestZoneRenamedAndBackKeepsItsCallsInFlight(t *testing.T) {
	const limits = "tenant 100/s burst 100\nquota off\nconcurrency 1"
	e := start(t, "zone parked_inflight\n"+limits)
	h := []string{"Authorization", "Bearer valid-parked-inflight"}
	e.prove("valid-parked-inflight")
	done := e.slowInBackground(3000, h...)
	harness.Eventually(t, 5*time.Second, "the slow call in flight", func() bool { return e.inflight("parked_inflight") == 1 })
	e.reloadWith(t, "zone parked_inflight_elsewhere\n"+limits)
	e.reloadWith(t, "zone parked_inflight\n"+limits)
	settleAfterReload(t, e, h[1])
	if n := e.inflight("parked_inflight"); n != 1 {
		t.Fatalf("%d calls in flight after the zone came back, want the slow one", n)
	}
	refusal(t, e.call(2, h...), http.StatusTooManyRequests, "concurrency")
	// The gauges read the zone that took them up: a key proven since
	// counts among the known.
	e.prove("valid-parked-since")
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_tracked{kind="known",zone="parked_inflight"}`); v != 2 {
		t.Fatalf("mcp_ratelimit_tracked for known identities is %v after a second key was proven, want 2", v)
	}
	<-done
	harness.Eventually(t, 5*time.Second, "the slot freed", func() bool { return e.inflight("parked_inflight") == 0 })
	if r := e.call(3, h...); r.Status != http.StatusOK {
		t.Fatalf("a call once the slow one ended: %d %s", r.Status, r.Body)
	}
}

// A slower rate set live reaches a drained bucket even when its tenant
// stays away: the sweep must not drop the bucket as full on the old
// rate's word (it would come back full under the new rate, a fresh burst).
func TestSlowerRateSetLiveReachesAnIdleDrainedBucket(t *testing.T) {
	e := start(t, "zone slower\npreauth 100/s burst 100\ntenant 10/s burst 20\nquota off")
	const auth = "Bearer valid-idle"
	e.prove("valid-idle")
	batch := "[" + strings.Repeat(harness.ToolCall(1, "echo", map[string]any{"text": "x"})+",", 19) + harness.ToolCall(2, "echo", map[string]any{"text": "x"}) + "]"
	if r := e.post(batch, "Authorization", auth); r.Status != http.StatusOK {
		t.Fatalf("draining batch of 20: %d %s", r.Status, r.Body)
	}
	path := e.caddy.HandlerPath(t, "mcp_ratelimit")
	if st, body := e.caddy.AdminDo(t, http.MethodPatch, path+"/tenant", []byte(`{"rate":"1/m","burst":20}`)); st != http.StatusOK {
		t.Fatalf("PATCH tenant: %d %s", st, body)
	}
	// At 10/s the bucket would be full after 2s, and the sweep runs every
	// second: wait past that, sending nothing metered. Then an unrelated
	// change: it must not credit the idle bucket at the old rate either.
	time.Sleep(3500 * time.Millisecond)
	if st, body := e.caddy.AdminDo(t, http.MethodPatch, path+"/preauth", []byte(`{"rate":"99/s","burst":100}`)); st != http.StatusOK {
		t.Fatalf("PATCH preauth: %d %s", st, body)
	}
	time.Sleep(1500 * time.Millisecond)
	settleAfterReload(t, e, auth)
	if r := e.post(batch, "Authorization", auth); r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), `"limit":"tenant"`) {
		t.Fatalf("the same batch after 3.5s at 1/m: %d %.200s, want a tenant refusal", r.Status, r.Body)
	}
}

// A config load that Caddy rejects (here a second handler fails to
// provision) leaves the running zone as it was: its limits, and its proven
// identities, which a lower max_known in the rejected config would evict.
func TestRejectedLoadLeavesTheZoneAsItWas(t *testing.T) {
	const block = "zone kept\npreauth 100/s burst 100\ntenant 10/m burst 10\nquota off"
	e := start(t, block)
	for _, tok := range []string{"valid-k1", "valid-k2", "valid-k3"} {
		e.prove(tok)
	}
	site := "mcp_ratelimit {\n" + strings.Replace(block, "tenant 10/m burst 10", "tenant 1/m burst 1\nmax_known 2", 1) + "\n}\nmcp_ratelimit {\n\tzone other\n}\nreverse_proxy $BACKEND"
	loadRejected(t, e, site, "other")
	time.Sleep(500 * time.Millisecond) // the zone's loop would apply new capacities by now
	s := zoneStatusOf(t, e.caddy, "kept")
	if !jsonEqual(t, s["limits"].(map[string]any)["tenant"], `{"rate":"10/m","burst":10}`) {
		t.Fatalf("the rejected load changed the tenant limit: %v", s["limits"].(map[string]any)["tenant"])
	}
	if known := s["tracked"].(map[string]any)["known"].(float64); known != 3 {
		t.Fatalf("%v proven identities after a rejected load with max_known 2, want all 3", known)
	}
}

func init() {
	caddy.RegisterModule(slowFailingHandler{})
}

// slowFailingHandler fails to provision after a while: a config load
// Caddy rejects only once the zone's run loop has ticked several times.
type slowFailingHandler struct{}

// CaddyModule returns the Caddy module information.
func (slowFailingHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.mcprl_slow_fail", New: func() caddy.Module { return new(slowFailingHandler) }}
}

// Provision waits, then fails.
func (*slowFailingHandler) Provision(caddy.Context) error {
	time.Sleep(400 * time.Millisecond)
	return errors.New("mcprl_slow_fail fails, as the test wants")
}

// ServeHTTP is never reached: the handler never provisions.
func (*slowFailingHandler) ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error {
	return nil
}

// A config load that Caddy rejects only after a while (here a handler
// that takes 400ms to fail) lowers nothing in the meantime either: the
// zone applies the most generous max_known of the handlers holding it,
// and the old ones hold it until a load is in force.
func TestSlowRejectedLoadEvictsNothing(t *testing.T) {
	const block = "zone kept_slow\npreauth 100/s burst 100\nquota off"
	e := start(t, block)
	for _, tok := range []string{"valid-s1", "valid-s2", "valid-s3"} {
		e.prove(tok)
	}
	site := "route {\nmcp_ratelimit {\n" + block + "\nmax_known 1\n}\nrespond 204\n}"
	js := harness.Adapt(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
	bad := strings.Replace(string(js), `{"handler":"static_response"`, `{"handler":"mcprl_slow_fail"},{"handler":"static_response"`, 1)
	if bad == string(js) {
		t.Fatalf("no static_response handler in the adapted config: %s", js)
	}
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", []byte(bad)); st == http.StatusOK {
		t.Fatalf("POST /load of a config with a failing handler: %d %s, want it rejected", st, body)
	}
	time.Sleep(300 * time.Millisecond)
	if known := zoneStatusOf(t, e.caddy, "kept_slow")["tracked"].(map[string]any)["known"].(float64); known != 3 {
		t.Fatalf("%v proven identities after a slow rejected load with max_known 1, want all 3", known)
	}
	// The same load without the failing handler is in force: its lower
	// max_known applies, by the time the load returns.
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", js); st != http.StatusOK {
		t.Fatalf("POST /load: %d %s", st, body)
	}
	if known := zoneStatusOf(t, e.caddy, "kept_slow")["tracked"].(map[string]any)["known"].(float64); known != 1 {
		t.Fatalf("%v proven identities once a load with max_known 1 returned, want 1", known)
	}
}

// A reload that leaves a bucket set's limits as they were (here two that
// change max_known) does not touch its buckets: an idle drained tenant
// keeps earning at its own rate, though a slower tier exists, and the
// wait it was told holds.
func TestUnrelatedReloadsKeepAnIdleBucketsRefill(t *testing.T) {
	e := start(t, "zone unrelated\npreauth 100/s burst 100\ntenant 1/s burst 1\nquota off\n"+
		"tier slow {\nmatch {http.request.header.X-Plan} slow\ntenant 1/h\n}")
	const auth = "Bearer valid-refill"
	e.prove("valid-refill")
	if r := e.call(1, "Authorization", auth); r.Status != http.StatusOK {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	drained := time.Now()
	refusal(t, e.call(2, "Authorization", auth), http.StatusTooManyRequests, "tenant")
	path := e.caddy.HandlerPath(t, "mcp_ratelimit")
	for i, n := range []string{"5000", "5001"} {
		if i > 0 {
			time.Sleep(800 * time.Millisecond)
		}
		if st, body := e.caddy.AdminDo(t, http.MethodPost, path+"/max_known", []byte(n)); st != http.StatusOK {
			t.Fatalf("POST max_known: %d %s", st, body)
		}
		settleAfterReload(t, e, auth)
	}
	time.Sleep(time.Until(drained.Add(1300 * time.Millisecond)))
	if r := e.call(3, "Authorization", auth); r.Status != http.StatusOK {
		t.Fatalf("1.3s after draining a 1/s bucket, across two reloads that changed no limit: %d %s", r.Status, r.Body)
	}
}

// Overrides are their identities' own limits. Pushing them live leaves
// every other bucket as it is (a drained tenant idle across two pushes
// keeps earning at its own rate, though a slower tier exists), and the
// identity they raise earns its new rate from the push on, never for the
// time before it.
func TestLiveOverridesRetuneTheirIdentitiesOnly(t *testing.T) {
	e := start(t, "zone ovr\npreauth 100/s burst 100\ntenant 1/s burst 1\nquota off\n"+
		"tier slow {\nmatch {http.request.header.X-Plan} slow\ntenant 1/h burst 1\n}")
	const frank, slow = "Bearer valid-frank", "Bearer valid-slow"
	e.prove("valid-frank")
	e.prove("valid-slow", "X-Plan", "slow")
	if r := e.call(1, "Authorization", frank); r.Status != http.StatusOK {
		t.Fatalf("frank: %d %s", r.Status, r.Body)
	}
	drained := time.Now()
	if r := e.call(1, "Authorization", slow, "X-Plan", "slow"); r.Status != http.StatusOK {
		t.Fatalf("slow: %d %s", r.Status, r.Body)
	}
	hp := e.caddy.HandlerPath(t, "mcp_ratelimit")
	other := fingerprintOf(t, e.caddy.Storage, "ovr", "Bearer valid-nobody")
	fpSlow := fingerprintOf(t, e.caddy.Storage, "ovr", slow)
	if st, body := e.caddy.AdminDo(t, http.MethodPut, hp+"/overrides", fmt.Appendf(nil, `{%q:{"tenant":{"rate":"5/s","burst":5}}}`, other)); st != http.StatusOK {
		t.Fatalf("PUT overrides: %d %s", st, body)
	}
	settleAfterReload(t, e, frank)
	time.Sleep(time.Until(drained.Add(1200 * time.Millisecond)))
	both := fmt.Appendf(nil, `{%q:{"tenant":{"rate":"5/s","burst":5}},%q:{"tenant":{"rate":"2/s","burst":1}}}`, other, fpSlow)
	if st, body := e.caddy.AdminDo(t, http.MethodPatch, hp+"/overrides", both); st != http.StatusOK {
		t.Fatalf("PATCH overrides: %d %s", st, body)
	}
	settleAfterReload(t, e, frank)
	// 1.2s idle at 1/h before its override: nothing banked, and 2/s only
	// since the push.
	refusal(t, e.call(2, "Authorization", slow, "X-Plan", "slow"), http.StatusTooManyRequests, "tenant")
	time.Sleep(time.Until(drained.Add(1300 * time.Millisecond)))
	if r := e.call(2, "Authorization", frank); r.Status != http.StatusOK {
		t.Fatalf("frank 1.3s after draining at 1/s, across two pushes of others' overrides: %d %s", r.Status, r.Body)
	}
	time.Sleep(1100 * time.Millisecond)
	if r := e.call(3, "Authorization", slow, "X-Plan", "slow"); r.Status != http.StatusOK {
		t.Fatalf("slow 1.1s after its override to 2/s: %d %s", r.Status, r.Body)
	}
}

// With `store redis` too, a raised rate never credits the time before the
// change at the new rate: a tenant drained at 1/h and idle for 8s is not
// handed 2 calls by a change to 15/m (nor a fresh burst), whether the
// tenant limit changes or an override of its own is pushed. At 15/m the
// reload itself may take up to 4s on a busy machine before a token comes.
func TestRaisedRateOnRedisCreditsIdleTimeAtTheOldRate(t *testing.T) {
	rd := harness.StartRedis(t)
	for _, how := range []string{"tenant", "override"} {
		t.Run(how, func(t *testing.T) {
			zone, auth := "raise_redis_"+how, "Bearer valid-raise-"+how
			e := start(t, "zone "+zone+"\npreauth 100/s burst 100\ntenant 1/h burst 2\nquota off\nglobal off\nstore redis "+rd.URL)
			e.prove("valid-raise-" + how)
			for i := range 2 {
				if r := e.call(i, "Authorization", auth); r.Status != http.StatusOK {
					t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
				}
			}
			prefix := "mcprl:{" + zone + "}:b:t/"
			fp := strings.TrimPrefix(rd.Do(t, "EVAL", "return redis.call('KEYS', ARGV[1])[1]", "0", prefix+"*"), prefix)
			time.Sleep(8 * time.Second) // 2 tokens at 15/m, none at 1/h
			path := e.caddy.HandlerPath(t, "mcp_ratelimit")
			method, sub, body := http.MethodPatch, "/tenant", `{"rate":"15/m","burst":20}`
			if how == "override" {
				method, sub, body = http.MethodPut, "/overrides", fmt.Sprintf(`{%q:{"tenant":{"rate":"30/m","burst":20}}}`, fp)
			}
			if st, b := e.caddy.AdminDo(t, method, path+sub, []byte(body)); st != http.StatusOK {
				t.Fatalf("%s %s: %d %s", method, sub, st, b)
			}
			settleAfterReload(t, e, auth)
			refusal(t, e.call(3, "Authorization", auth), http.StatusTooManyRequests, "tenant")
		})
	}
}

// A reload that moves the zone to another storage (the global `storage`
// option) confirms its fingerprint key there within seconds: an empty
// storage gets the key in use, so an instance started on it fingerprints
// alike; one that already holds a key (instances already use it) has
// that key adopted, so fingerprints agree on it.
func TestReloadToAnotherStorageConfirmsTheFingerprintKey(t *testing.T) {
	keyIn := func(storage, zone string) []byte {
		b, _ := os.ReadFile(filepath.Join(storage, "mcp_ratelimit", zone, "fingerprint.key"))
		return b
	}
	t.Run("empty", func(t *testing.T) {
		const zone, token = "moved_empty", "valid-moved-empty"
		first, second := t.TempDir(), t.TempDir()
		e := start(t, "zone "+zone, harness.Options{Storage: first})
		e.prove(token)
		key := keyIn(first, zone)
		e = start(t, "zone "+zone, harness.Options{Storage: second})
		harness.Eventually(t, 5*time.Second, "the key in use stored in the new storage", func() bool {
			return bytes.Equal(keyIn(second, zone), key)
		})
		e.spend(token, 1) // still proven: the fingerprint did not change
	})
	t.Run("holding a key", func(t *testing.T) {
		const zone, token = "moved_held", "valid-moved-held"
		first, second := t.TempDir(), t.TempDir()
		e := start(t, "zone "+zone, harness.Options{Storage: first})
		e.prove(token)
		held := make([]byte, 32)
		_, _ = rand.Read(held)
		if err := os.MkdirAll(filepath.Join(second, "mcp_ratelimit", zone), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(second, "mcp_ratelimit", zone, "fingerprint.key"), held, 0o600); err != nil {
			t.Fatal(err)
		}
		e = start(t, "zone "+zone, harness.Options{Storage: second})
		want := fingerprintOf(t, second, zone, "Bearer "+token)
		harness.Eventually(t, 5*time.Second, "the new storage's key adopted", func() bool {
			e.prove(token)
			st, _ := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/"+zone+"/identities/"+want, nil)
			return st == http.StatusOK
		})
		if !bytes.Equal(keyIn(second, zone), held) {
			t.Fatal("the new storage's key was replaced")
		}
	})
}

// The saved proven set keeps identities as long as the zone does: for the
// most generous known_ttl of its handlers, not the last-loaded one's.
func TestSavedKnownSetFollowsTheZonesKnownTTL(t *testing.T) {
	storage := t.TempDir()
	e := startSite(t, `route /long* {
	mcp_ratelimit {
		zone ttls
		known_ttl 1m
		flush_interval 1s
	}
	reverse_proxy $BACKEND
}
route /mcp* {
	mcp_ratelimit {
		zone ttls
		known_ttl 1s
		flush_interval 1s
	}
	reverse_proxy $BACKEND
}`, harness.Options{Storage: storage})
	e.prove("valid-ttl-old")
	fp := fingerprintOf(t, storage, "ttls", "Bearer valid-ttl-old")
	time.Sleep(2500 * time.Millisecond)
	e.prove("valid-ttl-new") // a new proof: the set is saved at the next flush
	harness.Eventually(t, 5*time.Second, "the new proof saved", func() bool {
		b, _ := os.ReadFile(filepath.Join(storage, "mcp_ratelimit", "ttls", "known"))
		return strings.Count(string(b), "\n") >= 1 && strings.Contains(string(b), fingerprintOf(t, storage, "ttls", "Bearer valid-ttl-new"))
	})
	if b, _ := os.ReadFile(filepath.Join(storage, "mcp_ratelimit", "ttls", "known")); !strings.Contains(string(b), fp) {
		t.Fatalf("stored known set %q lacks an identity used 2.5s ago under the zone's known_ttl of 1m", b)
	}
}

// Caddy's admin endpoint serves the metrics registry of the config it
// last tried to load, even one it rejected: a rejected load keeps every
// running zone on /metrics, a zone that only the rejected config had is
// not there, and a zone a load drops goes.
func TestRejectedLoadKeepsRunningZonesOnMetrics(t *testing.T) {
	e := startSite(t, "mcp_ratelimit /a* {\nzone metrics_kept\n}\nmcp_ratelimit /b* {\nzone metrics_dropped\n}\nreverse_proxy $BACKEND")
	// The rejected config has no handler of metrics_dropped, and may fail
	// before it provisions any other.
	site := "mcp_ratelimit /a* {\nzone metrics_kept\n}\nmcp_ratelimit /c* {\nzone metrics_new\n}\nmcp_ratelimit /d* {\nzone metrics_bad\n}\nreverse_proxy $BACKEND"
	js := loadRejected(t, e, site, "metrics_bad")
	zonesOnMetrics := func() map[string]bool {
		_, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
		on := map[string]bool{}
		for _, z := range []string{"metrics_kept", "metrics_dropped", "metrics_new"} {
			on[z] = strings.Contains(string(body), `mcp_ratelimit_admitted_total{zone="`+z+`"}`)
		}
		return on
	}
	if on := zonesOnMetrics(); !on["metrics_kept"] || !on["metrics_dropped"] || on["metrics_new"] {
		t.Fatalf("zones on /metrics after a rejected load: %v, want the two running ones only", on)
	}
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", js); st != http.StatusOK {
		t.Fatalf("POST /load: %d %s", st, body)
	}
	harness.Eventually(t, 5*time.Second, "the dropped zone off /metrics", func() bool {
		on := zonesOnMetrics()
		return on["metrics_kept"] && on["metrics_new"] && !on["metrics_dropped"]
	})
}

// loadRejected posts site's config with the handler of zone bad made
// invalid (refuse_with bogus), checks that Caddy rejects it, and returns
// the config as adapted, valid.
func loadRejected(t *testing.T, e *env, site, bad string) []byte {
	t.Helper()
	js := harness.Adapt(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
	invalid := strings.Replace(string(js), `"zone":"`+bad+`"`, `"zone":"`+bad+`","refuse_with":"bogus"`, 1)
	if invalid == string(js) {
		t.Fatalf("no handler of zone %s in the adapted config: %s", bad, js)
	}
	if st, body := e.caddy.AdminDo(t, http.MethodPost, "/load", []byte(invalid)); st == http.StatusOK {
		t.Fatalf("POST /load of a config with refuse_with bogus: %d %s, want it rejected", st, body)
	}
	return js
}

// A call in flight when a reload removes its zone still proves its caller
// and is still counted: Caddy stops the old config's servers without
// waiting for their requests, then cleans its handlers up, so the zone
// outlives a handler until the handler's requests have finished. It did
// not: the zone flushed and went while the backend still ran the call,
// and what the answer taught it was lost.
func TestReloadRemovingTheZoneKeepsWhatItsCallsInFlightLearn(t *testing.T) {
	const zone, token = "reload_inflight_learn", "valid-inflight-learn"
	skipNearReset(t, nextDay)
	block := "zone " + zone + "\nquota 100/day\nflush_interval 1s"
	e := start(t, block)
	done := e.slowInBackground(1500, "Authorization", "Bearer "+token)
	harness.Eventually(t, 5*time.Second, "the slow call at the backend", func() bool { return e.backend.ToolCalls() == 1 })
	e.caddy.Load(t, harness.Config("reverse_proxy $BACKEND", e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
	if s := <-done; s != http.StatusOK {
		t.Fatalf("the slow call: status %d, want 200", s)
	}
	e.reloadWith(t, block)
	fp := fingerprintOf(t, e.caddy.Storage, zone, "Bearer "+token)
	var id map[string]any
	e.caddy.AdminJSON(t, "/mcp_ratelimit/"+zone+"/identities/"+fp, &id)
	if id["proven"] != true {
		t.Fatalf("identity %v: want it proven by the call that ended after its zone was unloaded", id)
	}
	if used, _ := id["quota_used"].(map[string]any); used["day"] != float64(1) {
		t.Fatalf("identity quota_used %v, want day 1", id["quota_used"])
	}
}
