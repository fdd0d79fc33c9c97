package mcplimit_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// rateLimitField matches one item of the RateLimit header.
var rateLimitField = regexp.MustCompile(`"([a-z-]+)";r=(\d+);t=(\d+)`)

// rateLimit parses the RateLimit header into remaining and reset seconds
// per policy name.
func rateLimit(t *testing.T, r *harness.Response) map[string][2]int64 {
	t.Helper()
	v := r.Header.Get("RateLimit")
	out := map[string][2]int64{}
	for _, m := range rateLimitField.FindAllStringSubmatch(v, -1) {
		left, _ := strconv.ParseInt(m[2], 10, 64)
		reset, _ := strconv.ParseInt(m[3], 10, 64)
		out[m[1]] = [2]int64{left, reset}
	}
	if len(out) == 0 {
		t.Fatalf("no RateLimit fields in %q (status %d)", v, r.Status)
	}
	return out
}

// untilUTC returns the whole seconds from now to the start of the next
// UTC day and month.
func untilUTC(now time.Time) (day, month int64) {
	y, m, d := now.UTC().Date()
	next := func(t time.Time) int64 { return int64(t.Sub(now).Seconds()) + 1 }
	return next(time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)), next(time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC))
}

func TestRateLimitHeadersCountDownExactly(t *testing.T) {
	e := start(t, "tenant 1/m burst 5\nquota 100/day\nquota 1000/month")
	e.prove("valid-carol")
	for k := int64(1); k <= 3; k++ {
		now := time.Now()
		r := e.call(int(k), "Authorization", "Bearer valid-carol")
		if r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", k, r.Status, r.Body)
		}
		if got, want := r.Header.Get("RateLimit-Policy"), `"tenant";q=5;w=300, "quota-day";q=100;w=86400, "quota-month";q=1000;w=2678400`; got != want {
			t.Errorf("RateLimit-Policy = %q, want %q", got, want)
		}
		rl := rateLimit(t, r)
		day, month := untilUTC(now)
		checks := []struct {
			name        string
			left        int64
			resetLo, hi int64
		}{
			{"tenant", 5 - k, 60*k - 1, 60 * k},
			{"quota-day", 100 - k, day - 2, day},
			{"quota-month", 1000 - k, month - 2, month},
		}
		for _, c := range checks {
			f, ok := rl[c.name]
			if !ok || f[0] != c.left || f[1] < c.resetLo || f[1] > c.hi {
				t.Errorf("call %d: %s = %v, want r=%d and t in [%d, %d] (header %q)", k, c.name, f, c.left, c.resetLo, c.hi, r.Header.Get("RateLimit"))
			}
		}
	}
}

// The quota-day figure is the identity's own count, whatever other
// quotas of that period the call is counted in: a tool's quota (counted
// per tool, and so lower) must not stand in for it.
func TestRateLimitHeadersShowTheIdentitysQuotaBesideAToolQuota(t *testing.T) {
	e := start(t, "tenant 100/s burst 100\nquota 10/day\ntool photo {\n quota 5/day\n}")
	e.prove("valid-photo-quota")
	auth := []string{"Authorization", "Bearer valid-photo-quota"}
	var left int64
	for id := 1; id <= 2; id++ {
		r := e.callTool(id, "echo", auth...)
		if r.Status != http.StatusOK {
			t.Fatalf("echo call %d: %d %s", id, r.Status, r.Body)
		}
		left = rateLimit(t, r)["quota-day"][0]
	}
	r := e.callTool(3, "photo", auth...)
	if r.Status != http.StatusOK {
		t.Fatalf("photo call: %d %s", r.Status, r.Body)
	}
	if got := rateLimit(t, r)["quota-day"][0]; got != left-1 {
		t.Fatalf("quota-day left after a photo call: %d, want %d (one less than after the echo calls; header %q)", got, left-1, r.Header.Get("RateLimit"))
	}
}

