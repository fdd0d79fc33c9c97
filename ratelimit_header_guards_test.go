package mcplimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	mcplimit "github.com/mcpratelimit/caddy-mcp-ratelimit"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// With `store redis`, a raised tenant rate takes effect from the change:
// a tenant drained at 1/h and raised to 60/m earns a token a second from
// then on, so a call soon passes. Redis must be told when the limits
// changed; otherwise it credits the time after the change at the old
// 1/h rate too, and a tenant an operator raised to unblock it stays
// refused for up to an hour.
func TestRaisedRateOnRedisCreditsTheTimeSinceTheChangeAtTheNewRate(t *testing.T) {
	rd := harness.StartRedis(t)
	zone, auth := mcplimit.FreshZoneName("raise_since_redis"), "Bearer valid-raise-since"
	e := start(t, "zone "+zone+"\npreauth 100/s burst 100\ntenant 1/h burst 2\nquota off\nglobal off\nstore redis "+rd.URL)
	e.prove("valid-raise-since")
	e.spend("valid-raise-since", 2)
	refusal(t, e.call(2, "Authorization", auth), http.StatusTooManyRequests, "tenant")
	path := e.caddy.HandlerPath(t, "mcp_ratelimit")
	if st, b := e.caddy.AdminDo(t, http.MethodPatch, path+"/tenant", []byte(`{"rate":"60/m","burst":20}`)); st != http.StatusOK {
		t.Fatalf("PATCH tenant: %d %s", st, b)
	}
	settleAfterReload(t, e, auth)
	harness.Eventually(t, 10*time.Second, "a call admitted at the raised rate of one a second", func() bool {
		time.Sleep(200 * time.Millisecond)
		return e.call(3, "Authorization", auth).Status == http.StatusOK
	})
}

// With `store redis`, a body rule's refusal of a proven tenant's call (an
// arg bound, known once the body is read, before Redis is asked) says
// nothing of the tenant's bucket or quota that Redis did not report: this
// instance's own state of them stands still, a full bucket and an unused
// quota, while Redis holds them nearly drained. A client reading "5 left"
// and "9 left today" would fire a burst of calls that Redis then refuses.
func TestRateLimitHeadersOfABodyRuleRefusalOnRedisClaimNoLocalLevels(t *testing.T) {
	rd := harness.StartRedis(t)
	zone, auth := mcplimit.FreshZoneName("argrl_redis"), "Bearer valid-argrl-redis"
	e := start(t, "zone "+zone+"\npreauth 100/s burst 100\ntenant 1/m burst 5\nquota 9/day\nglobal off\ntool echo {\n arg limit max 5\n}\nstore redis "+rd.URL)
	e.prove("valid-argrl-redis")
	e.spend("valid-argrl-redis", 3)
	r := e.post(argCall(4, `{"limit":50}`), "Authorization", auth)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("over the arg bound: %d %s, want 400", r.Status, r.Body)
	}
	v := r.Header.Get("RateLimit")
	for _, m := range rateLimitField.FindAllStringSubmatch(v, -1) {
		left, _ := strconv.ParseInt(m[2], 10, 64)
		switch name := m[1]; {
		case name == "tenant" && left != 2, name == "quota-day" && left != 6:
			t.Errorf("RateLimit %q after 3 of the tenant's calls decided in Redis: %s r=%d, want it left out or what Redis holds (tenant 2, quota-day 6)", v, name, left)
		case !strings.Contains("tenant quota-day", name):
			t.Errorf("RateLimit %q names %q, a policy the refused call does not read", v, name)
		}
	}
}

// A forgotten identity is charged to its quotas even before it has a
// count in the period: a batch bigger than its whole day's quota, sent
// after it was proven (by initialize only, nothing counted) and then
// forgotten, is refused by that quota, and the refusal's headers describe
// the quota that refused it, at its full 5 left, not the pre-auth bucket
// alone, which has tokens to spare and would leave the client no clue
// what to shrink.
func TestRateLimitHeadersOfAForgottenIdentityWithNoCountShowItsQuota(t *testing.T) {
	e := start(t, "zone "+mcplimit.FreshZoneName("forgot_nocount")+"\npreauth 100/s burst 100\ntenant 10/s burst 10\nquota 5/day")
	const token = "valid-forgot-nocount"
	auth := []string{"Authorization", "Bearer " + token}
	e.prove(token)
	e.forget(auth...)
	r := e.post(batch(1, 6), auth...)
	if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), "QUOTA_EXHAUSTED") {
		t.Fatalf("batch of 6 over a quota of 5: %d %s, want the quota's 429", r.Status, r.Body)
	}
	if got := r.Header.Get("RateLimit-Policy"); !strings.Contains(got, `"quota-day";q=5;w=86400`) {
		t.Errorf("RateLimit-Policy %q of a quota refusal, want it to name \"quota-day\";q=5", got)
	}
	if got, ok := rateLimit(t, r)["quota-day"]; !ok || got[0] != 5 {
		t.Errorf("RateLimit %q of a quota refusal with nothing counted, want quota-day r=5", r.Header.Get("RateLimit"))
	}
}

// A refusal that never reached the tenant bucket (here an arg bound's
// 400) reports the bucket's level within the limit that applies now: a
// tenant that last called on a tier with a burst of 20 and now calls on
// one with a burst of 5 is told at most 5 left, beside a policy of 5, not
// the 19 its bucket held under the old tier, which no client can spend
// and which contradicts RateLimit-Policy.
func TestRateLimitHeadersOfABodyRuleRefusalKeepTheTenantLevelWithinTheCurrentBurst(t *testing.T) {
	e := start(t, "zone "+mcplimit.FreshZoneName("tierclamp")+"\npreauth 100/s burst 100\nquota off\n"+
		"tier big {\nmatch {http.request.header.X-Plan} big\ntenant 1/m burst 20\n}\n"+
		"tier small {\nmatch {http.request.header.X-Plan} small\ntenant 1/m burst 5\n}\n"+
		"tool echo {\n arg limit max 5\n}")
	const token = "valid-tierclamp"
	e.prove(token, "X-Plan", "big")
	if r := e.call(1, "Authorization", "Bearer "+token, "X-Plan", "big"); r.Status != http.StatusOK {
		t.Fatalf("call as big: %d %s", r.Status, r.Body)
	}
	r := e.post(argCall(2, `{"limit":50}`), "Authorization", "Bearer "+token, "X-Plan", "small")
	if r.Status != http.StatusBadRequest {
		t.Fatalf("over the arg bound as small: %d %s, want 400", r.Status, r.Body)
	}
	if got := r.Header.Get("RateLimit-Policy"); !strings.Contains(got, `"tenant";q=5;`) {
		t.Fatalf("RateLimit-Policy %q, want the small tier's tenant burst of 5", got)
	}
	if got, ok := rateLimit(t, r)["tenant"]; !ok || got[0] > 5 {
		t.Errorf("RateLimit %q beside a tenant burst of 5, want tenant r at most 5", r.Header.Get("RateLimit"))
	}
}
