package mcplimit_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

func TestTenantBurstThenRefusalWithEveryField(t *testing.T) {
	e := start(t, "tenant 1/m burst 3\nquota off")
	e.prove("valid-alice")
	for i := range 3 {
		if r := e.call(10+i, "Authorization", "Bearer valid-alice"); r.Status != http.StatusOK {
			t.Fatalf("call %d within burst: %d %s", i, r.Status, r.Body)
		}
	}
	before := e.backend.ToolCalls()
	r := e.call(7, "Authorization", "Bearer valid-alice")
	got := refusal(t, r, http.StatusTooManyRequests, "tenant")
	if got.JSONRPC != "2.0" || got.ID != float64(7) {
		t.Fatalf("refusal does not echo id 7: %s", r.Body)
	}
	if got.Error.Code != -31004 || got.Error.Data.Code != "TENANT_RATE_LIMITED" {
		t.Fatalf("code %d / %s", got.Error.Code, got.Error.Data.Code)
	}
	ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if ra < 59 || ra > 60 || got.Error.Data.RetryAfterSeconds != ra {
		t.Fatalf("Retry-After %d (data %d), want 60s for one token at 1/m", ra, got.Error.Data.RetryAfterSeconds)
	}
	if r.Header.Get("RateLimit-Policy") == "" || r.Header.Get("RateLimit") == "" {
		t.Fatalf("RateLimit headers missing: %v", r.Header)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a refused call reached the backend")
	}
}

func TestWaitingRetryAfterWorksAgain(t *testing.T) {
	e := start(t, "tenant 1/s burst 1\nquota off")
	e.prove("valid-bob")
	if r := e.call(1, "Authorization", "Bearer valid-bob"); r.Status != http.StatusOK {
		t.Fatalf("first call: %d", r.Status)
	}
	r := e.call(2, "Authorization", "Bearer valid-bob")
	refusal(t, r, http.StatusTooManyRequests, "tenant")
	ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	time.Sleep(time.Duration(ra) * time.Second)
	if r := e.call(3, "Authorization", "Bearer valid-bob"); r.Status != http.StatusOK {
		t.Fatalf("after waiting Retry-After (%ds): %d %s", ra, r.Status, r.Body)
	}
}

func TestRotatingGarbageCredentialsStayOnPreauthBudget(t *testing.T) {
	e := start(t, "preauth 1/m burst 5")
	passed := 0
	for i := range 50 {
		r := e.call(i, "Authorization", fmt.Sprintf("Bearer garbage-%d", rand.Int64()))
		if r.Status != http.StatusTooManyRequests {
			passed++
		} else {
			refusal(t, r, http.StatusTooManyRequests, "preauth")
		}
	}
	if passed > 5 {
		t.Fatalf("%d of 50 fresh bearers got past a pre-auth burst of 5", passed)
	}
	if n := e.backend.Requests(); n > 5 {
		t.Fatalf("backend saw %d requests", n)
	}
}

func TestRandomForwardedForWithoutTrustedProxiesMintsNothing(t *testing.T) {
	e := start(t, "preauth 1/m burst 3")
	passed := 0
	for i := range 20 {
		xff := fmt.Sprintf("203.0.%d.%d", rand.IntN(255), rand.IntN(255))
		if r := e.call(i, "X-Forwarded-For", xff); r.Status != http.StatusTooManyRequests {
			passed++
		}
	}
	if passed != 3 {
		t.Fatalf("%d passed, want exactly the burst of 3 for the one connection address", passed)
	}
}

func TestTrustedProxyRightmostUntrustedAddressIsTheKey(t *testing.T) {
	e := start(t, "preauth 1/m burst 2", harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n trusted_proxies_strict\n}"})
	// Same client behind the proxy: shares one budget whatever is
	// prepended to the header.
	for i := range 2 {
		xff := fmt.Sprintf("10.9.9.%d, 198.51.100.7", i)
		if r := e.call(i, "X-Forwarded-For", xff); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d", i, r.Status)
		}
	}
	r := e.call(3, "X-Forwarded-For", "10.1.1.1, 198.51.100.7")
	refusal(t, r, http.StatusTooManyRequests, "preauth")
	// Another client address has its own budget.
	if r := e.call(4, "X-Forwarded-For", "198.51.100.8"); r.Status != http.StatusOK {
		t.Fatalf("other client: %d", r.Status)
	}
}

func TestIPv6AddressesInOne64ShareABucket(t *testing.T) {
	e := start(t, "preauth 1/m burst 2", harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	for i, a := range []string{"2001:db8:1:1::1", "2001:db8:1:1:ffff::2"} {
		if r := e.call(i, "X-Forwarded-For", a); r.Status != http.StatusOK {
			t.Fatalf("%s: %d", a, r.Status)
		}
	}
	refusal(t, e.call(3, "X-Forwarded-For", "2001:db8:1:1:abcd::3"), http.StatusTooManyRequests, "preauth")
	if r := e.call(4, "X-Forwarded-For", "2001:db8:1:2::1"); r.Status != http.StatusOK {
		t.Fatalf("a different /64 must have its own bucket: %d", r.Status)
	}
}

func TestNewValidKeyProvesItselfThenGetsTenantBudget(t *testing.T) {
	e := start(t, "preauth 1/m burst 2\ntenant 1/m burst 5\nquota off")
	e.prove("valid-carol") // costs 1 pre-auth token, backend says 200
	e.spend("valid-carol", 5)
	refusal(t, e.call(9, "Authorization", "Bearer valid-carol"), http.StatusTooManyRequests, "tenant")
}

// A credential the backend has not answered yet is on its address's
// pre-auth budget alone (README, Trade-offs): calls it sends at once run
// within that budget, beyond its tenant rate, and are counted in its
// quota once a 2xx proves it. A per_identity cap counts them in flight.
func TestANewKeysCallsSentAtOnceAreBoundByAPerIdentityCap(t *testing.T) {
	for _, c := range []struct {
		name, cap string
		ran       int
	}{
		{"without a cap", "", 4},
		{"per_identity 1", "\nconcurrency per_identity 1", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			zone := "firstwave" + strconv.Itoa(c.ran)
			e := start(t, "zone "+zone+"\npreauth 100/s burst 100\ntenant 1/m burst 1\nquota 10/day"+c.cap)
			auth := []string{"Authorization", "Bearer valid-" + zone}
			var done []<-chan int
			for range 4 {
				done = append(done, e.slowInBackground(1500, auth...))
			}
			statuses := map[int]int{}
			for _, d := range done {
				statuses[<-d]++
			}
			if statuses[http.StatusOK] != c.ran || statuses[http.StatusTooManyRequests] != 4-c.ran || e.backend.ToolCalls() != int64(c.ran) {
				t.Fatalf("four calls at once from a new key: statuses %v, %d at the backend, want %d run", statuses, e.backend.ToolCalls(), c.ran)
			}
			fp := onlyIdentity(t, e, zone)
			if used := identityQuotaUsed(t, e, zone, fp)["day"]; used != int64(c.ran) {
				t.Fatalf("quota used %d after the 2xx proved the key, want the %d calls that ran", used, c.ran)
			}
		})
	}
}

func TestRejectingStatusForgetsButServerErrorDoesNot(t *testing.T) {
	e := start(t, "preauth 1/m burst 1\ntenant 10/s burst 20\nquota off")
	e.prove("valid-dave")
	// A 503 from the backend keeps the identity proven.
	if r := e.call(1, "Authorization", "Bearer valid-dave", "X-Demo-Status", "503"); r.Status != 503 {
		t.Fatalf("hook: %d", r.Status)
	}
	if r := e.call(2, "Authorization", "Bearer valid-dave"); r.Status != http.StatusOK {
		t.Fatalf("after a 503 the identity must stay proven: %d %s", r.Status, r.Body)
	}
	// A 401 forgets it: the next call is back on the (empty) pre-auth budget.
	if r := e.call(3, "Authorization", "Bearer valid-dave", "X-Demo-Status", "401"); r.Status != 401 {
		t.Fatalf("hook: %d", r.Status)
	}
	refusal(t, e.call(4, "Authorization", "Bearer valid-dave"), http.StatusTooManyRequests, "preauth")
}