func TestRateLimitHeadersOfARefusalShowWhatWasGivenBack(t *testing.T) {
	// The tenant bucket is charged before the quota refuses; the refusal's
	// header must show the tokens rolled back, not the ones taken.
	e := start(t, "tenant 1/m burst 5\nquota 2/day")
	e.prove("valid-dave")
	for i := range 2 {
		if r := e.call(i+1, "Authorization", "Bearer valid-dave"); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	r := e.call(3, "Authorization", "Bearer valid-dave")
	refusal(t, r, http.StatusTooManyRequests, "quota")
	rl := rateLimit(t, r)
	if got := rl["tenant"][0]; got != 3 {
		t.Errorf("tenant r=%d after a quota refusal, want 3 (two taken, the third given back): %q", got, r.Header.Get("RateLimit"))
	}
	if got := rl["quota-day"][0]; got != 0 {
		t.Errorf("quota-day r=%d, want 0: %s", got, fmt.Sprint(rl))
	}
}

// A tenant refusal's RateLimit item names the instant Retry-After names
// (draft-ietf-httpapi-ratelimit-headers: a response with both SHOULD),
// the one the next call passes, not when the bucket is full again.
func TestRateLimitHeadersOfATenantRefusalResetWithRetryAfter(t *testing.T) {
	e := start(t, "tenant 1/m burst 2\nquota off")
	e.prove("valid-tenantreset")
	e.spend("valid-tenantreset", 2)
	r := e.call(3, "Authorization", "Bearer valid-tenantreset")
	refusal(t, r, http.StatusTooManyRequests, "tenant")
	ra := r.Header.Get("Retry-After")
	if f := rateLimit(t, r)["tenant"]; f[0] != 0 || strconv.FormatInt(f[1], 10) != ra || ra != "60" {
		t.Errorf("tenant refusal: RateLimit %q with Retry-After %s, want r=0 and t=Retry-After=60", r.Header.Get("RateLimit"), ra)
	}
}

// A batch larger than the tenant's burst needs no wait before the smaller
// one it is told to send passes, when the bucket holds that size: here
// the quota's remainder makes it smaller than the burst. Retry-After is
// the least, 1, and the tenant's t reads the same.
func TestRateLimitHeadersOfANeverPassingRefusalNeedingNoWait(t *testing.T) {
	e := start(t, "tenant 60/s burst 3\nquota 5/day")
	auth := []string{"Authorization", "Bearer valid-tenantfull"}
	e.prove("valid-tenantfull")
	if r := e.post(batch(1, 3), auth...); r.Status != http.StatusOK { // 2 of the quota left
		t.Fatalf("batch of 3: %d %s", r.Status, r.Body)
	}
	time.Sleep(100 * time.Millisecond) // the bucket full again
	r := e.post(batch(1, 4), auth...)
	if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), "TENANT_RATE_LIMITED") || !strings.Contains(string(r.Body), `"maxPerRequest":2`) {
		t.Fatalf("batch of 4 over a full burst of 3 with 2 left today: %d %s", r.Status, r.Body)
	}
	if f := rateLimit(t, r)["tenant"]; f[0] != 3 || f[1] != 1 || r.Header.Get("Retry-After") != "1" {
		t.Errorf("RateLimit %q with Retry-After %s, want tenant r=3 and t=Retry-After=1", r.Header.Get("RateLimit"), r.Header.Get("Retry-After"))
	}
}

// A body rule's refusal of a proven tenant's call (an arg bound or
// max_batch, known once the body is read) still says where its policies
// stand: nothing taken.
func TestRateLimitHeadersOfABodyRuleRefusalShowNothingTaken(t *testing.T) {
	e := start(t, "tenant 1/m burst 5\nquota 9/day\nmax_batch 2\ntool echo {\n arg limit max 5\n}")
	e.prove("valid-argrl")
	call := harness.ToolCall(1, "echo", nil)
	for name, body := range map[string]string{
		"arg bound": argCall(1, `{"limit":50}`),
		"max_batch": "[" + call + "," + call + "," + call + "]",
	} {
		r := e.post(body, "Authorization", "Bearer valid-argrl")
		if r.Status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s, want 400", name, r.Status, r.Body)
		}
		rl := rateLimit(t, r)
		if rl["tenant"][0] != 5 || rl["quota-day"][0] != 9 {
			t.Errorf("RateLimit of a refusal for its %s %q, want tenant r=5 and quota-day r=9", name, r.Header.Get("RateLimit"))
		}
	}
}

// An unproven caller is charged by the pre-auth bucket of its address,
// and its responses say how much of that bucket is left — a gateway's
// own limits included.
func TestRateLimitHeadersOfUnprovenCallersDescribePreauth(t *testing.T) {
	for _, tc := range []struct {
		name, block, policy string
		burst               int64
	}{
		{"default bucket", "preauth 1/m burst 3", `"preauth";q=3;w=180`, 3},
		{"gateway bucket", "preauth 1/m burst 3\ngateway 127.0.0.1/32 1/m burst 4", `"preauth";q=4;w=240`, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, tc.block)
			for k := int64(1); k <= tc.burst; k++ {
				// Rejected by the backend: the caller stays unproven.
				r := e.call(int(k), "Authorization", "Bearer rejected")
				if r.Status != http.StatusUnauthorized {
					t.Fatalf("call %d: %d %s", k, r.Status, r.Body)
				}
				if got := r.Header.Get("RateLimit-Policy"); got != tc.policy {
					t.Fatalf("call %d: RateLimit-Policy %q, want %q", k, got, tc.policy)
				}
				if left := rateLimit(t, r)["preauth"]; left[0] != tc.burst-k || left[1] < 60*k-1 || left[1] > 60*k {
					t.Fatalf("call %d: preauth r=%d t=%d, want r=%d t≈%d", k, left[0], left[1], tc.burst-k, 60*k)
				}
			}
			r := e.call(9)
			refusal(t, r, http.StatusTooManyRequests, "preauth")
			if got := r.Header.Get("RateLimit-Policy"); got != tc.policy {
				t.Fatalf("refusal: RateLimit-Policy %q, want %q", got, tc.policy)
			}
			if left := rateLimit(t, r)["preauth"]; left[0] != 0 || strconv.FormatInt(left[1], 10) != r.Header.Get("Retry-After") {
				t.Fatalf("refusal: preauth r=%d t=%d, want r=0 and t the Retry-After %s", left[0], left[1], r.Header.Get("Retry-After"))
			}
		})
	}
}

// Structured-field Integers have at most 15 digits: limits are bounded
// to that at configuration, and a longer window is reported as the
// largest Integer, so that the fields still parse.
func TestRateLimitHeadersStayStructuredFieldIntegers(t *testing.T) {
	e := start(t, "zone sfint\ntenant 1/h burst 999999999999999\nquota 999999999999999/day")
	e.prove("valid-sfint")
	r := e.call(1, "Authorization", "Bearer valid-sfint")
	if got, want := r.Header.Get("RateLimit-Policy"), `"tenant";q=999999999999999;w=999999999999999, "quota-day";q=999999999999999;w=86400`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if f := rateLimit(t, r)["tenant"]; f[0] != 999999999999998 || f[1] != 3600 {
		t.Errorf("RateLimit tenant = %v, want r=999999999999998;t=3600 (header %q)", f, r.Header.Get("RateLimit"))
	}
}

// A forgotten identity is charged to its tenant bucket and quota while
// unproven (see TestGettingForgottenBeforeEachCallGainsNothing): its
// responses describe them after the pre-auth bucket, so that a refusal by
// one of them is not told of a pre-auth bucket with tokens left alone.
func TestRateLimitHeadersOfAForgottenIdentityDescribeWhatChargesIt(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	skipNearReset(t, nextDay)
	t.Run("local", func(t *testing.T) { forgottenIdentityHeaders(t, "forgothdr", "") })
	t.Run("redis", func(t *testing.T) {
		forgottenIdentityHeaders(t, "forgothdr_redis", "\nstore redis "+harness.StartRedis(t).URL)
	})
}

// forgottenIdentityHeaders checks the RateLimit fields of a forgotten
// identity's calls in zone, whose store is set by store.
func forgottenIdentityHeaders(t *testing.T, zone, store string) {
	e := start(t, "zone "+zone+"\npreauth 100/s burst 100\ntenant 1/m burst 3\nquota 5/day"+store)
	token := "valid-" + zone
	auth := []string{"Authorization", "Bearer " + token}
	const policy = `"preauth";q=100;w=1, "tenant";q=3;w=180, "quota-day";q=5;w=86400`
	e.prove(token)
	e.spend(token, 2)
	e.forget(auth...)
	r := e.call(10, auth...)
	if r.Status != http.StatusOK {
		t.Fatalf("call after a forget: %d %s", r.Status, r.Body)
	}
	if got := r.Header.Get("RateLimit-Policy"); got != policy {
		t.Fatalf("RateLimit-Policy %q, want %q", got, policy)
	}
	if got := rateLimit(t, r); got["tenant"][0] != 0 || got["quota-day"][0] != 2 || got["preauth"][0] == 0 {
		t.Fatalf("RateLimit %q: want tenant r=0, quota-day r=2, and pre-auth tokens left", r.Header.Get("RateLimit"))
	}
	e.forget(auth...) // the 2xx proved it again
	r = e.call(11, auth...)
	refusal(t, r, http.StatusTooManyRequests, "tenant")
	if got := r.Header.Get("RateLimit-Policy"); got != policy {
		t.Fatalf("refusal: RateLimit-Policy %q, want %q", got, policy)
	}
	if got := rateLimit(t, r)["tenant"]; got[0] != 0 || strconv.FormatInt(got[1], 10) != r.Header.Get("Retry-After") {
		t.Fatalf("refusal: RateLimit %q, want tenant r=0 and t the Retry-After %s", r.Header.Get("RateLimit"), r.Header.Get("Retry-After"))
	}
	// A credential never proven is described by its pre-auth bucket alone.
	r = e.call(12, "Authorization", "Bearer rejected-"+zone)
	if got := r.Header.Get("RateLimit-Policy"); got != `"preauth";q=100;w=1` {
		t.Fatalf("never proven: RateLimit-Policy %q", got)
	}
}