// A rejection a later handler returns as an error, which Caddy writes
// after the limiter has handed the request on (basic_auth's 401, the error
// directive, a reverse_proxy handle_response route's error), forgets the
// identity as a written one does; a server error kept as an error does
// not, and neither does an upstream 429 turned into one, which counts as
// upstream throttling.
func TestRejectionReturnedAsAnErrorForgets(t *testing.T) {
	const site = `route {
	mcp_ratelimit {
		zone rejecterr
		preauth 1/m burst 1
		tenant 10/s burst 20
		quota off
	}
	@deny header X-Deny *
	error @deny "denied" {http.request.header.X-Deny}
	reverse_proxy $BACKEND {
		@failed status 4xx
		handle_response @failed {
			error "upstream said no" {rp.status_code}
		}
	}
}`
	for _, c := range []struct {
		rule   string
		proven bool // the identity is proven before the call
		hdr    []string
		status int
		after  int // proven identities after the call
	}{
		{"the error directive's 401", true, []string{"X-Deny", "401"}, 401, 0},
		{"the error directive's 403", true, []string{"X-Deny", "403"}, 403, 0},
		{"the error directive's 503", true, []string{"X-Deny", "503"}, 503, 1},
		{"an error's 2xx to a new key", false, []string{"X-Deny", "204"}, 204, 0},
		{"the backend's 401 made an error by handle_response", true, []string{"X-Demo-Status", "401"}, 401, 0},
		{"the backend's 429 made an error by handle_response", true, []string{"X-Demo-Status", "429"}, 429, 1},
	} {
		t.Run(c.rule, func(t *testing.T) {
			e := startSite(t, site)
			auth := []string{"Authorization", "Bearer valid-rejecterr"}
			if c.proven {
				e.prove("valid-rejecterr")
			}
			r := e.call(1, append(auth, c.hdr...)...)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d", r.Status, c.status)
			}
			if c.status == http.StatusTooManyRequests {
				if got := r.Header.Get("RateLimit"); got != "" {
					t.Fatalf("the backend's 429 carries the limiter's RateLimit %q", got)
				}
				if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_upstream_throttled_total{zone="rejecterr"}`); v != 1 {
					t.Fatalf("upstream_throttled %v after the backend's 429, want 1", v)
				}
			}
			var v struct {
				Identities []struct{} `json:"identities"`
			}
			e.caddy.AdminJSON(t, "/mcp_ratelimit/rejecterr/identities", &v)
			if len(v.Identities) != c.after {
				t.Fatalf("%d proven identities after %s, want %d", len(v.Identities), c.rule, c.after)
			}
		})
	}
}

// An identity forgotten after it was charged (any reject_status answer,
// here to a free tools/list) stays charged to its quota while unproven:
// forgetting and proving again must not make every other call free. A
// credential never counted is charged to no quota.
func TestForgottenIdentityStaysOnItsQuota(t *testing.T) {
	e := start(t, "zone forgetq\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 3/day")
	auth := []string{"Authorization", "Bearer valid-forgetq"}
	e.prove("valid-forgetq")
	e.spend("valid-forgetq", 1)
	for i := range 2 {
		e.forget(auth...)
		r := e.call(10+i, auth...)
		if r.Status != http.StatusOK {
			t.Fatalf("call %d of 3 after a forget: %d %s", i+2, r.Status, r.Body)
		}
		if !strings.Contains(r.Header.Get("RateLimit"), `"preauth"`) {
			t.Fatalf("the call after a forget was not on pre-auth: RateLimit %q", r.Header.Get("RateLimit"))
		}
	}
	before := e.backend.ToolCalls()
	e.forget(auth...)
	refusal(t, e.call(20, auth...), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a fourth call under quota 3/day, unproven after a forget")
	if r := e.call(21, "Authorization", "Bearer valid-fresh-forgetq"); r.Status != http.StatusOK {
		t.Fatalf("a credential never counted: %d %s", r.Status, r.Body)
	}
	for i := range 5 {
		e.call(30+i, "Authorization", "Bearer garbage-forgetq-"+strconv.Itoa(i))
	}
	if n := adminZone(t, e.caddy, "forgetq")["tracked"].(map[string]any)["quota_entries"]; n != float64(2) {
		t.Fatalf("quota entries %v, want the two accepted credentials': rejected ones must create none", n)
	}
}

// A credential that gets itself forgotten before each call (any rejected
// request forgets it) gains nothing: the call that proves it again is
// counted in its quota, though it was admitted unproven, and while its
// tenant bucket is drained its unproven calls are refused by it.
func TestGettingForgottenBeforeEachCallGainsNothing(t *testing.T) {
	t.Run("quota", func(t *testing.T) {
		e := start(t, "zone forgetloopq\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 2/day")
		auth := []string{"Authorization", "Bearer valid-forgetloopq"}
		for i := range 2 {
			e.forget(auth...)
			if r := e.call(i, auth...); r.Status != http.StatusOK {
				t.Fatalf("call %d of 2: %d %s", i+1, r.Status, r.Body)
			}
		}
		e.forget(auth...)
		refusal(t, e.call(3, auth...), http.StatusTooManyRequests, "quota")
	})
	t.Run("tenant", func(t *testing.T) {
		e := start(t, "zone forgetloopt\npreauth 100/s burst 100\ntenant 1/h burst 2\nquota off")
		auth := []string{"Authorization", "Bearer valid-forgetloopt"}
		e.prove("valid-forgetloopt")
		e.spend("valid-forgetloopt", 2)
		e.forget(auth...)
		refusal(t, e.call(3, auth...), http.StatusTooManyRequests, "tenant")
		if r := e.call(4, "Authorization", "Bearer valid-forgetloopt-other"); r.Status != http.StatusOK {
			t.Fatalf("a credential never proven, on pre-auth: %d %s", r.Status, r.Body)
		}
	})
	// A proven identity holds no tenant bucket until its first call, and
	// a full bucket is dropped: forgotten then, its calls are charged to
	// one all the same, or calls sent at once (from many addresses, each
	// with its pre-auth budget) before a 2xx proves it again would all
	// pass. Here the backend answers 500, which proves nothing.
	t.Run("tenant, no bucket held", func(t *testing.T) {
		e := start(t, "zone forgetloopn\npreauth 100/s burst 100\ntenant 1/h burst 2\nquota off")
		auth := []string{"Authorization", "Bearer valid-forgetloopn"}
		e.prove("valid-forgetloopn")
		e.forget(auth...)
		for i := range 2 {
			if r := e.call(i, append(auth, "X-Demo-Status", "500")...); r.Status != http.StatusInternalServerError {
				t.Fatalf("call %d of the burst: %d %s", i+1, r.Status, r.Body)
			}
		}
		refusal(t, e.call(3, append(auth, "X-Demo-Status", "500")...), http.StatusTooManyRequests, "tenant")
	})
}

// passedFrom makes n unproven calls from the client address from (sent as
// X-Forwarded-For by a trusted proxy) and returns how many passed.
func (e *env) passedFrom(from string, n int) int {
	passed := 0
	for i := range n {
		if r := e.call(i, "X-Forwarded-For", from); r.Status == http.StatusOK {
			passed++
		}
	}
	return passed
}

func TestGatewayGetsMoreButIsStillBounded(t *testing.T) {
	e := start(t, "preauth 1/m burst 1\ngateway 127.0.0.1/32 1/m burst 4")
	passed := 0
	for i := range 10 {
		if r := e.call(i); r.Status == http.StatusOK {
			passed++
		}
	}
	if passed != 4 {
		t.Fatalf("gateway passed %d, want its burst of 4", passed)
	}
}

// A gateway is the address listed, with a budget of its own: one IPv6 host
// under the default /64 gets it, and a neighbour in the same /64 (or /24
// under ipv4_prefix 24) neither gets it nor spends it.
func TestGatewayIsMatchedByItsOwnAddress(t *testing.T) {
	e := start(t, "ipv4_prefix 24\npreauth 1/m burst 1\ngateway 2001:db8:7::10 198.51.100.9 1/m burst 4",
		harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	for from, want := range map[string]int{
		"2001:db8:7::10": 4, "198.51.100.9": 4, // gateways: their burst
		"2001:db8:7::77": 1, "198.51.100.77": 1, // neighbours: the pre-auth burst
	} {
		if n := e.passedFrom(from, 6); n != want {
			t.Errorf("%s passed %d unproven calls, want %d", from, n, want)
		}
	}
}

// An address in several listed networks gets the most specific one's
// budget, whatever the order of the lines.
func TestGatewayMostSpecificNetworkWins(t *testing.T) {
	e := start(t, "zone gwspecific\npreauth 1/m burst 1\ngateway 10.0.0.0/8 1/m burst 2\ngateway 10.1.2.3 1/m burst 5",
		harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	for from, want := range map[string]int{"10.1.2.3": 5, "10.9.9.9": 2} {
		if n := e.passedFrom(from, 7); n != want {
			t.Errorf("%s passed %d unproven calls, want %d", from, n, want)
		}
	}
}

// A gateway range is keyed like any client: the addresses of an IPv6 /64
// listed as gateways share one gateway budget, or one host owning the /64
// would mint a budget per address. A gateway written IPv4-mapped matches
// its IPv4 client.
func TestGatewayRangeSharesOneBudgetPerKey(t *testing.T) {
	e := start(t, "zone gwrange\npreauth 1/m burst 1\ngateway 2001:db8:1::/64 ::ffff:198.51.100.20 1/m burst 3",
		harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	passed := 0
	for i := range 6 {
		if r := e.call(i, "X-Forwarded-For", fmt.Sprintf("2001:db8:1::%x", i+1)); r.Status == http.StatusOK {
			passed++
		}
	}
	if passed != 3 {
		t.Fatalf("six addresses of a gateway /64 passed %d calls, want the one gateway burst of 3", passed)
	}
	passed = 0
	for i := range 5 {
		if r := e.call(i, "X-Forwarded-For", "198.51.100.20"); r.Status == http.StatusOK {
			passed++
		}
	}
	if passed != 3 {
		t.Fatalf("the IPv4 client of a gateway written ::ffff:198.51.100.20 passed %d calls, want its burst of 3", passed)
	}
}

func TestGlobalRefusalDoesNotChargeTheTenant(t *testing.T) {
	e := start(t, "tenant 1/m burst 2\nglobal 1/m burst 1\nquota off")
	e.prove("valid-erin")
	if r := e.call(1, "Authorization", "Bearer valid-erin"); r.Status != http.StatusOK {
		t.Fatalf("first: %d", r.Status)
	}
	for i := range 5 {
		refusal(t, e.call(2+i, "Authorization", "Bearer valid-erin"), http.StatusTooManyRequests, "global")
	}
	// Raise the global limit live; the tenant must still have its second token.
	e.reloadWith(t, "tenant 1/m burst 2\nglobal 100/s burst 100\nquota off")
	e.settle("Authorization", "Bearer valid-erin") // body-less probes of a proven key cost nothing
	time.Sleep(100 * time.Millisecond)             // the drained global bucket refills at the new rate, no fresh burst
	if r := e.call(9, "Authorization", "Bearer valid-erin"); r.Status != http.StatusOK {
		t.Fatalf("global refusals charged the tenant: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(10, "Authorization", "Bearer valid-erin"), http.StatusTooManyRequests, "tenant")
}

func TestTwoRoutesInOneZoneShareAnAllowance(t *testing.T) {
	site := `
	route /v1/* {
		mcp_ratelimit {
			zone shared
			meter *
			tenant 1/m burst 3
			quota off
		}
		respond "ok" 200
	}
	route /mcp* {
		mcp_ratelimit {
			zone shared
			tenant 1/m burst 3
			quota off
		}
		reverse_proxy $BACKEND
	}`
	e := startSite(t, site)
	e.prove("valid-frank")
	e.spend("valid-frank", 2)
	req, _ := http.NewRequest(http.MethodGet, e.caddy.URL+"/v1/things", nil)
	req.Header.Set("Authorization", "Bearer valid-frank")
	if r := harness.Do(t, req); r.Status != 200 {
		t.Fatalf("rest call: %d %s", r.Status, r.Body)
	}
	// Each handler keeps its own settings: the allowance is spent, yet
	// /mcp does not meter tools/list, whatever the REST route meters.
	for i := range 3 {
		if r := e.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Authorization", "Bearer valid-frank"); r.Status != http.StatusOK {
			t.Fatalf("tools/list %d on /mcp: %d %s; only /v1 meters every request", i, r.Status, r.Body)
		}
	}
	req, _ = http.NewRequest(http.MethodGet, e.caddy.URL+"/v1/things", nil)
	req.Header.Set("Authorization", "Bearer valid-frank")
	if r := harness.Do(t, req); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the REST route must share the tenant's allowance: %d", r.Status)
	}
}

// Under meter *, a REST body holding a JSON array is one request: it costs
// 1 and max_batch, which bounds JSON-RPC batches, does not refuse it; a
// JSON-RPC batch on the same route still costs per message.
func TestMeterAllChargesARESTArrayOnce(t *testing.T) {
	e := start(t, "zone restarray\nmeter *\ntenant 1/m burst 10\nquota off\nmax_batch 2")
	e.prove("valid-restarray")
	before := e.backend.Requests()
	// The demo backend answers it 400, as an MCP server does: it reached it.
	r := e.post(`[{"n":0},{"n":1},{"n":2}]`, "Authorization", "Bearer valid-restarray")
	if e.backend.Requests() != before+1 || r.Header.Get("Retry-After") != "" {
		t.Fatalf("a REST array of 3 under meter * and max_batch 2 did not reach the backend: %d %s", r.Status, r.Body)
	}
	if f := rateLimit(t, r)["tenant"]; f[0] != 9 { // the proving initialize was pre-auth's
		t.Fatalf("tenant r=%d after a REST array, want 9 (it costs 1): %q", f[0], r.Header.Get("RateLimit"))
	}
	calls := "[" + harness.ToolCall(1, "echo", nil) + "," + harness.ToolCall(2, "echo", nil) + "]"
	r = e.post(calls, "Authorization", "Bearer valid-restarray")
	if f := rateLimit(t, r)["tenant"]; r.Status != http.StatusOK || f[0] != 7 {
		t.Fatalf("a JSON-RPC batch of 2 under meter *: %d, tenant r=%d, want 200 and 7", r.Status, f[0])
	}
	r = e.post("["+harness.ToolCall(1, "echo", nil)+","+calls[1:], "Authorization", "Bearer valid-restarray")
	if r.Status != http.StatusBadRequest {
		t.Fatalf("a JSON-RPC batch of 3 over max_batch 2: %d %s, want 400", r.Status, r.Body)
	}
}

// reloadWith loads the same site with another mcp_ratelimit block, on the
// same ports and storage.
func (e *env) reloadWith(t *testing.T, block string) {
	t.Helper()
	site := fmt.Sprintf("mcp_ratelimit {\n%s\n}\nreverse_proxy $BACKEND", block)
	e.caddy.Load(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
}

func TestDrainedBucketSurvivesCapPressureAndOverflowIsRefused(t *testing.T) {
	e := start(t, "max_known 8\nglobal off\npreauth 1/h burst 1", harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	e.fillAddresses()
	// Every bucket is drained: a new address cannot evict one, so it is refused.
	refusal(t, e.call(20, "X-Forwarded-For", "198.51.100.20"), http.StatusTooManyRequests, "preauth")
	// The first address's drained bucket was not dropped and recreated full.
	refusal(t, e.call(21, "X-Forwarded-For", "10.0.0.0"), http.StatusTooManyRequests, "preauth")
}

func TestAnonymousBucketIsSharedByRequestsWithoutIdentity(t *testing.T) {
	e := start(t, "preauth 100/s burst 100\nanonymous 1/m burst 2\nquota off", harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	// Two different addresses, no credential: one shared anonymous budget.
	for i, xff := range []string{"198.51.100.1", "198.51.100.2"} {
		if r := e.call(i, "X-Forwarded-For", xff); r.Status != http.StatusOK {
			t.Fatalf("anonymous call %d: %d %s", i, r.Status, r.Body)
		}
	}
	got := refusal(t, e.call(3, "X-Forwarded-For", "198.51.100.3"), http.StatusTooManyRequests, "anonymous")
	if got.Error.Data.Code != "ANONYMOUS_RATE_LIMITED" {
		t.Fatalf("code %s", got.Error.Data.Code)
	}
	// A caller with an identity does not draw from the anonymous bucket.
	if r := e.call(4, "Authorization", "Bearer valid-ivy"); r.Status != http.StatusOK {
		t.Fatalf("identified call: %d %s", r.Status, r.Body)
	}
}

// A lone Bearer scheme, in any case, carries no credential: it is no
// identity, as an empty Authorization header is, and draws from the
// anonymous bucket. Else every keyless caller could pass the anonymous
// layer with `Bearer ` (to a backend that reads it as no token, one
// identity it proves), in 64 spellings of the scheme.
func TestALoneBearerSchemeIsNoIdentity(t *testing.T) {
	e := start(t, "zone lone-bearer\npreauth 100/s burst 100\nanonymous 1/m burst 2\nquota off")
	for i, v := range []string{"Bearer ", "bearer"} {
		if r := e.call(i, "Authorization", v); r.Status == http.StatusTooManyRequests {
			t.Fatalf("call %d (%q): refused %s", i, v, r.Body)
		}
	}
	refusal(t, e.call(3, "Authorization", "BEARER\t"), http.StatusTooManyRequests, "anonymous")
}

// An identity whose placeholders a caller may vary are all empty is no
// identity, whatever global placeholders stand beside them (here the
// host's OS, "linux"), in its text or as an argument of their own: else
// every keyless caller would share the identity "linux:" (which the demo
// backend, serving keyless requests, proves) and pass the anonymous layer.
func TestAnIdentityOfOnlySameForEveryonePlaceholdersIsNone(t *testing.T) {
	for _, ident := range []string{`"{system.os}:{http.request.header.X-Api-Key}"`, "{system.os} {http.request.header.X-Api-Key}"} {
		t.Run(ident, func(t *testing.T) {
			e := start(t, "identity "+ident+"\npreauth 100/s burst 100\nanonymous 1/m burst 2\nquota off")
			for i := range 2 {
				if r := e.call(i); r.Status != http.StatusOK {
					t.Fatalf("keyless call %d: %d %s", i, r.Status, r.Body)
				}
			}
			refusal(t, e.call(3), http.StatusTooManyRequests, "anonymous")
			if r := e.call(4, "X-Api-Key", "k1"); r.Status != http.StatusOK {
				t.Fatalf("call with a key: %d %s", r.Status, r.Body)
			}
		})
	}
}

// The anonymous bucket bounds everything keyless callers send together,
// not only their tool calls: initialize, tools/list and GET streams pass
// the tenant, quota, global and concurrency layers untouched, but each
// costs the anonymous bucket 1, as it costs pre-auth 1.
func TestAnonymousBucketChargesUnmeteredRequestsToo(t *testing.T) {
	e := start(t, "zone anonfree\npreauth 100/s burst 100\nanonymous 1/m burst 2\nquota off", harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if r := e.post(list, "X-Forwarded-For", "198.51.100.1"); r.Status != http.StatusOK {
		t.Fatalf("first keyless tools/list: %d %s", r.Status, r.Body)
	}
	req, _ := http.NewRequest(http.MethodGet, e.mcp, nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		t.Fatalf("keyless GET refused while the anonymous bucket had a token left")
	}
	got := refusal(t, e.post(list, "X-Forwarded-For", "198.51.100.3"), http.StatusTooManyRequests, "anonymous")
	if got.Error.Data.Code != "ANONYMOUS_RATE_LIMITED" {
		t.Fatalf("code %s", got.Error.Data.Code)
	}
	// A caller with an identity, proven or not, does not draw from it.
	if r := e.post(list, "Authorization", "Bearer valid-anonfree"); r.Status != http.StatusOK {
		t.Fatalf("identified tools/list: %d %s", r.Status, r.Body)
	}
	// In dry run the same refusal is counted, and the request passes.
	e.reloadWith(t, "zone anonfree\ndry_run\npreauth 100/s burst 100\nanonymous 1/m burst 2\nquota off")
	if r := e.post(list, "X-Forwarded-For", "198.51.100.4"); r.Status != http.StatusOK {
		t.Fatalf("keyless tools/list in dry run: %d %s", r.Status, r.Body)
	}
	_, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if dry := promValue(string(body), "mcp_ratelimit_dry_run_refusals_total", `layer="anonymous"`, `zone="anonfree"`); dry != 1 {
		t.Fatalf("mcp_ratelimit_dry_run_refusals_total{layer=anonymous} = %v, want 1", dry)
	}
}

// A keyless request that costs nothing meets the anonymous layer after
// pre-auth as well: a pre-auth refusal of it names the longer wait of the
// two. Told to retry in a second, the caller would be refused again by the
// anonymous bucket for the rest of its minute.
func TestPreauthRefusalOfAKeylessFreeRequestWeighsTheAnonymousWait(t *testing.T) {
	e := start(t, "zone anonwait\npreauth 1/s burst 1\nanonymous 1/m burst 1\nquota off", harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if r := e.post(list, "X-Forwarded-For", "198.51.100.1"); r.Status != http.StatusOK {
		t.Fatalf("keyless tools/list draining the anonymous bucket: %d %s", r.Status, r.Body)
	}
	// The second address spends its pre-auth token on a credential the
	// backend rejects: it is not proven, and its next request finds both
	// its pre-auth bucket (a second) and the anonymous one (a minute) empty.
	if r := e.post(list, "X-Forwarded-For", "198.51.100.2", "Authorization", "Bearer rejected", "X-Demo-Status", "401"); r.Status != http.StatusUnauthorized {
		t.Fatalf("rejected credential: %d %s", r.Status, r.Body)
	}
	check := func(what string, r *harness.Response) {
		t.Helper()
		got := refusal(t, r, http.StatusTooManyRequests, "anonymous")
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 50 || got.Error.Data.RetryAfterSeconds != ra {
			t.Fatalf("%s: Retry-After %q, data.retryAfterSeconds %d: want the anonymous bucket's wait of about a minute", what, r.Header.Get("Retry-After"), got.Error.Data.RetryAfterSeconds)
		}
	}
	check("keyless tools/list", e.post(list, "X-Forwarded-For", "198.51.100.2"))
	req, _ := http.NewRequest(http.MethodGet, e.mcp, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Forwarded-For", "198.51.100.2")
	check("keyless GET stream", harness.Do(t, req))
}

// Under `meter *` a request without a body costs 1 too, so a pre-auth
// refusal of a GET stream or a DELETE weighs the layers after pre-auth
// it meets: here the global bucket's longer wait. Told pre-auth's two
// seconds, the caller would be refused again by the global bucket.
func TestPreauthRefusalOfABodilessRequestUnderMeterAllWeighsTheLayersAfter(t *testing.T) {
	e := start(t, "zone meterallwait\nmeter *\npreauth 30/m burst 1\nglobal 6/m burst 2\ntenant off\nquota off", harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	// Two addresses drain the global bucket (a token every 10s); the
	// second has spent its pre-auth token (one every 2s) as well.
	for _, addr := range []string{"198.51.100.1", "198.51.100.2"} {
		if r := e.post(list, "X-Forwarded-For", addr); r.Status != http.StatusOK {
			t.Fatalf("keyless tools/list from %s: %d %s", addr, r.Status, r.Body)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, e.mcp, nil)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Forwarded-For", "198.51.100.2")
		r := harness.Do(t, req)
		got := refusal(t, r, http.StatusTooManyRequests, "global")
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 5 || got.Error.Data.RetryAfterSeconds != ra {
			t.Fatalf("%s: Retry-After %q, data.retryAfterSeconds %d: want the global bucket's wait, up to 10s", method, r.Header.Get("Retry-After"), got.Error.Data.RetryAfterSeconds)
		}
	}
}

// A body too large to read before a pre-auth refusal (over 64 KiB) is
// weighed as one call: the layers after pre-auth look at that cost, here
// the group bucket's longer wait, and the message promises a single call,
// not the same request, since a batch may need longer.
func TestPreauthRefusalOfAnUnreadBodyWeighsOneCall(t *testing.T) {
	e := start(t, "zone unreadwait\npreauth 30/m burst 2\ngroup {http.request.header.X-Org} 15/m burst 1\nmax_body 2MB\nquota off")
	e.prove("valid-unread", "X-Org", "acme") // a pre-auth token; the group's is left
	if r := e.call(1, "Authorization", "Bearer valid-unread", "X-Org", "acme"); r.Status != http.StatusOK {
		t.Fatalf("call emptying the group bucket: %d %s", r.Status, r.Body)
	}
	if r := e.call(2, "Authorization", "Bearer rejected", "X-Demo-Status", "401"); r.Status != http.StatusUnauthorized {
		t.Fatalf("call spending the last pre-auth token: %d %s", r.Status, r.Body)
	}
	big := harness.ToolCall(3, "echo", map[string]any{"text": strings.Repeat("x", 100<<10)})
	r := e.post(big, "Authorization", "Bearer rejected", "X-Org", "acme")
	got := refusal(t, r, http.StatusTooManyRequests, "group")
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 3 {
		t.Fatalf("Retry-After %q, want the group bucket's wait of up to 4s", r.Header.Get("Retry-After"))
	}
	if !strings.Contains(got.Error.Message, "a single call will work then") || strings.Contains(got.Error.Message, "the same call") {
		t.Fatalf("message %q: want a single call promised, not the same (unread) request", got.Error.Message)
	}
}

// An identity of several placeholders, all of them empty, is no
// identity: such requests are anonymous, not one shared identity that a
// first 2xx would prove for every caller without a credential.
func TestIdentityOfOnlyEmptyPlaceholdersIsNone(t *testing.T) {
	e := start(t, "zone emptyparts\nidentity {http.request.header.X-Api-Key} {http.request.header.X-Org}\npreauth 100/s burst 100\nanonymous 1/h burst 1\ntenant 100/s burst 100\nquota off")
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("first call without either header: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(2), http.StatusTooManyRequests, "anonymous")
	if n := e.knownIn("emptyparts"); n != 0 {
		t.Fatalf("%d identities proven by calls without any identity input", n)
	}
	// One part present is an identity of its own.
	if r := e.call(3, "X-Org", "acme"); r.Status != http.StatusOK {
		t.Fatalf("call with one part: %d %s", r.Status, r.Body)
	}
}

func TestTrustIdentityIsProvenOnSight(t *testing.T) {
	site := `route {
		vars user {http.request.header.X-User}
		mcp_ratelimit {
			identity {http.vars.user}
			trust_identity
			preauth 1/m burst 1
			tenant 1/m burst 3
			quota off
		}
		reverse_proxy $BACKEND
	}`
	e := startSite(t, site)
	// Never accepted by the backend before, yet charged to its own tenant
	// bucket (burst 3), not to the address's pre-auth budget (burst 1).
	for i := range 3 {
		if r := e.call(i, "X-User", "user-42"); r.Status != http.StatusOK {
			t.Fatalf("trusted identity call %d: %d %s", i, r.Status, r.Body)
		}
	}
	refusal(t, e.call(9, "X-User", "user-42"), http.StatusTooManyRequests, "tenant")
	// An empty identity is not trusted: it pays pre-auth.
	if r := e.call(10); r.Status != http.StatusOK {
		t.Fatalf("first anonymous call: %d", r.Status)
	}
	refusal(t, e.call(11), http.StatusTooManyRequests, "preauth")
}

// The global layer takes a request's cost, as every rate layer does: a
// call of a tool costing 5 takes 5 of the zone's tokens, not 1.
func TestGlobalTakesTheRequestsCost(t *testing.T) {
	e := start(t, "tenant off\nquota off\nglobal 1/h burst 6\ncost echo 5")
	e.prove("valid-globalcost")
	h := []string{"Authorization", "Bearer valid-globalcost"}
	if r := e.call(1, h...); r.Status != http.StatusOK {
		t.Fatalf("first call of cost 5 within the global burst of 6: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(2, h...), http.StatusTooManyRequests, "global")
}

// A caller out of pre-auth tokens whose body's declared length is
// max_body exactly is told to wait: such a body is read whole, so no
// refusal of the request as sent applies.
func TestPreauthWaitForABodyOfExactlyMaxBody(t *testing.T) {
	e := start(t, "preauth 1/h burst 1\nmax_body 1KiB")
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("the one pre-auth token: %d %s", r.Status, r.Body)
	}
	call := harness.ToolCall(2, "echo", map[string]any{"text": "x"})
	body := call[:len(call)-1] + strings.Repeat(" ", 1024-len(call)) + "}"
	if len(body) != 1024 {
		t.Fatalf("test body is %d bytes", len(body))
	}
	refusal(t, e.post(body), http.StatusTooManyRequests, "preauth")
}

func TestTenantIsCheckedBeforeGlobal(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nglobal 1/m burst 2\nquota off")
	e.prove("valid-jo")
	e.prove("valid-kim")
	if r := e.call(1, "Authorization", "Bearer valid-jo"); r.Status != http.StatusOK {
		t.Fatalf("jo: %d", r.Status)
	}
	// jo is over its own limit: refused by the tenant layer, so its
	// attempts never spend the shared global capacity...
	for i := range 3 {
		refusal(t, e.call(2+i, "Authorization", "Bearer valid-jo"), http.StatusTooManyRequests, "tenant")
	}
	// ...which is still there for kim.
	if r := e.call(9, "Authorization", "Bearer valid-kim"); r.Status != http.StatusOK {
		t.Fatalf("kim found the global capacity spent by another tenant's refused calls: %d %s", r.Status, r.Body)
	}
	refusal(t, e.call(10, "Authorization", "Bearer valid-jo"), http.StatusTooManyRequests, "tenant")
}

func TestPreauthRefusalEchoesTheRequestIDs(t *testing.T) {
	e := start(t, "preauth 1/m burst 1")
	e.call(1)
	r := e.call(77)
	got := refusal(t, r, http.StatusTooManyRequests, "preauth")
	if got.ID != float64(77) {
		t.Fatalf("pre-auth refusal does not echo id 77: %s", r.Body)
	}
	batch := `[` + harness.ToolCall(5, "echo", nil) + `,` + harness.ToolCall(6, "echo", nil) + `]`
	r = e.post(batch)
	var answers []rpcError
	r.JSON(t, &answers)
	if len(answers) != 2 || answers[0].ID != float64(5) || answers[1].ID != float64(6) {
		t.Fatalf("batch refusal must answer each id: %s", r.Body)
	}
}

func TestForwardedForWithoutTrustedProxiesWarnsOnce(t *testing.T) {
	opts, logPath := logOptions(t)
	e := start(t, "zone xffwarn\npreauth 100/s burst 100", opts)
	e.call(1) // no header: no warning
	for i := range 3 {
		e.call(2+i, "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
	}
	warnings := 0
	harness.Eventually(t, 5*time.Second, "the warning to be logged", func() bool {
		warnings = 0
		for _, ev := range logEvents(t, logPath) {
			if msg, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(msg, "trusted_proxies") {
				warnings++
			}
		}
		return warnings > 0
	})
	if warnings != 1 {
		t.Fatalf("%d warnings, want exactly one", warnings)
	}
}

// With trusted proxies configured, X-Forwarded-For is expected: no
// warning that no proxy is trusted. Requests from a trusted proxy that
// carry a client IP header get one warning, naming the zone and the
// server's client IP headers, when trusted_proxies_strict is not set:
// Caddy then takes the leftmost address, which a client behind an
// appending proxy sets itself. A header the server does not read is no
// address at all.
func TestForwardedForWithTrustedProxies(t *testing.T) {
	for _, tt := range []struct {
		rule, servers, header, want, headers string
	}{
		{"from a trusted proxy, strict", "trusted_proxies static 127.0.0.1/32\n trusted_proxies_strict", "X-Forwarded-For", "", ""},
		{"from a trusted proxy, not strict", "trusted_proxies static 127.0.0.1/32", "X-Forwarded-For", "trusted_proxies_strict", "X-Forwarded-For"},
		{"from an untrusted address", "trusted_proxies static 192.0.2.1/32", "X-Forwarded-For", "", ""},
		{"another client IP header, not strict", "trusted_proxies static 127.0.0.1/32\n client_ip_headers X-Real-IP CF-Connecting-IP", "Cf-Connecting-Ip", "trusted_proxies_strict", "X-Real-IP, CF-Connecting-IP"},
		{"a header the server does not read", "trusted_proxies static 127.0.0.1/32\n client_ip_headers X-Real-IP", "X-Forwarded-For", "", ""},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			opts, logPath := logOptions(t)
			opts.Global += "\nservers {\n " + tt.servers + "\n}"
			e := start(t, "zone xffquiet\npreauth 100/s burst 100", opts)
			for i := range 3 {
				if r := e.call(1+i, tt.header, fmt.Sprintf("203.0.113.%d", i)); r.Status != http.StatusOK {
					t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
				}
			}
			harness.Eventually(t, 5*time.Second, "the calls to be logged", func() bool {
				return len(logEvents(t, logPath)) > 0
			})
			time.Sleep(200 * time.Millisecond)
			var warned []map[string]any
			for _, ev := range logEvents(t, logPath) {
				if msg, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(msg, "trusted_proxies") {
					warned = append(warned, ev)
				}
			}
			switch {
			case tt.want == "" && len(warned) > 0:
				t.Fatalf("warned: %v", warned)
			case tt.want != "" && (len(warned) != 1 || !strings.Contains(warned[0]["msg"].(string), tt.want) || warned[0]["zone"] != "xffquiet" || warned[0]["client_ip_headers"] != tt.headers):
				t.Fatalf("warnings %v, want one naming %s, the zone and the client IP headers %s", warned, tt.want, tt.headers)
			}
		})
	}
}

// A reload that changes the server's trusted-proxy settings has its own
// say: a zone that had nothing to warn of under strict trusted proxies,
// or warned that no proxy is trusted, still warns once of what the new
// settings leave open, also when they are settings it had before, and
// also when no request came under the settings between ("-" before a
// phase's settings: a load without calls).
func TestForwardedForWarningFollowsAReloadedServerSetting(t *testing.T) {
	const strict, loose = "trusted_proxies static 127.0.0.1/32\n trusted_proxies_strict", "trusted_proxies static 127.0.0.1/32"
	for i, tt := range []struct {
		rule   string
		phases []string // the servers options of each load
		wants  []string // the warning each load's calls bring, "" for none
	}{
		{"strict, then no proxy", []string{strict, ""}, []string{"", "trusts no proxy"}},
		{"no proxy, then not strict", []string{"", loose}, []string{"trusts no proxy", "trusted_proxies_strict"}},
		{"not strict, no proxy, not strict again", []string{loose, "", loose}, []string{"trusted_proxies_strict", "trusts no proxy", "trusted_proxies_strict"}},
		{"not strict, then wider ranges", []string{loose, loose + " 10.0.0.0/8"}, []string{"trusted_proxies_strict", ""}},
		{"not strict, strict without calls, not strict again", []string{loose, "-" + strict, loose}, []string{"trusted_proxies_strict", "", "trusted_proxies_strict"}},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			opts, logPath := logOptions(t)
			global := opts.Global
			zone := fmt.Sprintf("xffreload%d", i)
			site := "mcp_ratelimit {\nzone " + zone + "\npreauth 100/s burst 100\n}\nreverse_proxy $BACKEND"
			opts.Global = global + "\nservers {\n " + tt.phases[0] + "\n}"
			e := start(t, "zone "+zone+"\npreauth 100/s burst 100", opts)
			warnings := func() (n int, last string) {
				for _, ev := range logEvents(t, logPath) {
					if msg, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(msg, "trusted_proxies") {
						n, last = n+1, msg
					}
				}
				return n, last
			}
			before := 0
			for p, servers := range tt.phases {
				servers, quiet := strings.CutPrefix(servers, "-")
				if p > 0 {
					e.caddy.Load(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, global+"\nservers {\n "+servers+"\n}"))
				}
				for c := range 3 {
					if quiet {
						break
					}
					if r := e.call(10*p+c, "X-Forwarded-For", "203.0.113.2"); r.Status != http.StatusOK {
						t.Fatalf("load %d, call %d: %d %s", p, c, r.Status, r.Body)
					}
				}
				want := 0
				if tt.wants[p] != "" {
					want = 1
					harness.Eventually(t, 5*time.Second, "the settings' warning", func() bool {
						n, _ := warnings()
						return n > before
					})
				}
				time.Sleep(200 * time.Millisecond)
				n, last := warnings()
				if n != before+want || want == 1 && !strings.Contains(last, tt.wants[p]) {
					t.Fatalf("load %d: %d warnings (%d before), last %q; want %d naming %q", p, n, before, last, want, tt.wants[p])
				}
				before = n
			}
		})
	}
}

// The warning is per server: a zone used by a server that trusts a proxy
// (strictly: nothing to say) and by one that trusts none still warns
// once for the second, whichever server sees X-Forwarded-For first.
func TestForwardedForWarningIsPerServer(t *testing.T) {
	opts, logPath := logOptions(t)
	port := harness.FreePort(t)
	opts.Global += fmt.Sprintf("\nservers 127.0.0.1:%d {\n name untrusting\n}\nservers {\n trusted_proxies static 127.0.0.1/32\n trusted_proxies_strict\n}", port)
	block := "mcp_ratelimit {\nzone xffservers\npreauth 100/s burst 100\n}\nreverse_proxy $BACKEND"
	e := startSite(t, block+fmt.Sprintf("\n}\n\nhttp://127.0.0.1:%d {\nbind 127.0.0.1\n", port)+block, opts)
	if r := e.call(1, "X-Forwarded-For", "203.0.113.1"); r.Status != http.StatusOK {
		t.Fatalf("call through the trusting server: %d %s", r.Status, r.Body)
	}
	other := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	for i := range 2 {
		if r := harness.Post(t, other, harness.ToolCall(2+i, "echo", nil), "X-Forwarded-For", "203.0.113.2"); r.Status != http.StatusOK {
			t.Fatalf("call through the untrusting server: %d %s", r.Status, r.Body)
		}
	}
	warnings := func() (warned []string) {
		for _, ev := range logEvents(t, logPath) {
			if msg, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(msg, "trusted_proxies") {
				warned = append(warned, msg)
			}
		}
		return warned
	}
	harness.Eventually(t, 5*time.Second, "the warning to be logged", func() bool { return len(warnings()) > 0 })
	time.Sleep(200 * time.Millisecond)
	if warned := warnings(); len(warned) != 1 || !strings.Contains(warned[0], "trusts no proxy") {
		t.Fatalf("warnings %q, want one that the second server trusts no proxy", warned)
	}
}

// A server that trusts the proxy on its Unix socket (trusted_proxies_unix)
// trusts a proxy: a request from there carrying X-Forwarded-For gets the
// warning that trusted_proxies_strict is not set, not that no proxy is
// trusted (Caddy then limits by the header's address, not the socket's).
func TestForwardedForThroughATrustedUnixSocket(t *testing.T) {
	opts, logPath := logOptions(t)
	sock := filepath.Join(t.TempDir(), "mcp.sock")
	opts.Global += "\nservers {\n trusted_proxies_unix\n}"
	block := "mcp_ratelimit {\nzone xffunix\npreauth 100/s burst 100\n}\nreverse_proxy $BACKEND"
	startSite(t, block+"\n}\n\nhttp:// {\nbind unix/"+sock+"\n"+block, opts)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for i := range 2 {
		req, err := http.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(harness.ToolCall(1+i, "echo", nil)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d through the socket: %d %s", i, resp.StatusCode, b)
		}
	}
	var warned []string
	harness.Eventually(t, 5*time.Second, "the warning to be logged", func() bool {
		warned = warned[:0]
		for _, ev := range logEvents(t, logPath) {
			if msg, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(msg, "trusted_proxies") {
				warned = append(warned, msg)
			}
		}
		return len(warned) > 0
	})
	if len(warned) != 1 || !strings.Contains(warned[0], "trusted_proxies_strict") {
		t.Fatalf("warnings %q, want one that trusted_proxies_strict is not set", warned)
	}
}

func TestRequestCostingMoreThanTheBurstIsToldItCanNeverPass(t *testing.T) {
	e := start(t, "tenant 1/s burst 5\nquota off")
	e.prove("valid-lou")
	calls := make([]string, 6)
	for i := range calls {
		calls[i] = harness.ToolCall(i+1, "echo", nil)
	}
	r := e.post("["+strings.Join(calls, ",")+"]", "Authorization", "Bearer valid-lou")
	var answers []rpcError
	r.JSON(t, &answers)
	if r.Status != http.StatusTooManyRequests || len(answers) != 6 || answers[0].Error == nil {
		t.Fatalf("batch of 6 against burst 5: %d %s", r.Status, r.Body)
	}
	msg := answers[0].Error.Message
	if !strings.Contains(msg, "costs 6") || !strings.Contains(msg, "never be admitted") || strings.Contains(msg, "will work then") {
		t.Fatalf("the message must say the request can never pass as sent, not to retry: %q", msg)
	}
	// What would pass, for an agent to act on rather than retry as sent.
	if !strings.Contains(msg, "costing at most 5") || answers[0].Error.Data.MaxPerRequest != 5 {
		t.Fatalf("the refusal must say the most a request may cost (5): %s", r.Body)
	}
	// Its wait is until a request of that size fits: the bucket is full.
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %s with a full bucket of 5, want 1", got)
	}
	// The burst itself still passes: nothing was spent.
	if r := e.post("["+strings.Join(calls[:5], ",")+"]", "Authorization", "Bearer valid-lou"); r.Status != http.StatusOK {
		t.Fatalf("a batch of 5 after the refusal: %d %s", r.Status, r.Body)
	}
}

// A request that can never pass as sent is not told to retry in 1s while
// the quota is exhausted: the longer wait is named.
func TestNeverFittingRequestNamesAnExhaustedQuota(t *testing.T) {
	e := start(t, "zone neverquota\ntenant 10/s burst 3\nquota 3/day\ncost big 5")
	e.prove("valid-neverq")
	e.spend("valid-neverq", 3)
	r := e.post(harness.ToolCall(9, "big", nil), "Authorization", "Bearer valid-neverq")
	got := refusal(t, r, http.StatusTooManyRequests, "quota")
	if got.Error.Data.RetryAfterSeconds < 60 && time.Until(time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour)) > 2*time.Minute {
		t.Fatalf("Retry-After %d with the day's quota exhausted", got.Error.Data.RetryAfterSeconds)
	}
}

// A request that can never pass as sent is told so even when a layer that
// only asks it to wait refuses it too, with a longer wait: after that
// wait, the same call would still be refused, so "retry in 60s; the same
// call will work then" would be a false promise.
func TestNeverPassingRequestIsToldSoAheadOfALongerWait(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		spend       int // calls of a proven key first; -1 for a keyless caller
		batch       int
		limit       string
		raLo, raHi  int // Retry-After: the wait before a request of maxPerRequest's size passes
		max         int // data.maxPerRequest
		says        string
		tool        string // of the batch's calls; "" for echo
	}{
		{"more calls than the concurrency cap, tenant short of tokens",
			"tenant 1/m burst 5\nquota off\nconcurrency 1", 3, 3, "concurrency", 1, 1, 1, "Send at most 1 call per request", ""},
		// Each call costs at least 1: no more than the 2 left fit.
		{"more calls than the concurrency cap, quota nearly used",
			"tenant 100/s burst 10\nquota 5/day\nconcurrency 4", 3, 5, "concurrency", 1, 1, 2, "at most 2 calls", ""},
		// Two calls, the most the cap admits, need two tokens: two minutes.
		{"more calls than the concurrency cap, tenant empty",
			"tenant 1/m burst 3\nquota off\nconcurrency 2", 3, 3, "concurrency", 100, 120, 2, "at most 2 calls", ""},
		{"over the pre-auth burst and the anonymous one",
			"preauth 1/m burst 3\nanonymous 1/m burst 2", -1, 4, "preauth", 1, 60, 2, "costing at most 2 together", ""},
		{"larger than the whole quota, tenant short of tokens",
			"tenant 1/m burst 7\nquota 5/day", 4, 6, "quota", 1, 1, 1, "costing at most 1", ""},
		// The burst of 3 would not fit the 2 the quota has left; the
		// empty bucket holds 2 tokens in two minutes, its burst in three.
		{"over the burst, quota nearly used",
			"tenant 1/m burst 3\nquota 5/day", 3, 4, "tenant", 100, 120, 2, "costing at most 2 together", ""},
		// Every layer looks in turn (a tool quota is configured): the
		// quota refusal (to midnight) outlasts the tenant's before the cap
		// outlasts both, and the tenant's wait must not be lost with it.
		{"more calls than the concurrency cap, tenant empty, quota short",
			"tenant 1/m burst 3\nquota 5/day\nconcurrency 2\ntool other {\nquota 9/day\n}", 3, 3, "concurrency", 100, 120, 2, "at most 2 calls", ""},
		// A tool quota's 4 calls left bound calls, not cost: 6, the
		// burst, passes (two calls of 3).
		{"over the burst and over a tool quota",
			"tenant 1/m burst 6\nquota 30/day\ntool photo {\ncost 3\nquota 4/day\n}", 0, 5, "tenant", 1, 1, 6, "costing at most 6 together", "photo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, tc.block)
			var hdr []string
			if tc.spend >= 0 {
				e.prove("valid-never")
				e.spend("valid-never", tc.spend)
				hdr = []string{"Authorization", "Bearer valid-never"}
			}
			calls := make([]string, tc.batch)
			for i := range calls {
				calls[i] = harness.ToolCall(i+1, cmp.Or(tc.tool, "echo"), nil)
			}
			r := e.post("["+strings.Join(calls, ",")+"]", hdr...)
			var answers []rpcError
			r.JSON(t, &answers)
			if r.Status != http.StatusTooManyRequests || len(answers) == 0 || answers[0].Error == nil {
				t.Fatalf("want a 429 with errors: %d %s", r.Status, r.Body)
			}
			got := answers[0].Error
			if got.Data.Limit != tc.limit || !strings.Contains(got.Message, "never be admitted") ||
				strings.Contains(got.Message, "will work then") || !strings.Contains(got.Message, tc.says) {
				t.Fatalf("want a %s refusal saying the request never passes as sent, %q: %s", tc.limit, tc.says, r.Body)
			}
			if got.Data.MaxPerRequest != tc.max {
				t.Fatalf("maxPerRequest %d, want %d: %s", got.Data.MaxPerRequest, tc.max, got.Message)
			}
			if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < tc.raLo || ra > tc.raHi {
				t.Fatalf("Retry-After %d, want %d to %d", ra, tc.raLo, tc.raHi)
			}
		})
	}
}

// A request carrying the identity header twice is refused: a backend that
// checks the first value would prove or serve a caller whom the limiter
// keyed by the joined values, so each variant would mint a fresh budget.
func TestRepeatedIdentityHeaderIsRefused(t *testing.T) {
	e := start(t, "tenant 10/s burst 100\nquota 2/day\npreauth 100/s burst 1000")
	e.prove("valid-dup")
	e.spend("valid-dup", 2)
	refusal(t, e.call(3, "Authorization", "Bearer valid-dup"), http.StatusTooManyRequests, "quota")
	before := e.backend.ToolCalls()
	for _, extra := range []string{"a", "Bearer valid-dup", ""} {
		req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(harness.ToolCall(4, "echo", map[string]any{"text": "hi"})))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Add("Authorization", "Bearer valid-dup")
		req.Header.Add("Authorization", extra)
		r := harness.Do(t, req)
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || !strings.Contains(got.Error.Message, "Authorization") || got.ID != float64(4) {
			t.Fatalf("second Authorization %q: %d %s, want 400 naming the header and echoing id 4", extra, r.Status, r.Body)
		}
	}
	// Like every refusal, it echoes each id of a batch and answers a
	// notification with no body.
	twice := func(body string) *harness.Response {
		req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Add("Authorization", "Bearer valid-dup")
		req.Header.Add("Authorization", "Bearer other")
		return harness.Do(t, req)
	}
	r := twice("[" + harness.ToolCall(5, "echo", nil) + "," + harness.ToolCall(6, "echo", nil) + "]")
	var errs []rpcError
	r.JSON(t, &errs)
	if r.Status != http.StatusBadRequest || len(errs) != 2 || errs[0].ID != float64(5) || errs[1].ID != float64(6) {
		t.Fatalf("batch with a repeated Authorization: %d %s, want 400 with errors for ids 5 and 6", r.Status, r.Body)
	}
	if r := twice(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusBadRequest || len(r.Body) != 0 {
		t.Fatalf("notification with a repeated Authorization: %d %q, want 400 with no body", r.Status, r.Body)
	}
	unchanged(t, e, before, "repeated Authorization")
}

// At site level the directive runs before handle blocks, one of which
// holds reverse_proxy, without an order option: ordered only before
// reverse_proxy it would sit behind them and never run.
func TestSiteLevelDirectiveLimitsHandleBlocks(t *testing.T) {
	e := startSite(t, "mcp_ratelimit {\nzone handles\ntenant 1/m burst 1\nquota off\n}\n"+
		"handle /mcp* {\nreverse_proxy $BACKEND\n}\nhandle {\nrespond \"nf\" 404\n}")
	e.prove("valid-handles")
	if r := e.call(1, "Authorization", "Bearer valid-handles"); r.Status != http.StatusOK {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	before := e.backend.ToolCalls()
	refusal(t, e.call(2, "Authorization", "Bearer valid-handles"), http.StatusTooManyRequests, "tenant")
	unchanged(t, e, before, "a call past the tenant burst, proxied in a handle block")
}

// Identities read from a query parameter, a cookie, or a placeholder with
// text around a header are held to the rule of a lone header: a request
// naming the input twice is refused, or each throwaway value beside the
// real one would be proven by it and get a fresh budget. (The demo backend
// serves requests without Authorization, so it proves any such identity.)
func TestRepeatedIdentityInputsAreRefused(t *testing.T) {
	e := start(t, "identity {http.request.uri.query.token} {http.request.cookie.token} \"key:{http.request.header.X-Api-Key}\"\n"+
		"tenant 10/s burst 100\nquota 2/day\npreauth 100/s burst 1000")
	mcp := e.mcp
	send := func(query string, hdr ...string) *harness.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, mcp+"?"+query, strings.NewReader(harness.ToolCall(3, "echo", map[string]any{"text": "hi"})))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		return harness.Do(t, req)
	}
	real := []string{"Cookie", "token=c1", "X-Api-Key", "k1"}
	for i := range 2 { // the first proves, and both use the quota
		if r := send("token=valid-q", real...); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
	}
	refusal(t, send("token=valid-q", real...), http.StatusTooManyRequests, "quota")
	before := e.backend.ToolCalls()
	for _, c := range []struct {
		query, named string
		hdr          []string
	}{
		{"token=valid-q&token=x1", "token query parameter", real},
		{"token=x2&token=valid-q", "token query parameter", real},
		{"Token=x3&token=valid-q", "token query parameter", real},
		{"token=valid-q;token=x4", "token query parameter", real},
		{"t%6fken=x5&token=valid-q", "token query parameter", real},
		{"token=valid-q&token[]=x9", "token query parameter", real},
		{"token=valid-q&token%5B0%5D=x10", "token query parameter", real},
		{"Token=valid-q", "token query parameter", real},
		{"%20token=valid-q", "token query parameter", real},
		{"token=valid-q", "token cookie", []string{"Cookie", "TOKEN=x6; token=c1", "X-Api-Key", "k1"}},
		// Caddy's placeholder reads a cookie name in any letter case;
		// backends (Go's r.Cookie among them) read it as spelled, so a
		// lone TOKEN cookie is no credential to them.
		{"token=valid-q", "token cookie", []string{"Cookie", "TOKEN=x18", "X-Api-Key", "k1"}},
		{"token=valid-q", "Cookie header", []string{"Cookie", "token=c1", "Cookie", "token=x7", "X-Api-Key", "k1"}},
		// Servers that read the first Cookie line only (Python's
		// http.server, aiohttp, Starlette) see no token at all.
		{"token=valid-q", "Cookie header", []string{"Cookie", "a=1", "Cookie", "token=x27", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x11 token=c1", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x12, token=c1", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "%74oken=c1", "X-Api-Key", "k1"}},
		{"token=valid-q", "X-Api-Key", []string{"Cookie", "token=c1", "X-Api-Key", "k1", "X-Api-Key", "x8"}},
		// Escapes Go cannot decode, which PHP decodes around: the name is
		// `token` once cut at the NUL.
		{"token=x13&token%00%zz=valid-q", "token query parameter", real},
		{"token%00%zz=valid-q", "token query parameter", real},
		{"token=valid-q", "token cookie", []string{"Cookie", "token%00%zz=c1; token=x14", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token; token=c1", "X-Api-Key", "k1"}},
		// qs reads a key without a parent by its first segment; Python
		// frameworks strip Unicode and Latin-1 spaces around a cookie's
		// name; PHP reads `token[]` as an array replacing the string.
		{"%5Btoken%5D=valid-q", "token query parameter", real},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x15; \xc2\xa0token=c1", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x16; \xa0token=c1", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x17; token[]=c1", "X-Api-Key", "k1"}},
		// Rack 2 reads `token]` and `[token` as token; qs with allowDots
		// reads `token.0`. Go and Python read `token =v` as token.
		{"token=x19&token%5D=valid-q", "token query parameter", real},
		{"%5Btoken=valid-q", "token query parameter", real},
		{"token.0=valid-q", "token query parameter", real},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x20; token =c1", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x21; token\t=\tc1", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "x=1 token =c1", "X-Api-Key", "k1"}},
		// WebOb finds a pair after any byte it does not allow in a name,
		// inside another cookie's value too; ufo skips a leading '='.
		{"token=valid-q", "token cookie", []string{"Cookie", `token=x22; x=a"token=c1`, "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", `"token=c1`, "X-Api-Key", "k1"}},
		{"=token=valid-q", "token query parameter", real},
		// Each reading finds one token pair, a different one: Go the
		// first, WebOb (reading `\;` as an escape) the second.
		{"token=valid-q", "token cookie", []string{"Cookie", `x=a\;token=x23; y=b"token=c1`, "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x24; path=a\\\xc3\xa9token=c1", "X-Api-Key", "k1"}},
		// Django and Starlette strip Unicode spaces before '=' too.
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x25; token \xc2\xa0=c1", "X-Api-Key", "k1"}},
		{"token=valid-q", "token cookie", []string{"Cookie", "token=x26; token \xa0=c1", "X-Api-Key", "k1"}},
	} {
		r := send(c.query, c.hdr...)
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || !strings.Contains(got.Error.Message, c.named) {
			t.Fatalf("?%s %q: %d %s, want 400 naming the %s", c.query, c.hdr, r.Status, r.Body, c.named)
		}
	}
	unchanged(t, e, before, "repeated identity inputs")
	// The identity's name as a word inside another cookie's value is no
	// cookie: the request is the real identity's, refused for its quota.
	// Spaces around a cookie's value, which most backends trim, and
	// %-escapes in it, which most decode, do not make another identity
	// either.
	for _, cookie := range []string{"token=c1; tabs=home,token,settings", "token=c1; note=my token",
		"token=c1; redirect=/cb?token=abc", "token=  c1", `token=" c1 "`, "token=%63%31", "token=c%31",
		`token=c1; x="a token=b"`, "token=c1 x1", "token=c1,2", "token=c1[3"} {
		refusal(t, send("token=valid-q", "Cookie", cookie, "X-Api-Key", "k1"), http.StatusTooManyRequests, "quota")
	}
}

// A request refused for naming its identity more than once pays its
// pre-auth token as an unproven one does, even when the value Caddy's
// placeholder reads is proven: else a spelling beside a proven key would
// buy refusals for nothing, a flood the address budget never stops. With
// the budget spent it is still refused as sent: no wait lets it pass.
func TestAmbiguousIdentityBesideAProvenOnePaysPreauth(t *testing.T) {
	e := start(t, "identity {http.request.uri.query.token} {http.request.cookie.token}\npreauth 1/h burst 2")
	call := func(query string, hdr ...string) *harness.Response {
		t.Helper()
		return harness.Post(t, e.mcp+"?"+query, harness.ToolCall(1, "echo", nil), hdr...)
	}
	proven := []string{"Cookie", "token=c1"}
	if r := call("token=valid-p", proven...); r.Status != http.StatusOK { // the address's one token
		t.Fatalf("proving call: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		query string
		hdr   []string
	}{
		{"token=valid-p&Token=x1", proven},
		{"token=valid-p&token[]=x2", proven},
		{"token=valid-p", []string{"Cookie", "token=c1; TOKEN=x3"}},
	} {
		if r := call(c.query, c.hdr...); r.Status != http.StatusBadRequest {
			t.Fatalf("%s %v: %d %s, want 400", c.query, c.hdr, r.Status, r.Body)
		}
	}
	// The first of them took the address's last token.
	refusal(t, call("token=valid-other", "Cookie", "token=c2"), http.StatusTooManyRequests, "preauth")
	if r := call("token=valid-p", proven...); r.Status != http.StatusOK {
		t.Fatalf("the proven identity itself: %d %s", r.Status, r.Body)
	}
}

// An identity value holding a line break is refused (400). With several
// placeholders the values are joined with newlines, so ("v\n1", "2")
// and ("v", "1\n2") would be one identity, and a caller never accepted
// by the backend would spend, and could get forgotten, another's.
func TestIdentityValueWithALineBreakIsRefused(t *testing.T) {
	e := start(t, "zone linebreak\nidentity {http.request.uri.query.user} {http.request.cookie.key}\n"+
		"tenant 10/s burst 100\nquota 2/day\npreauth 100/s burst 1000")
	before := e.backend.ToolCalls()
	for _, c := range []struct{ query, cookie string }{
		{"user=v%0A1", "key=2"},
		{"user=v", "key=1%0A2"},
		{"user=a%0Ab", "key=c%0Ad"},
	} {
		r := e.queryCookieCall(c.query, c.cookie)
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || !strings.Contains(got.Error.Message, "line break") {
			t.Fatalf("?%s with cookie %s: %d %s, want 400 naming the line break", c.query, c.cookie, r.Status, r.Body)
		}
	}
	unchanged(t, e, before, "identity values with a line break")
	for i := range 2 { // values without one still make an identity
		if r := e.queryCookieCall("user=v", "key=1"); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
	}
	refusal(t, e.queryCookieCall("user=v", "key=1"), http.StatusTooManyRequests, "quota")

	// So is a lone value: the fingerprint command reads one line per
	// placeholder, and could not name it for an override.
	lone := start(t, "zone linebreaklone\nidentity {http.request.uri.query.user}\npreauth 100/s burst 1000")
	before = lone.backend.ToolCalls()
	r := lone.queryCookieCall("user=a%0Ab", "")
	var got rpcError
	r.JSON(t, &got)
	if r.Status != http.StatusBadRequest || got.Error == nil || !strings.Contains(got.Error.Message, "line break") {
		t.Fatalf("?user=a%%0Ab alone: %d %s, want 400 naming the line break", r.Status, r.Body)
	}
	unchanged(t, lone, before, "a lone identity value with a line break")
}

// An unproven request costing more than the pre-auth burst is told so,
// with its whole cost (the token paid before its body was read included).
func TestUnprovenRequestOverThePreauthBurstIsToldItCanNeverPass(t *testing.T) {
	e := start(t, "preauth 1/m burst 2")
	for _, n := range []int{3, 5} {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = harness.ToolCall(i+1, "echo", nil)
		}
		r := e.post("[" + strings.Join(calls, ",") + "]")
		var answers []rpcError
		r.JSON(t, &answers)
		if r.Status != http.StatusTooManyRequests || len(answers) != n || answers[0].Error == nil {
			t.Fatalf("unproven batch of %d: %d %s", n, r.Status, r.Body)
		}
		msg := answers[0].Error.Message
		if !strings.Contains(msg, fmt.Sprintf("costs %d", n)) || !strings.Contains(msg, "never be admitted") || strings.Contains(msg, "will work then") {
			t.Fatalf("batch of %d: the message must say it costs %d and can never pass as sent: %q", n, n, msg)
		}
	}
}

// A pre-auth refusal reads a small body only to echo its ids; a body that
// does not arrive must not hold the answer back, whether its length is
// announced or it comes chunked.
func TestPreauthRefusalDoesNotWaitForASlowBody(t *testing.T) {
	e := start(t, "preauth 1/m burst 1")
	e.call(1)
	for name, framing := range map[string]string{
		"length":  "Content-Length: 100\r\n\r\n{",                 // 100 bytes announced, one sent
		"chunked": "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", // one chunk, then nothing
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s", conn.RemoteAddr(), framing)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer while the body is pending: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"id":null`) {
			t.Fatalf("%s: %d %s, want a pre-auth refusal with id null", name, resp.StatusCode, body)
		}
	}
}

// A chunked body over max_body is refused as soon as it is too large: the
// answer does not wait for the rest of it (net/http would drain up to
// 256 KiB of a body of unknown length first, here until the body's 5 s
// deadline, since the rest never comes).
func TestOversizedChunkedBodyIsRefusedAtOnce(t *testing.T) {
	e := start(t, "max_body 1KiB")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	chunk := strings.Repeat(" ", 4096)
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", conn.RemoteAddr(), len(chunk), chunk)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the rest of the body is pending: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

// Backends accept a bearer token under any spelling of the scheme and
// whitespace (the Go SDK does): every spelling is the one identity, so a
// tenant cannot mint fresh budgets by respelling its header.
func TestRespelledCredentialsAreOneIdentity(t *testing.T) {
	e := start(t, "tenant 10/s burst 100\nquota 2/day")
	e.prove("valid-spell")
	e.spend("valid-spell", 2)
	before := e.backend.ToolCalls()
	for _, v := range []string{"Bearer valid-spell", "bearer valid-spell", "BEARER valid-spell", "Bearer  valid-spell", "Bearer\tvalid-spell"} {
		refusal(t, e.call(3, "Authorization", v), http.StatusTooManyRequests, "quota")
	}
	unchanged(t, e, before, "respelled credentials")
}

// Java's equalsIgnoreCase and .NET's OrdinalIgnoreCase read the dotless ı
// (Java the dotted İ too) as i: a backend on them accepts `Basıc` as
// Basic, so those spellings of a scheme are the one identity as well, and
// one password does not get a budget (and a quota) per spelling.
func TestSchemeSpelledWithATurkishIIsOneIdentity(t *testing.T) {
	// The backend is given no credential, so it runs the calls: this one
	// accepts none but Bearer.
	e := startSite(t, "mcp_ratelimit {\ntenant 10/s burst 100\nquota 2/day\n}\nreverse_proxy $BACKEND {\nheader_up -Authorization\n}")
	for i := range 2 {
		if r := e.call(i, "Authorization", "Basic ZGVtbzpwdw=="); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
	}
	before := e.backend.ToolCalls()
	for _, v := range []string{"Bas\u0131c ZGVtbzpwdw==", "BAS\u0130C ZGVtbzpwdw==", "bas\u0131c\tZGVtbzpwdw=="} {
		refusal(t, e.call(3, "Authorization", v), http.StatusTooManyRequests, "quota")
	}
	unchanged(t, e, before, "the scheme spelled with ı or İ")
}

// Proxy-Authorization holds credentials as Authorization does (RFC 9110):
// its spellings are one identity too, and Bearer credentials of more than
// one token are refused.
func TestRespelledProxyCredentialsAreOneIdentity(t *testing.T) {
	e := start(t, "identity {http.request.header.Proxy-Authorization}\ntrust_identity\ntenant 1/h burst 1\nquota off")
	if r := e.call(1, "Proxy-Authorization", "bearer  valid-proxy"); r.Status != http.StatusOK {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	for i, v := range []string{"Bearer valid-proxy", "BEARER valid-proxy", "Bearer\tvalid-proxy"} {
		refusal(t, e.call(2+i, "Proxy-Authorization", v), http.StatusTooManyRequests, "tenant")
	}
	if r := e.call(9, "Proxy-Authorization", "Bearer valid-proxy extra"); r.Status != http.StatusBadRequest {
		t.Fatalf("two tokens after the scheme: %d %s, want 400", r.Status, r.Body)
	}
}

// Bearer and Basic credentials are one token: a backend that reads the
// first token and ignores the rest (the TypeScript SDK does) would prove
// every suffix, each a fresh identity with its own budget.
func TestCredentialsWithExtraTokensAreRefused(t *testing.T) {
	e := start(t, "tenant 10/s burst 100\nquota 2/day")
	e.prove("valid-extra")
	before := e.backend.ToolCalls()
	for _, v := range []string{"Bearer valid-extra x1", "bearer valid-extra  x2", "Basic dXNlcjpwYXNz x3"} {
		r := e.call(1, "Authorization", v)
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || !strings.Contains(got.Error.Message, "one token") {
			t.Fatalf("%q: %d %s, want 400 saying credentials are one token", v, r.Status, r.Body)
		}
	}
	unchanged(t, e, before, "credentials with extra tokens")
	// Schemes whose credentials are parameters keep their spaces.
	if r := e.call(2, "Authorization", `Digest username="u", realm="r"`); r.Status == http.StatusBadRequest {
		t.Fatalf("Digest parameters refused: %s", r.Body)
	}
}

// Frameworks answer OPTIONS (Express for every route) and often HEAD
// themselves, before authentication runs: their 2xx proves nothing.
// knownIn returns how many identities zone holds proven.
func (e *env) knownIn(zone string) int {
	e.t.Helper()
	var l struct {
		Total int `json:"total"`
	}
	e.caddy.AdminJSON(e.t, "/mcp_ratelimit/"+zone+"/identities", &l)
	return l.Total
}

// A 2xx proves only an answer that says something about the credential:
// not OPTIONS or HEAD, which frameworks answer before authentication, and
// on a JSON-RPC route only a POST of a JSON-RPC message, in a body that is
// JSON — public endpoints (MCP's OAuth metadata must be public) answer
// anything else with a 2xx.
func TestOnlyAnAnsweredJSONRPCPostProves(t *testing.T) {
	e := start(t, "zone blind\npreauth 100/s burst 100")
	known := func() int { return e.knownIn("blind") }
	for _, c := range []struct{ method, body string }{
		{http.MethodOptions, ""},
		{http.MethodHead, ""},
		{http.MethodGet, ""},
		{http.MethodGet, harness.ToolCall(1, "echo", nil)},
		{http.MethodDelete, harness.ToolCall(1, "echo", nil)},
		{http.MethodPost, `{"client_name":"x","redirect_uris":["https://x.example/cb"]}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"result":{}}`},
		// Not JSON: what a lenient reading charges is no JSON-RPC request
		// a backend answered (many answer a parse error before they check
		// the credential).
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize"`},
		{http.MethodPost, `{method:initialize,id:1}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize"} junk`},
		// JSON, but no JSON-RPC 2.0 request as the specification writes
		// one: a backend may answer it with Invalid Request, in a 200,
		// before it checks the credential.
		{http.MethodPost, `{"id":1,"method":"tools/call","params":{"name":"echo"}}`},
		{http.MethodPost, `{"jsonrpc":"1.0","id":1,"method":"ping"}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":true,"method":"ping"}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"ping"}`},
		{http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0"}]`},
		{http.MethodPost, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\xff\"}"},
		{http.MethodPost, `{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`},
	} {
		req, _ := http.NewRequest(c.method, e.mcp, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer garbage-"+c.method+strconv.Itoa(len(c.body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Demo-Status", "200") // answered without checking the credential
		if r := harness.Do(t, req); r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d", c.method, c.body, r.Status)
		}
		if n := known(); n != 0 {
			t.Fatalf("a 2xx to %s %s proved an identity", c.method, c.body)
		}
	}
	// The same answer to a POST proves.
	if r := e.call(1, "Authorization", "Bearer garbage-POST", "X-Demo-Status", "200"); r.Status != http.StatusOK {
		t.Fatalf("POST: %d", r.Status)
	}
	if n := known(); n != 1 {
		t.Fatalf("%d identities proven after a POST's 2xx, want 1", n)
	}

	// On a `meter *` route (a REST surface), any 2xx but to OPTIONS or
	// HEAD proves: a framework answers those itself (CORS preflights)
	// without checking a credential. Nor does a 3xx prove.
	rest := startSite(t, "route /v1/* {\n mcp_ratelimit {\n  zone blindrest\n  meter *\n  preauth 100/s burst 100\n }\n respond \"ok\" {http.request.header.X-Status}\n}")
	send := func(method, token, status string) {
		t.Helper()
		req, _ := http.NewRequest(method, rest.caddy.URL+"/v1/things", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Status", status)
		if r := harness.Do(t, req); strconv.Itoa(r.Status) != status {
			t.Fatalf("REST %s: %d, want %s", method, r.Status, status)
		}
	}
	send(http.MethodOptions, "garbage-options", "200")
	send(http.MethodHead, "garbage-head", "200")
	send(http.MethodGet, "garbage-300", "300")
	if n := rest.knownIn("blindrest"); n != 0 {
		t.Fatalf("%d identities proven by a 2xx to OPTIONS or HEAD or a 300 on a meter * route, want 0", n)
	}
	send(http.MethodGet, "valid-rest", "200")
	if n := rest.knownIn("blindrest"); n != 1 {
		t.Fatalf("%d identities proven by a 2xx on a meter * route, want 1", n)
	}
}

// An informational answer (103 Early Hints) before the backend's verdict
// is not the verdict: the 200 after it proves the credential.
func TestEarlyHintsDoNotHideTheVerdict(t *testing.T) {
	e := start(t, "zone hints\npreauth 100/s burst 100")
	if r := e.call(1, "Authorization", "Bearer valid-hints", "X-Demo-Early-Hints", "1"); r.Status != http.StatusOK {
		t.Fatalf("call with early hints: %d %s", r.Status, r.Body)
	}
	if n := e.knownIn("hints"); n != 1 {
		t.Fatalf("%d identities proven by a 200 after a 103, want 1", n)
	}
}

// When several layers refuse, the refusal names the longest wait: a tenant
// refusal's "retry in 1s" would be a lie while the quota is exhausted, or
// while the global bucket needs a minute.
func TestRefusalNamesTheLayerThatHoldsTheCallBackLongest(t *testing.T) {
	t.Run("quota exhausted behind a tenant refusal", func(t *testing.T) {
		e := start(t, "tenant 1/s burst 3\nquota 3/day")
		e.prove("valid-longest")
		e.spend("valid-longest", 3)
		got := refusal(t, e.call(4, "Authorization", "Bearer valid-longest"), http.StatusTooManyRequests, "quota")
		if got.Error.Data.RetryAfterSeconds < 2 {
			t.Fatalf("quota refusal with Retry-After %d", got.Error.Data.RetryAfterSeconds)
		}
	})
	t.Run("global needs longer than the tenant", func(t *testing.T) {
		e := start(t, "tenant 1/s burst 1\nglobal 1/m burst 1\nquota off")
		e.prove("valid-longest")
		e.spend("valid-longest", 1)
		r := e.call(2, "Authorization", "Bearer valid-longest")
		refusal(t, r, http.StatusTooManyRequests, "global")
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 50 {
			t.Fatalf("Retry-After %d, want the global bucket's minute", ra)
		}
	})
}

// An unproven request's pre-auth refusal names the wait for its whole
// cost, not for the first token checked before the body was read.
func TestPreauthRefusalWaitsForTheWholeCost(t *testing.T) {
	e := start(t, "preauth 1/s burst 3\ncost echo 3")
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("first unproven call: %d %s", r.Status, r.Body)
	}
	r := e.call(2)
	refusal(t, r, http.StatusTooManyRequests, "preauth")
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 2 {
		t.Fatalf("Retry-After %d for a call costing 3 at 1/s on an empty bucket, want about 3", ra)
	}
}

// A small max_known drops the least recently used proven identities and
// nothing more: the identities it keeps are never refused for want of a
// bucket while the drained buckets of those it dropped refill (each set
// holds twice max_known, and at least mcplimit.MinBucketRoom).
func TestASmallMaxKnownNeverHoldsAProvenIdentityBack(t *testing.T) {
	e := start(t, "zone small-known\nmax_known 2\npreauth 100/s burst 100\ntenant 1/h burst 5\nquota off")
	toks := []string{"valid-small-a", "valid-small-b", "valid-small-c"}
	for _, tok := range toks { // each proves itself; c's proof drops a
		if r := e.call(1, "Authorization", "Bearer "+tok); r.Status != http.StatusOK {
			t.Fatalf("%s proving: %d %s", tok, r.Status, r.Body)
		}
	}
	// Each was dropped in turn (a by c's proof, b by a's, c by b's):
	// unproven, it is charged at pre-auth again, and to a tenant bucket
	// as a forgotten identity is, each its own.
	for _, tok := range toks {
		r := e.call(2, "Authorization", "Bearer "+tok)
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("RateLimit-Policy"), `"preauth"`) {
			t.Fatalf("%s: %d, RateLimit-Policy %q, want pre-auth first: %s", tok, r.Status, r.Header.Get("RateLimit-Policy"), r.Body)
		}
	}
	// c, proven again and kept, calls on.
	if r := e.call(3, "Authorization", "Bearer valid-small-c"); r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("RateLimit-Policy"), `"tenant"`) {
		t.Fatalf("valid-small-c, proven: %d, RateLimit-Policy %q", r.Status, r.Header.Get("RateLimit-Policy"))
	}
}

// A new caller refused because the bucket set is full is told so, with a
// wait after which a bucket can make room, never "you exceeded your limit,
// retry in 1s".
func TestFullBucketSetRefusalSaysSoHonestly(t *testing.T) {
	e := start(t, "max_known 2\nglobal off\npreauth 10000/s burst 10000\ntenant 1/h burst 2\nquota off")
	e.fillTenants("valid-full")
	e.prove("valid-full-c")
	r := e.call(3, "Authorization", "Bearer valid-full-c")
	got := refusal(t, r, http.StatusTooManyRequests, "tenant")
	if !strings.Contains(got.Error.Message, "tracks as many") || strings.Contains(got.Error.Message, "exceeded") {
		t.Fatalf("full-set refusal message: %s", got.Error.Message)
	}
	if got.Error.Data.RetryAfterSeconds < 3000 {
		t.Fatalf("Retry-After %d; no bucket can make room for about an hour", got.Error.Data.RetryAfterSeconds)
	}
	// The key has no bucket, and none to spend until room may appear:
	// the header says so, with the refusal's wait, not the 7200 s window.
	want := fmt.Sprintf(`"tenant";r=0;t=%d`, got.Error.Data.RetryAfterSeconds)
	if rl := r.Header.Get("RateLimit"); rl != want || got.Error.Data.RetryAfterSeconds > 3600 {
		t.Fatalf("RateLimit %q on a full-set refusal with Retry-After %d, want %q", rl, got.Error.Data.RetryAfterSeconds, want)
	}
}

// Reading an unproven request's body costs its address a token even when
// the request is then refused, for its body or for the rest of its cost:
// otherwise a body too costly to pass would be read and parsed for free.
func TestUnprovenRefusedBodiesStillSpendTheFirstToken(t *testing.T) {
	batch := make([]string, 25)
	for i := range batch {
		batch[i] = harness.ToolCall(i, "echo", map[string]any{"text": "hi"})
	}
	for zone, body := range map[string]string{
		"costly":  "[" + strings.Join(batch, ",") + "]", // a batch costing more than the burst
		"badargs": argCall(1, `{"limit":50}`),           // an argument over its bound
	} {
		t.Run(zone, func(t *testing.T) {
			e := start(t, "zone "+zone+"\npreauth 1/m burst 3\ntool echo {\n arg limit max 5\n}")
			for i := range 3 {
				if r := e.post(body); r.Status == http.StatusOK {
					t.Fatalf("request %d admitted: %s", i, r.Body)
				}
			}
			// Three bodies read: the address's three tokens are spent.
			refusal(t, e.call(9), http.StatusTooManyRequests, "preauth")
		})
	}
}

// Handlers stacked in one route: a refusal written by the inner one (a 200
// under refuse_with jsonrpc) is not the backend accepting the credential,
// so the outer one must not prove it — nor count its 429s as the
// backend's throttling.
func TestInnerHandlersRefusalProvesNothingInTheOuterOne(t *testing.T) {
	for _, mode := range []string{"jsonrpc", "status"} {
		t.Run(mode, func(t *testing.T) {
			outer := "outer" + mode
			e := startSite(t, "route {\n\tmcp_ratelimit {\n\t\tzone "+outer+"\n\t\tpreauth 1/m burst 5\n\t}\n"+
				"\tmcp_ratelimit {\n\t\tzone inner"+mode+"\n\t\tpreauth 1/m burst 1\n\t\trefuse_with "+mode+"\n\t}\n\treverse_proxy $BACKEND\n}")
			h := []string{"Authorization", "Bearer junk-stacked"}
			if r := e.call(1, h...); r.Status != http.StatusUnauthorized {
				t.Fatalf("first call with a garbage credential: %d %s", r.Status, r.Body)
			}
			for i := range 2 {
				if r := e.call(2+i, h...); !strings.Contains(string(r.Body), `"limit":"preauth"`) {
					t.Fatalf("call %d: %d %s, want the inner pre-auth refusal", 2+i, r.Status, r.Body)
				}
			}
			st, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/"+outer+"/identities", nil)
			if st != http.StatusOK || strings.Contains(string(body), `"fingerprint"`) {
				t.Fatalf("outer zone's proven identities after inner refusals: %d %s", st, body)
			}
			_, metrics := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
			if n := promValue(string(metrics), "mcp_ratelimit_upstream_throttled_total", `zone="`+outer+`"`); n > 0 {
				t.Fatalf("outer zone counted %v inner refusals as upstream throttling", n)
			}
		})
	}
}

// A credential the Connection header names is dropped by reverse_proxy
// before the backend sees it: a backend that serves anonymous requests
// would answer 2xx and prove a credential it was never shown. Such a
// request is refused, and proves nothing.
func TestCredentialNamedByConnectionIsRefused(t *testing.T) {
	e := start(t, "preauth 100/s burst 100\ntenant 1/m burst 1")
	before := e.backend.ToolCalls()
	for i, conn := range []string{"Authorization", "keep-alive, authorization", " AUTHORIZATION "} {
		r := e.call(i, "Authorization", "Bearer garbage-hop", "Connection", conn)
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || !strings.Contains(got.Error.Message, "Connection") {
			t.Fatalf("Connection %q: %d %s, want 400 naming the Connection header", conn, r.Status, r.Body)
		}
	}
	unchanged(t, e, before, "credentials named by Connection")
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/default/identities", nil)
	if st != http.StatusOK || strings.Contains(string(body), `"fingerprint"`) {
		t.Fatalf("proven identities: %d %s", st, body)
	}
}

// An unproven request refused for the rest of its cost keeps the token it
// paid, so the wait it is told is for its whole cost from there: the same
// request sent again after Retry-After is admitted.
func TestPreauthRestOfCostRefusalWaitsForTheWholeCost(t *testing.T) {
	e := start(t, "zone restcost\npreauth 1/s burst 5")
	batch := func(n int) string {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = harness.ToolCall(i+1, "echo", map[string]any{"text": "hi"})
		}
		return "[" + strings.Join(calls, ",") + "]"
	}
	if r := e.post(batch(3)); r.Status != http.StatusOK {
		t.Fatalf("batch of 3: %d %s", r.Status, r.Body)
	}
	r := e.post(batch(5))
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("batch of 5 with 2 tokens left: %d %s", r.Status, r.Body)
	}
	ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if ra < 4 {
		t.Fatalf("Retry-After %d: one token kept of 2, 5 needed at 1/s, want 4", ra)
	}
	time.Sleep(time.Duration(ra) * time.Second)
	if r := e.post(batch(5)); r.Status != http.StatusOK {
		t.Fatalf("the same batch after Retry-After %ds: %d %s", ra, r.Status, r.Body)
	}
}

// A pre-auth refusal also asks the layers after it: while the anonymous
// bucket needs a minute, "retry in 1s" would be a lie.
func TestPreauthRefusalNamesALongerLaterWait(t *testing.T) {
	e := start(t, "zone preauthlater\npreauth 1/s burst 1\nanonymous 1/m burst 1")
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("first anonymous call: %d %s", r.Status, r.Body)
	}
	r := e.call(2)
	got := refusal(t, r, http.StatusTooManyRequests, "anonymous")
	if got.Error.Data.RetryAfterSeconds < 50 {
		t.Fatalf("Retry-After %d, want the anonymous bucket's minute", got.Error.Data.RetryAfterSeconds)
	}
}

// A JSON body that is no JSON-RPC request (no method, no id) is not a
// notification: its refusal carries a JSON-RPC error with id null, as an
// invalid body's does, never an empty body.
func TestRefusalOfABodyWithoutMethodHasAnAnswer(t *testing.T) {
	e := start(t, "zone nomethod\nmeter *\ntenant 1/m burst 1\nquota off")
	e.prove("valid-nomethod")
	h := []string{"Authorization", "Bearer valid-nomethod"}
	e.post(`{"query":"x"}`, h...)
	r := e.post(`{"query":"x"}`, h...)
	got := refusal(t, r, http.StatusTooManyRequests, "tenant")
	if got.ID != nil || !strings.Contains(string(r.Body), `"id":null`) {
		t.Fatalf("refusal of a body without method: %s, want an error with id null", r.Body)
	}
}

// A credential sent as a request trailer never reaches the backend: a
// server that reads trailers as headers (uvicorn with httptools) would
// otherwise run calls of an exhausted identity that the limiter, seeing
// no identity, charges to the pre-auth budget only, and would prove junk
// sent in the header with the trailer's real credential.
func TestRequestTrailersDoNotReachTheBackend(t *testing.T) {
	e := start(t, "zone trailers\ntenant 10/s burst 100\nquota 2/day\npreauth 100/s burst 100")
	e.prove("valid-trailer")
	e.spend("valid-trailer", 2)
	refusal(t, e.call(3, "Authorization", "Bearer valid-trailer"), http.StatusTooManyRequests, "quota")
	url := strings.Replace(e.mcp, "/mcp", "/merge-trailers", 1)
	send := func(id int, hdr ...string) *harness.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, io.NopCloser(strings.NewReader(harness.ToolCall(id, "echo", map[string]any{"text": "hi"}))))
		req.ContentLength = -1 // chunked, which trailers need
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		req.Trailer = http.Header{"Authorization": {"Bearer valid-trailer"}}
		return harness.Do(t, req)
	}
	before := e.backend.ToolCalls()
	for i := range 3 {
		if r := send(10 + i); r.Status != http.StatusUnauthorized {
			t.Fatalf("call %d with the credential only in a trailer: %d %s, want the backend's 401", i, r.Status, r.Body)
		}
	}
	// Junk in the header, the real credential in the trailer: the
	// backend's answer must not prove the junk.
	if r := send(20, "Authorization", "Bearer junk-1"); r.Status != http.StatusUnauthorized {
		t.Fatalf("junk header with a trailer credential: %d %s, want the backend's 401", r.Status, r.Body)
	}
	if n := e.backend.ToolCalls(); n != before {
		t.Fatalf("the backend ran %d tool calls authenticated by a trailer", n-before)
	}
	fp := fingerprintOf(t, e.caddy.Storage, "trailers", "Bearer junk-1")
	if _, body := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/trailers/identities/"+fp, nil); strings.Contains(string(body), `"proven":true`) {
		t.Fatalf("junk in the header was proven by a trailer's credential: %s", body)
	}
}

// A request refused because its identity headers are unreadable pays its
// pre-auth token first, like any unproven request: a flood of them costs
// the sender its address's budget. Once it is spent they are still
// refused as sent (no wait lets them pass), and other unproven calls wait.
func TestUnreadableIdentityPaysPreauth(t *testing.T) {
	e := start(t, "zone unreadable-preauth\npreauth 1/m burst 2")
	twice := func(id int) *harness.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(harness.ToolCall(id, "echo", map[string]any{"text": "hi"})))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Add("Authorization", "Bearer a")
		req.Header.Add("Authorization", "Bearer b")
		return harness.Do(t, req)
	}
	for i := range 3 {
		if r := twice(i); r.Status != http.StatusBadRequest {
			t.Fatalf("request %d with two Authorization headers: %d %s, want 400", i, r.Status, r.Body)
		}
	}
	refusal(t, e.call(3), http.StatusTooManyRequests, "preauth")
	if n := e.backend.Requests(); n != 0 {
		t.Fatalf("%d requests reached the backend", n)
	}
}

// A metered body must arrive within 5s plus a second per 64 KiB of
// max_body: it is held in memory before any layer but pre-auth has
// charged for it, so a caller trickling it is cut off (408), and nothing
// reaches the backend. The deadline bounds the body only: an answer that
// takes longer than it is not cut, over HTTP/1.1 or HTTP/2.
func TestTrickledBodyIsRefusedAndLongAnswersAreNotCut(t *testing.T) {
	for name, global := range map[string]string{
		"h1":  "",
		"h2c": "servers {\n protocols h1 h2c\n}",
	} {
		t.Run(name, func(t *testing.T) {
			zone := "slowbody-" + name
			e := start(t, "zone "+zone+"\nmax_body 64KiB\ntenant 10/s burst 100\npreauth 100/s burst 100", harness.Options{Global: global})
			e.prove("valid-slowbody")
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tr.Protocols.SetHTTP1(name == "h1")
			tr.Protocols.SetUnencryptedHTTP2(name == "h2c")
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			post := func(body io.Reader, length int64) (*http.Response, []byte) {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, e.mcp, body)
				req.ContentLength = length
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer valid-slowbody")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if want := map[bool]int{true: 2, false: 1}[name == "h2c"]; resp.ProtoMajor != want {
					t.Fatalf("answered over %s, want HTTP/%d", resp.Proto, want)
				}
				return resp, b
			}

			before := e.backend.Requests()
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { _, _ = pw.Write([]byte(`{"jsonrpc"`)) }() // and nothing more
			sent := time.Now()
			resp, body := post(pr, 1000)
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive in time (bodies may take at most 6s here)") {
				t.Fatalf("trickled body: %d %s, want 408 naming the 6s wait", resp.StatusCode, body)
			}
			if waited := time.Since(sent); waited < 5*time.Second {
				t.Fatalf("refused after %v, before the body's time was up", waited)
			}
			if n := e.backend.Requests() - before; n != 0 {
				t.Fatalf("%d requests reached the backend", n)
			}

			call := harness.ToolCall(2, "slow", map[string]any{"millis": 7000})
			resp, body = post(strings.NewReader(call), int64(len(call)))
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "done") {
				t.Fatalf("a 7s answer after a body that arrived at once: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// A server read_timeout shorter than the body's own wait ends a trickled
// body first (with read_body_idle on, its default): the 408 then names
// the server's timeout, not a wait the caller was never given.
func TestTrickledBodyPastAShorterReadTimeoutSaysSo(t *testing.T) {
	e := start(t, "zone slowbody-rt\ntenant 10/s burst 100\npreauth 100/s burst 100",
		harness.Options{Global: "servers {\n timeouts {\n read_body 1s\n }\n}"})
	e.prove("valid-slowbody-rt")
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"jsonrpc"`)) }() // and nothing more
	req, _ := http.NewRequest(http.MethodPost, e.mcp, pr)
	req.ContentLength = 1000
	req.Header.Set("Authorization", "Bearer valid-slowbody-rt")
	before := e.backend.Requests()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "within the server's read timeout") {
		t.Fatalf("trickled body: %d %s, want 408 naming the server's read timeout", resp.StatusCode, body)
	}
	if n := e.backend.Requests() - before; n != 0 {
		t.Fatalf("%d requests reached the backend", n)
	}
}

// Go's HTTP/2 server keeps the spaces and tabs around a header value that
// HTTP/1 parsers drop, and reverse_proxy forwards over HTTP/1.1: " key"
// and "key\t" must be the identity "key", not fresh ones with a fresh
// tenant bucket and quota each that the backend reads as "key".
func TestHeaderIdentityWhitespaceOverHTTP2IsOneIdentity(t *testing.T) {
	e := start(t, "zone h2-ows\nidentity {http.request.header.X-Api-Key}\ntenant 1/m burst 2\nquota off\npreauth 100/s burst 100",
		harness.Options{Global: "servers {\n protocols h1 h2c\n}"})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	call := func(key string) *harness.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(harness.ToolCall(1, "echo", map[string]any{"text": "hi"})))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header["X-Api-Key"] = []string{key}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("answered over %s, want HTTP/2", resp.Proto)
		}
		body, _ := io.ReadAll(resp.Body)
		return &harness.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
	}
	for i := range 3 { // proves the key, then spends its burst of 2
		if r := call("valid-ows"); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
	}
	refusal(t, call("valid-ows"), http.StatusTooManyRequests, "tenant")
	for _, key := range []string{" valid-ows", "valid-ows ", "\tvalid-ows", "valid-ows\t ", "  valid-ows"} {
		refusal(t, call(key), http.StatusTooManyRequests, "tenant")
	}
}

// A raw '#' in the request target is part of the query to Go, a fragment
// to Python's urlsplit and Node's URL: with a query identity,
// `?token=k#1` would be a fresh identity per suffix that the backend reads
// as k, and `?x=1#&token=junk` one it never sees. Such requests are
// refused, whether the identity reads one parameter or the whole query.
func TestQueryIdentityWithAFragmentIsRefused(t *testing.T) {
	t.Run("parameter", func(t *testing.T) { refusesRawHash(t, "query-hash", "{http.request.uri.query.token}") })
	t.Run("whole query", func(t *testing.T) { refusesRawHash(t, "whole-query-hash", "{http.request.uri.query}") })
	t.Run("prefixed query", func(t *testing.T) { refusesRawHash(t, "prefixed-query-hash", "{http.request.uri.prefixed_query}") })
}

// refusesRawHash checks that a zone whose identity is ph refuses requests
// with a raw '#' in their target, and forwards none.
func refusesRawHash(t *testing.T, zone, ph string) {
	e := start(t, "zone "+zone+"\nidentity "+ph+"\npreauth 100/s burst 100")
	for _, target := range []string{"/mcp?token=valid-hash#1", "/mcp?x=1#&token=junk", "/mcp#?token=junk"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		body := harness.ToolCall(1, "echo", map[string]any{"text": "hi"})
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			target, conn.RemoteAddr(), len(body), body)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "Do not send '#'") {
			t.Fatalf("%s: %d %s, want 400 about the '#'", target, resp.StatusCode, b)
		}
	}
	if n := e.backend.Requests(); n != 0 {
		t.Fatalf("%d requests reached the backend", n)
	}
}

// A rejection that reverse_proxy's handle_response turns into a 2xx (a
// JSON-RPC error at 200, which the SDKs read) proves nothing: the
// backend's status decides, and a caller rotating rejected credentials
// stays on its address's pre-auth budget. An accepted one is proven.
func TestRejectionRewrittenTo2xxProvesNothing(t *testing.T) {
	e := startSite(t, "mcp_ratelimit {\n\tzone rewritten\n\tpreauth 1/m burst 3\n\ttenant 100/s burst 100\n}\n"+
		"reverse_proxy $BACKEND {\n\t@denied status 401 403\n\thandle_response @denied {\n"+
		"\t\trespond `{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32001,\"message\":\"unauthorized\"}}` 200\n\t}\n}")
	e.prove("valid-rewritten")
	if r := e.call(1, "Authorization", "Bearer valid-rewritten"); r.Status != http.StatusOK || !strings.Contains(r.Header.Get("RateLimit-Policy"), "tenant") {
		t.Fatalf("accepted credential after proving: %d %v, want a tenant bucket", r.Status, r.Header)
	}
	junk := []string{"Authorization", "Bearer junk-rewritten"}
	for i := range 2 {
		if r := e.call(i, junk...); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "unauthorized") {
			t.Fatalf("call %d with a rejected credential: %d %s, want the rewritten 200", i, r.Status, r.Body)
		}
	}
	refusal(t, e.call(2, junk...), http.StatusTooManyRequests, "preauth")
}

// The intercept handler turns a rejection into a 2xx as handle_response
// does, for a handler that is no reverse_proxy too (here respond, as an
// application served in Caddy answers): the status it intercepted is the
// verdict, and the rewritten 200 proves nothing.
func TestRejectionInterceptedTo2xxProvesNothing(t *testing.T) {
	e := startSite(t, "route {\n\tmcp_ratelimit {\n\t\tzone intercepted\n\t\tpreauth 1/m burst 3\n\t\ttenant 100/s burst 100\n\t}\n"+
		"\tintercept {\n\t\t@denied status 401 403\n\t\thandle_response @denied {\n\t\t\trespond \"unauthorized\" 200\n\t\t}\n\t}\n"+
		"\trespond \"answered\" {http.request.header.X-Status}\n}")
	if r := e.call(1, "Authorization", "Bearer valid-intercepted", "X-Status", "200"); r.Status != http.StatusOK {
		t.Fatalf("an accepted credential: %d %s", r.Status, r.Body)
	}
	if r := e.call(2, "Authorization", "Bearer valid-intercepted", "X-Status", "200"); !strings.Contains(r.Header.Get("RateLimit-Policy"), "tenant") {
		t.Fatalf("accepted credential after its 200: %d %v, want a tenant bucket", r.Status, r.Header)
	}
	junk := []string{"Authorization", "Bearer junk-intercepted", "X-Status", "401"}
	for i := range 2 {
		if r := e.call(i, junk...); r.Status != http.StatusOK || string(r.Body) != "unauthorized" {
			t.Fatalf("call %d with a rejected credential: %d %s, want the intercepted 200", i, r.Status, r.Body)
		}
	}
	refusal(t, e.call(2, junk...), http.StatusTooManyRequests, "preauth")
}

// A valid key whose bodies are never written as the specification writes
// one (here "jsonrpc" twice, which every parser reads, and the backend
// runs the call) is never proven, but what the backend answered counts:
// from its first 2xx it is charged as a forgotten identity is, to its
// tenant bucket and quotas besides its address's pre-auth budget, so
// staying unproven escapes neither.
func TestAnsweredCallsOfAKeyNeverProvenCountAgainstItsLimits(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	twice := func(id int) string {
		return `{"jsonrpc":"2.0","jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	}
	for _, c := range []struct{ block, layer string }{
		// The first call has no bucket yet; the next three drain one.
		{"zone unproven_tenant\npreauth 100/s burst 100\ntenant 1/m burst 3\nquota off", "tenant"},
		{"zone unproven_quota\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 4/day", "quota"},
		{"zone unproven_redis\npreauth 100/s burst 100\ntenant 1/m burst 3\nquota off\nstore redis " + rd.URL, "tenant"},
		{"zone unproven_redis_quota\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 4/day\nstore redis " + rd.URL, "quota"},
	} {
		e := start(t, c.block)
		zone := strings.TrimPrefix(strings.Split(c.block, "\n")[0], "zone ")
		auth := []string{"Authorization", "Bearer valid-twice"}
		for i := range 4 {
			if r := e.post(twice(i), auth...); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "hi") {
				t.Fatalf("%s: call %d: %d %s", zone, i, r.Status, r.Body)
			}
		}
		refusal(t, e.post(twice(4), auth...), http.StatusTooManyRequests, c.layer)
		if n := e.knownIn(zone); n != 0 {
			t.Fatalf("%s: %d identities proven by bodies not written as the specification writes them", zone, n)
		}
	}
}

// An unproven identity's call is charged by the backend's answer (a 2xx
// proves the identity and counts the call): a client that hangs up before
// it does not end the call, which the backend runs to its end all the
// same, so the limiter waits for that answer, or a valid key could hang up
// on every call to run them all on its address's pre-auth budget, proven
// never and counted never.
func TestAHungUpCallOfAnUnprovenKeyIsStillProvenAndCounted(t *testing.T) {
	skipNearReset(t, nextDay)
	e := start(t, "zone hungup\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 1/day")
	e.awaitCallsAtEnd("hungup")
	hangUp(t, e.mcp, "Bearer valid-hungup", harness.ToolCall(1, "slow", map[string]any{"millis": 1500}))
	harness.Eventually(t, 10*time.Second, "the hung-up call's answer to prove the key", func() bool { return e.knownIn("hungup") == 1 })
	refusal(t, e.call(2, "Authorization", "Bearer valid-hungup"), http.StatusTooManyRequests, "quota")
}

// Once the verdict on an unproven identity is heard, a request whose
// client has left is no longer held for it: a stream the backend keeps
// open after its status ends at once, not when the hold runs out.
func TestAHungUpCallIsLetGoOnceItsVerdictIsHeard(t *testing.T) {
	ended := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(time.Second) // the client has left by then
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // the stream stays open until the proxy ends it
		close(ended)
	}))
	t.Cleanup(up.Close)
	e := startSite(t, "mcp_ratelimit {\nzone heard\npreauth 100/s burst 100\n}\nreverse_proxy "+up.Listener.Addr().String()+" {\nflush_interval -1\n}")
	hangUp(t, e.mcp, "Bearer valid-heard", harness.ToolCall(1, "echo", nil))
	harness.Eventually(t, 10*time.Second, "the hung-up call's answer to prove the key", func() bool { return e.knownIn("heard") == 1 })
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the request was held past its verdict after its client left")
	}
}

// hangUp posts body with auth as an SSE-accepting client that hangs up
// 300ms later, failing the test if an answer came before.
func hangUp(t *testing.T, url, auth, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered before the client hung up: %d", resp.StatusCode)
	}
}

// A forgotten identity that holds no quota count yet is still held to its
// quota before its calls run: a batch costing more than the whole quota
// is refused, not counted once the backend has run it.
func TestForgottenIdentityWithoutACountMeetsItsQuotaFirst(t *testing.T) {
	e := start(t, "zone forgotfirst\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 2/day")
	auth := []string{"Authorization", "Bearer valid-forgotfirst"}
	e.prove("valid-forgotfirst")
	e.forget(auth...)
	before := e.backend.ToolCalls()
	calls := make([]string, 3)
	for i := range calls {
		calls[i] = harness.ToolCall(i+1, "echo", map[string]any{"text": "x"})
	}
	r := e.post("["+strings.Join(calls, ",")+"]", auth...)
	if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), "QUOTA_EXHAUSTED") {
		t.Fatalf("a batch of 3 under quota 2/day from a forgotten identity: %d %s, want the quota's 429", r.Status, r.Body)
	}
	unchanged(t, e, before, "a batch over a forgotten identity's whole quota")
}

// An empty group value skips the group layer, its quota included: callers
// without one share no group quota between them.
func TestEmptyGroupValueSkipsTheGroupQuota(t *testing.T) {
	e := start(t, "zone nogroupq\ngroup {http.request.header.X-Org} 100/s burst 100\ngroup_quota 2/day\ntenant 100/s burst 100\nquota off")
	for _, tok := range []string{"valid-nogroup-a", "valid-nogroup-b"} {
		e.prove(tok)
		e.spend(tok, 3)
	}
}