// RateLimit-Policy's w is the seconds a bucket takes to refill from
// empty, rounded up: 5 tokens at 2/s take 2.5 s.
func TestRateLimitPolicyWindowRoundsUp(t *testing.T) {
	e := start(t, "tenant 2/s burst 5\nquota off")
	e.prove("valid-wround")
	r := e.call(1, "Authorization", "Bearer valid-wround")
	if got, want := r.Header.Get("RateLimit-Policy"), `"tenant";q=5;w=3`; r.Status != http.StatusOK || got != want {
		t.Fatalf("%d, RateLimit-Policy %q, want %q", r.Status, got, want)
	}
}

// The response whose 2xx proves a new key describes, after the pre-auth
// bucket that charged it, the tenant bucket and quotas its next calls
// spend, the quotas counting this call: an agent reading its first answer
// learns the limits it will meet, and the next call counts on from there.
// So does a 2xx that charges a key as a forgotten one without proving it
// (a body no parser reads as the specification writes one). A key the
// backend rejects, and one with store redis (whose counts this instance
// does not hold), are described by the pre-auth bucket alone.
func TestRateLimitHeadersOfAProvingResponseDescribeWhatComesNext(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	skipNearReset(t, nextDay)
	const (
		block  = "preauth 1/m burst 3\ntenant 1/m burst 4\nquota 5/day\nquota 50/month"
		policy = `"preauth";q=3;w=180, "tenant";q=4;w=240, "quota-day";q=5;w=86400, "quota-month";q=50;w=2678400`
	)
	for _, tc := range []struct {
		name, body string
	}{
		{"proving", ""},
		{"charging", `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, "zone provehdr_"+tc.name+"\n"+block)
			auth := []string{"Authorization", "Bearer valid-provehdr"}
			var r *harness.Response
			if tc.body == "" {
				r = e.call(1, auth...)
			} else {
				r = e.post(tc.body, auth...)
			}
			if r.Status != http.StatusOK {
				t.Fatalf("first call: %d %s", r.Status, r.Body)
			}
			if got := r.Header.Get("RateLimit-Policy"); got != policy {
				t.Fatalf("first call: RateLimit-Policy %q, want %q", got, policy)
			}
			day, month := untilUTC(time.Now())
			got := rateLimit(t, r)
			if got["preauth"][0] != 2 || got["tenant"] != [2]int64{4, 0} || got["quota-day"][0] != 4 || got["quota-month"][0] != 49 ||
				got["quota-day"][1] > day || got["quota-day"][1] < day-5 || got["quota-month"][1] > month || got["quota-month"][1] < month-5 {
				t.Fatalf("first call: RateLimit %q, want preauth r=2, tenant r=4;t=0, quota-day r=4, quota-month r=49 with their resets", r.Header.Get("RateLimit"))
			}
			r = e.call(2, auth...)
			if got := rateLimit(t, r); got["tenant"][0] != 3 || got["quota-day"][0] != 3 || got["quota-month"][0] != 48 {
				t.Fatalf("second call: RateLimit %q, want tenant r=3, quota-day r=3, quota-month r=48", r.Header.Get("RateLimit"))
			}
		})
	}
	t.Run("initialize", func(t *testing.T) {
		// Unmetered, but charged at pre-auth: its proving 2xx says what
		// the key's calls will spend, its quotas untouched.
		e := start(t, "zone provehdr_init\n"+block)
		r := e.post(harness.Initialize(1), "Authorization", "Bearer valid-provehdr")
		if got := r.Header.Get("RateLimit-Policy"); r.Status != http.StatusOK || got != policy {
			t.Fatalf("initialize: %d, RateLimit-Policy %q, want %q", r.Status, got, policy)
		}
		if got := rateLimit(t, r); got["tenant"] != [2]int64{4, 0} || got["quota-day"][0] != 5 || got["quota-month"][0] != 50 {
			t.Fatalf("initialize: RateLimit %q, want tenant r=4;t=0, quota-day r=5, quota-month r=50", r.Header.Get("RateLimit"))
		}
	})
	t.Run("tenant off", func(t *testing.T) {
		e := start(t, "zone provehdr_notenant\n"+strings.Replace(block, "tenant 1/m burst 4", "tenant off", 1))
		r := e.call(1, "Authorization", "Bearer valid-provehdr")
		if got, want := r.Header.Get("RateLimit-Policy"), strings.Replace(policy, `"tenant";q=4;w=240, `, "", 1); got != want {
			t.Fatalf("tenant off: RateLimit-Policy %q, want %q", got, want)
		}
	})
	t.Run("preauth off", func(t *testing.T) {
		e := start(t, "zone provehdr_nopreauth\n"+strings.Replace(block, "preauth 1/m burst 3", "preauth off", 1))
		if r := e.post(harness.Initialize(1), "Authorization", "Bearer valid-provehdr-init"); len(r.Header["Ratelimit-Policy"]) != 0 {
			t.Fatalf("preauth off: an unmetered initialize got RateLimit-Policy %q", r.Header.Get("RateLimit-Policy"))
		}
		r := e.call(1, "Authorization", "Bearer valid-provehdr")
		if got, want := r.Header.Get("RateLimit-Policy"), strings.TrimPrefix(policy, `"preauth";q=3;w=180, `); got != want {
			t.Fatalf("preauth off: RateLimit-Policy %q, want %q", got, want)
		}
		if got := rateLimit(t, r); got["tenant"] != [2]int64{4, 0} || got["quota-day"][0] != 4 {
			t.Fatalf("preauth off: RateLimit %q, want tenant r=4;t=0 and quota-day r=4", r.Header.Get("RateLimit"))
		}
	})
	t.Run("over the quota", func(t *testing.T) {
		// An unproven batch is charged at pre-auth, and counted in full
		// once its 2xx proves the key: past the quota, which reads 0 left
		// (a structured-field Integer here is never negative).
		e := start(t, "zone provehdr_over\npreauth 1/m burst 10\nquota 2/day")
		r := e.post(batch(1, 3), "Authorization", "Bearer valid-provehdr")
		if r.Status != http.StatusOK {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		if got := r.Header.Get("RateLimit"); !strings.Contains(got, `"quota-day";r=0;t=`) {
			t.Fatalf("batch: RateLimit %q, want quota-day r=0", got)
		}
	})
	t.Run("a RateLimit a later handler set", func(t *testing.T) {
		e := startSite(t, "route {\nmcp_ratelimit {\nzone provehdr_setrl\n"+block+"\n}\nheader RateLimit theirs\nreverse_proxy $BACKEND\n}")
		r := e.call(1, "Authorization", "Bearer valid-provehdr")
		if r.Status != http.StatusOK || r.Header.Get("RateLimit-Policy") != `"preauth";q=3;w=180` || r.Header.Get("RateLimit") != "theirs" {
			t.Fatalf("%d: RateLimit-Policy %q, RateLimit %q, want the pre-auth policy alone and the header handler's value", r.Status, r.Header.Get("RateLimit-Policy"), r.Header.Get("RateLimit"))
		}
	})
	t.Run("fields a later handler set", func(t *testing.T) {
		e := startSite(t, "route {\nmcp_ratelimit {\nzone provehdr_set\n"+block+"\n}\nheader RateLimit-Policy mine\nreverse_proxy $BACKEND\n}")
		r := e.call(1, "Authorization", "Bearer valid-provehdr")
		if r.Status != http.StatusOK || r.Header.Get("RateLimit-Policy") != "mine" || !strings.HasPrefix(r.Header.Get("RateLimit"), `"preauth";r=2;t=`) || strings.Contains(r.Header.Get("RateLimit"), ",") {
			t.Fatalf("%d: RateLimit-Policy %q, RateLimit %q, want the header handler's policy and the pre-auth value alone", r.Status, r.Header.Get("RateLimit-Policy"), r.Header.Get("RateLimit"))
		}
	})
	t.Run("rejected", func(t *testing.T) {
		e := start(t, "zone provehdr_rejected\n"+block)
		r := e.call(1, "Authorization", "Bearer rejected-provehdr")
		if got := r.Header.Get("RateLimit-Policy"); got != `"preauth";q=3;w=180` {
			t.Fatalf("rejected: RateLimit-Policy %q", got)
		}
	})
	t.Run("redis", func(t *testing.T) {
		e := start(t, "zone provehdr_redis\n"+block+"\nstore redis "+harness.StartRedis(t).URL)
		r := e.call(1, "Authorization", "Bearer valid-provehdr")
		if r.Status != http.StatusOK {
			t.Fatalf("first call: %d %s", r.Status, r.Body)
		}
		if got := r.Header.Get("RateLimit-Policy"); got != `"preauth";q=3;w=180` {
			t.Fatalf("redis: RateLimit-Policy %q", got)
		}
	})
}
