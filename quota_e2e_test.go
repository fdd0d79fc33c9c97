package mcplimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// nextDay and nextMonth are the quota reset instants after t.
func nextDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

func nextMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// skipNearReset skips a test that would straddle a UTC day (or month)
// boundary, where the expected reset instant is ambiguous.
func skipNearReset(t *testing.T, reset func(time.Time) time.Time) {
	t.Helper()
	now := time.Now()
	if reset(now).Sub(now) < time.Minute {
		t.Skip("too close to the quota reset instant")
	}
}

// checkQuotaRefusal checks every field of a quota refusal whose reset is
// reset(now): 429, data.limit/code, Retry-After within ±2s of the seconds
// to the reset, data.resetsAt, and the "do not retry" message.
func checkQuotaRefusal(t *testing.T, r *harness.Response, id int, period string, limit int64, reset func(time.Time) time.Time) {
	t.Helper()
	now := time.Now()
	got := refusal(t, r, http.StatusTooManyRequests, "quota")
	if got.ID != float64(id) {
		t.Fatalf("refusal does not echo id %d: %s", id, r.Body)
	}
	if got.Error.Code != -31004 || got.Error.Data.Code != "QUOTA_EXHAUSTED" {
		t.Fatalf("code %d / %s, want -31004 / QUOTA_EXHAUSTED", got.Error.Code, got.Error.Data.Code)
	}
	at := reset(now)
	want := int(at.Sub(now).Seconds())
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < want-2 || ra > want+2 {
		t.Fatalf("Retry-After %q, want %d±2 (seconds to %s)", r.Header.Get("Retry-After"), want, at.Format(time.RFC3339))
	}
	if got.Error.Data.RetryAfterSeconds != ra {
		t.Fatalf("data.retryAfterSeconds %d != Retry-After %d", got.Error.Data.RetryAfterSeconds, ra)
	}
	if got.Error.Data.ResetsAt != at.Format(time.RFC3339) {
		t.Fatalf("data.resetsAt %q, want %q", got.Error.Data.ResetsAt, at.Format(time.RFC3339))
	}
	if _, err := time.Parse(time.RFC3339, got.Error.Data.ResetsAt); err != nil {
		t.Fatalf("data.resetsAt is not RFC 3339: %v", err)
	}
	if got.Error.Data.MaxPerRequest != 0 {
		t.Fatalf("data.maxPerRequest %d on a used-up quota, which passes no request", got.Error.Data.MaxPerRequest)
	}
	msg := got.Error.Message
	for _, s := range []string{"Do not retry", at.Format(time.RFC3339), period, strconv.FormatInt(limit, 10)} {
		if !strings.Contains(msg, s) {
			t.Fatalf("message %q does not contain %q", msg, s)
		}
	}
}

func TestQuotaRefusalHasEveryField(t *testing.T) {
	skipNearReset(t, nextDay)
	e := start(t, "tenant 100/s burst 100\nquota 2/day")
	e.prove("valid-quota-a")
	e.spend("valid-quota-a", 2)
	before := e.backend.ToolCalls()
	r := e.call(42, "Authorization", "Bearer valid-quota-a")
	checkQuotaRefusal(t, r, 42, "daily", 2, nextDay)
	if pol := r.Header.Get("RateLimit-Policy"); !strings.Contains(pol, `"quota-day";q=2;w=86400`) {
		t.Fatalf("RateLimit-Policy %q lacks the daily quota policy", pol)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a quota-refused call reached the backend")
	}
	// Refused again, still not counted.
	checkQuotaRefusal(t, e.call(43, "Authorization", "Bearer valid-quota-a"), 43, "daily", 2, nextDay)
	// Another identity has its own quota.
	e.prove("valid-quota-b")
	if r := e.call(1, "Authorization", "Bearer valid-quota-b"); r.Status != http.StatusOK {
		t.Fatalf("another identity: %d %s", r.Status, r.Body)
	}
}

// A request that costs more than a quota has left is refused until the
// reset, but the quota is not called exhausted: the refusal says what is
// left, as data.maxPerRequest, and a request of that size passes now.
func TestQuotaRefusalOfARequestLargerThanWhatIsLeft(t *testing.T) {
	skipNearReset(t, nextDay)
	e := start(t, "tenant 100/s burst 100\nquota 3/day\ncost analyze_photo 2\ncost huge 4")
	h := []string{"Authorization", "Bearer valid-quota-left"}
	e.prove("valid-quota-left")
	// More than the whole quota: never as sent; what is left passes now.
	r := e.callTool(6, "huge", h...)
	got := refusal(t, r, http.StatusTooManyRequests, "quota")
	if got.Error.Data.MaxPerRequest != 3 || r.Header.Get("Retry-After") != "1" ||
		!strings.Contains(got.Error.Message, "costs 4, more than this API key's whole daily quota (3); it will never be admitted as sent") {
		t.Fatalf("refusal of a request larger than the whole quota: Retry-After %s, %s", r.Header.Get("Retry-After"), r.Body)
	}
	e.passes(2, "echo", h...)
	before := e.backend.ToolCalls()
	r = e.callTool(7, "analyze_photo", h...)
	got = refusal(t, r, http.StatusTooManyRequests, "quota")
	at := nextDay(time.Now())
	msg := got.Error.Message
	if got.Error.Data.Code != "QUOTA_EXHAUSTED" || got.Error.Data.MaxPerRequest != 1 || got.Error.Data.ResetsAt != at.Format(time.RFC3339) {
		t.Fatalf("refusal of a request larger than what is left: %s", r.Body)
	}
	for _, s := range []string{"costs 2", "1 left", "daily quota (3)", "costing at most 1", at.Format(time.RFC3339)} {
		if !strings.Contains(msg, s) {
			t.Fatalf("message %q does not contain %q", msg, s)
		}
	}
	if strings.Contains(msg, "used its") || strings.Contains(msg, "report the exhausted quota") {
		t.Fatalf("a quota with 1 left is called exhausted: %q", msg)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("the refused call reached the backend")
	}
	// What is left passes; then the quota is exhausted, and says so, to a
	// request larger than the whole quota too: no smaller one passes now.
	e.passes(1, "echo", h...)
	checkQuotaRefusal(t, e.callTool(8, "echo", h...), 8, "daily", 3, nextDay)
	checkQuotaRefusal(t, e.callTool(9, "huge", h...), 9, "daily", 3, nextDay)

	// A tool's quota counts calls: a batch of 2 with 1 left.
	h = []string{"Authorization", "Bearer valid-tool-left"}
	e2 := start(t, "tenant 100/s burst 100\nquota off\ntool echo {\n quota 3/day\n}\nzone tool-left")
	e2.prove("valid-tool-left")
	e2.passes(2, "echo", h...)
	batch := "[" + harness.ToolCall(1, "echo", nil) + "," + harness.ToolCall(2, "echo", nil) + "]"
	r = e2.post(batch, h...)
	var entries []rpcError
	r.JSON(t, &entries)
	if r.Status != http.StatusTooManyRequests || len(entries) != 2 {
		t.Fatalf("batch over a tool's quota: %d %s", r.Status, r.Body)
	}
	for _, en := range entries {
		d := en.Error.Data
		if d.Limit != "tool_quota" || d.MaxPerRequest != 1 || !strings.Contains(en.Error.Message, "makes 2 calls to tool \"echo\", more than the 1 left") {
			t.Fatalf("batch entry refusal: %s", r.Body)
		}
	}
	// Used up, the tool's quota is exhausted to a batch larger than it.
	e2.passes(1, "echo", h...)
	calls := make([]string, 4)
	for i := range calls {
		calls[i] = harness.ToolCall(i+1, "echo", nil)
	}
	r = e2.post("["+strings.Join(calls, ",")+"]", h...)
	entries = nil
	r.JSON(t, &entries)
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 60 || len(entries) != 4 || entries[0].Error.Data.MaxPerRequest != 0 ||
		!strings.Contains(entries[0].Error.Message, "Quota exhausted") {
		t.Fatalf("batch of 4 with a tool's quota of 3 used up: Retry-After %s, %s", r.Header.Get("Retry-After"), r.Body)
	}
}

func TestRefusedCallsDoNotConsumeQuota(t *testing.T) {
	skipNearReset(t, nextDay)
	t.Run("tenant refusals", func(t *testing.T) {
		// Tenant refills one token a second, slow enough that five calls
		// in a row on a busy machine meet an empty bucket; quota 3/day.
		// Each call is followed by tenant refusals, which must not count.
		e := start(t, "tenant 1/s burst 1\nglobal off\nquota 3/day")
		e.prove("valid-quota-t")
		for round := range 3 {
			harness.Eventually(t, 3*time.Second, "the tenant bucket to refill", func() bool {
				r := e.call(round, "Authorization", "Bearer valid-quota-t")
				if r.Status == http.StatusOK {
					return true
				}
				refusal(t, r, http.StatusTooManyRequests, "tenant")
				return false
			})
			// Once the third call has used the quota up, the refusal names
			// the quota: it holds the call back longer than the tenant.
			layer := "tenant"
			if round == 2 {
				layer = "quota"
			}
			for i := range 5 {
				refusal(t, e.call(100+i, "Authorization", "Bearer valid-quota-t"), http.StatusTooManyRequests, layer)
			}
		}
		time.Sleep(1100 * time.Millisecond)
		checkQuotaRefusal(t, e.call(9, "Authorization", "Bearer valid-quota-t"), 9, "daily", 3, nextDay)
	})
	t.Run("global refusals after the quota was charged", func(t *testing.T) {
		// Global is checked after the quota: its refusals must give the
		// quota back.
		e := start(t, "tenant 100/s burst 100\nglobal 5/s burst 1\nquota 3/day")
		e.prove("valid-quota-g")
		for round := range 3 {
			harness.Eventually(t, 2*time.Second, "the global bucket to refill", func() bool {
				r := e.call(round, "Authorization", "Bearer valid-quota-g")
				if r.Status == http.StatusOK {
					return true
				}
				refusal(t, r, http.StatusTooManyRequests, "global")
				return false
			})
			if round == 2 {
				break // quota is checked before global: exhausted now
			}
			for i := range 5 {
				refusal(t, e.call(100+i, "Authorization", "Bearer valid-quota-g"), http.StatusTooManyRequests, "global")
			}
		}
		checkQuotaRefusal(t, e.call(9, "Authorization", "Bearer valid-quota-g"), 9, "daily", 3, nextDay)
		time.Sleep(300 * time.Millisecond)
		checkQuotaRefusal(t, e.call(10, "Authorization", "Bearer valid-quota-g"), 10, "daily", 3, nextDay)
	})
}

func TestDayAndMonthQuotaTogetherDayRefuses(t *testing.T) {
	skipNearReset(t, nextDay)
	e := start(t, "tenant 100/s burst 100\nquota 2/day\nquota 3/month")
	e.prove("valid-quota-dm")
	e.spend("valid-quota-dm", 2)
	r := e.call(5, "Authorization", "Bearer valid-quota-dm")
	checkQuotaRefusal(t, r, 5, "daily", 2, nextDay)
	pol := r.Header.Get("RateLimit-Policy")
	if !strings.Contains(pol, `"quota-day"`) || !strings.Contains(pol, `"quota-month"`) {
		t.Fatalf("RateLimit-Policy %q should list both quota policies", pol)
	}
}

func TestMonthlyQuotaRetryAfterPointsToNextMonth(t *testing.T) {
	skipNearReset(t, nextMonth)
	e := start(t, "tenant 100/s burst 100\nquota 2/month")
	e.prove("valid-quota-m")
	e.spend("valid-quota-m", 2)
	checkQuotaRefusal(t, e.call(3, "Authorization", "Bearer valid-quota-m"), 3, "monthly", 2, nextMonth)
}

func TestQuotaOffNeverRefuses(t *testing.T) {
	e := start(t, "tenant 1000/s burst 1000\nquota off")
	e.prove("valid-quota-off")
	for i := range 50 {
		r := e.call(i, "Authorization", "Bearer valid-quota-off")
		if r.Status != http.StatusOK {
			t.Fatalf("call %d with quota off: %d %s", i, r.Status, r.Body)
		}
		if strings.Contains(r.Header.Get("RateLimit-Policy"), "quota") {
			t.Fatalf("RateLimit-Policy %q announces a quota while quota is off", r.Header.Get("RateLimit-Policy"))
		}
	}
	var z struct {
		Limits struct {
			Quota any `json:"quota"`
		} `json:"limits"`
		Tracked map[string]int `json:"tracked"`
	}
	e.caddy.AdminJSON(t, "/mcp_ratelimit/default", &z)
	if z.Limits.Quota != "off" {
		t.Fatalf("admin limits.quota = %v, want off", z.Limits.Quota)
	}
	if z.Tracked["quota_entries"] != 0 {
		t.Fatalf("quota off still tracks %d quota entries", z.Tracked["quota_entries"])
	}
}

// quotaBatch posts a batch of n echo calls and returns the first entry's
// refusal and the response.
func (e *env) quotaBatch(n int, hdr ...string) (rpcError, *harness.Response) {
	e.t.Helper()
	calls := make([]string, n)
	for i := range calls {
		calls[i] = harness.ToolCall(i+1, "echo", nil)
	}
	r := e.post("["+strings.Join(calls, ",")+"]", hdr...)
	var entries []rpcError
	r.JSON(e.t, &entries)
	if r.Status != http.StatusTooManyRequests || len(entries) != n || entries[0].Error == nil {
		e.t.Fatalf("batch of %d: %d %s", n, r.Status, r.Body)
	}
	return entries[0], r
}

// A refusal tells what fits over every quota of the request, not only the
// one that refused: a batch larger than the whole daily quota never
// passes, whatever the month has left, and what passes now is the least
// any quota has left.
func TestQuotaRefusalWeighsEveryQuota(t *testing.T) {
	skipNearReset(t, nextDay)
	e := start(t, "zone weighs\ntenant 100/s burst 100\nquota 5/day\nquota 8/month")
	h := []string{"Authorization", "Bearer valid-weighs"}
	e.prove("valid-weighs")
	e.passes(1, "echo", h...) // 4 left today, 7 this month
	for _, n := range []int{8, 7} {
		got, r := e.quotaBatch(n, h...)
		d := got.Error.Data
		if d.Limit != "quota" || d.MaxPerRequest != 4 || r.Header.Get("Retry-After") != "1" ||
			!strings.Contains(got.Error.Message, "whole daily quota (5); it will never be admitted as sent") {
			t.Fatalf("batch of %d with 4 left today of 5, 7 of 8 this month: Retry-After %s, %s", n, r.Header.Get("Retry-After"), r.Body)
		}
	}
	got, r := e.quotaBatch(5, h...)
	if got.Error.Data.MaxPerRequest != 4 || !strings.Contains(got.Error.Message, "more than the 4 left of this API key's daily quota (5)") ||
		!strings.Contains(got.Error.Message, "costing at most 4 fit the quotas now") {
		t.Fatalf("batch of 5 with 4 left today: %s", r.Body)
	}

	// An exhausted organization quota lets nothing pass: it is the one
	// named, not the identity's quota the batch exceeds as a whole.
	g := startSite(t, groupSite("zone weighsorg\ntenant off\nquota 5/day\ngroup {http.vars.org} 100/s burst 100\ngroup_quota 6/day"))
	g.passes(5, "echo", g.member("valid-weighs-p1", "acme")...)
	g.passes(1, "echo", g.member("valid-weighs-p2", "acme")...)
	p3 := g.member("valid-weighs-p3", "acme")
	got, r = g.quotaBatch(6, p3...)
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 60 || got.Error.Data.Limit != "group_quota" ||
		got.Error.Data.MaxPerRequest != 0 || !strings.Contains(got.Error.Message, "Quota exhausted") ||
		!strings.Contains(got.Error.Message, "nor with another key of the organization") {
		t.Fatalf("batch of 6 over a quota of 5 while the organization's is exhausted: Retry-After %s, %s", r.Header.Get("Retry-After"), r.Body)
	}

	// A tool's calls are bounded by the cost quota too: with 1 cost unit
	// left, 1 call of the tool passes now, not the tool quota's 5.
	c := start(t, "zone weighstool\ntenant off\nquota 10/day\ntool analyze_photo {\n quota 5/day\n}")
	hc := []string{"Authorization", "Bearer valid-weighs-tool"}
	c.prove("valid-weighs-tool")
	c.passes(9, "echo", hc...)
	calls := make([]string, 6)
	for i := range calls {
		calls[i] = harness.ToolCall(i+1, "analyze_photo", nil)
	}
	r = c.post("["+strings.Join(calls, ",")+"]", hc...)
	var entries []rpcError
	r.JSON(t, &entries)
	if len(entries) != 6 || entries[0].Error == nil || entries[0].Error.Data.MaxPerRequest != 1 {
		t.Fatalf("6 calls of a tool allowed 5 a day, 1 cost unit left: %s", r.Body)
	}
	// And a used-up identity quota is named before a tool quota the
	// request exceeds as a whole.
	c.passes(1, "echo", hc...)
	r = c.post("["+strings.Join(calls, ",")+"]", hc...)
	r.JSON(t, &entries)
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 60 || entries[0].Error.Data.Limit != "quota" {
		t.Fatalf("6 calls of the tool with the identity's quota used up: Retry-After %s, %s", r.Header.Get("Retry-After"), r.Body)
	}
}

// A used-up tool quota's refusal says other tools still work only when
// they do: with the key's (or its organization's) quota used up too, it
// names that quota and its reset, and a batch's other calls are told the
// same, not to be sent again without the tool's calls.
func TestUsedUpToolQuotaNamesAUsedUpAccountQuota(t *testing.T) {
	skipNearReset(t, nextMonth)
	photo := harness.ToolCall(5, "analyze_photo", nil)
	batch := "[" + photo + "," + harness.ToolCall(6, "echo", nil) + "]"
	for _, c := range []struct {
		name, block, owner string
	}{
		{"identity", "zone toolout\ntenant 100/s burst 100\nquota 2/day", "this API key's daily quota (2)"},
		{"organization", "zone toolorg\ntenant 100/s burst 100\nquota off\ngroup {http.vars.org} 100/s burst 100\ngroup_quota 2/day", "this caller's organization's daily quota (2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := startSite(t, groupSite(c.block+"\ntool analyze_photo {\n quota 1/month\n}"))
			h := e.member("valid-"+c.name+"-out", "acme")
			e.passes(1, "analyze_photo", h...)
			e.passes(1, "echo", h...) // the day's quota used up, the tool's month's too
			want := c.owner + " is used up too, so no other tool works with this key before " + nextDay(time.Now()).Format(time.RFC3339)
			got := refusal(t, e.post(photo, h...), http.StatusTooManyRequests, "tool_quota")
			if m := got.Error.Message; !strings.Contains(m, want) || strings.Contains(m, "other tools still work") || got.Error.Data.ResetsAt != nextMonth(time.Now()).Format(time.RFC3339) {
				t.Fatalf("the tool's call: %q, resetsAt %s; want it to say %q", m, got.Error.Data.ResetsAt, want)
			}
			r := e.post(batch, h...)
			var entries []rpcError
			r.JSON(t, &entries)
			if r.Status != http.StatusTooManyRequests || len(entries) != 2 {
				t.Fatalf("the batch: %d %s", r.Status, r.Body)
			}
			for _, en := range entries {
				if m := en.Error.Message; !strings.Contains(m, want) || strings.Contains(m, "without them") {
					t.Fatalf("batch entry %v: %q, want it to say %q", en.ID, m, want)
				}
			}
		})
	}
}

// A request that a quota resetting later refuses as sent (it costs more
// than that quota has left) is told that reset, not the earlier one of a
// used-up quota: the same request passes no sooner.
func TestUsedUpQuotaYieldsToALaterOneTheRequestExceeds(t *testing.T) {
	skipNearReset(t, nextMonth)
	e := start(t, "zone upmonth\ntenant 100/s burst 100\nquota 2/day\nquota 3/month")
	h := []string{"Authorization", "Bearer valid-upmonth"}
	e.prove("valid-upmonth")
	e.passes(2, "echo", h...) // the day used up, 1 left this month
	got, r := e.quotaBatch(2, h...)
	ra, _ := strconv.ParseInt(r.Header.Get("Retry-After"), 10, 64)
	month := time.Until(nextMonth(time.Now())).Seconds()
	if got.Error.Data.Limit != "quota" || got.Error.Data.ResetsAt != nextMonth(time.Now()).Format(time.RFC3339) ||
		float64(ra) < month-5 || got.Error.Data.MaxPerRequest != 0 || !strings.Contains(got.Error.Message, "more than the 1 left of this API key's monthly quota (3)") {
		t.Fatalf("a batch of 2 with the day used up and 1 left this month: Retry-After %s, %s", r.Header.Get("Retry-After"), r.Body)
	}
	// A single call, which the month still admits, is told the day's reset.
	got = refusal(t, e.call(9, h...), http.StatusTooManyRequests, "quota")
	if got.Error.Data.ResetsAt != nextDay(time.Now()).Format(time.RFC3339) || !strings.Contains(got.Error.Message, "used its daily quota (2)") {
		t.Fatalf("one call with the day used up: %+v", got.Error)
	}
	// A batch larger than the whole month never passes as sent: the
	// used-up day is named ahead of it, as the README says.
	got, _ = e.quotaBatch(4, h...)
	if got.Error.Data.ResetsAt != nextDay(time.Now()).Format(time.RFC3339) || !strings.Contains(got.Error.Message, "used its daily quota (2)") {
		t.Fatalf("a batch of 4 with the day used up, over the month's 3: %+v", got.Error)
	}

	// With a tool's day used up and the key's month short of the batch,
	// the month is named, and what fits now is told: other tools' calls.
	e = start(t, "zone uptoolmonth\ntenant 100/s burst 100\nquota 3/month\ntool analyze_photo {\n quota 1/day\n}")
	h = []string{"Authorization", "Bearer valid-uptoolmonth"}
	e.prove("valid-uptoolmonth")
	e.passes(1, "analyze_photo", h...)
	e.passes(1, "echo", h...) // the tool's day used up, 1 left this month
	r = e.post("["+harness.ToolCall(1, "analyze_photo", nil)+","+harness.ToolCall(2, "echo", nil)+"]", h...)
	var entries []rpcError
	r.JSON(t, &entries)
	if len(entries) != 2 || entries[1].Error == nil || entries[1].Error.Data.ResetsAt != nextMonth(time.Now()).Format(time.RFC3339) ||
		entries[1].Error.Data.MaxPerRequest != 1 || !strings.Contains(entries[1].Error.Message, "costing at most 1 fit the quotas now") {
		t.Fatalf("a batch of the used-up tool and another, 1 left this month: %s", r.Body)
	}
	e.passes(1, "echo", h...)
}

// With `store redis` the two refusals above read the same, whether Redis
// answers or the instance answers from memory a refusal it remembers.
func TestUsedUpQuotaRefusalsReadTheSameOnRedis(t *testing.T) {
	skipNearReset(t, nextMonth)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // no host copy of an earlier run's counts
	rd := harness.StartRedis(t)
	e := startSite(t, groupSite("zone redistoolout\ntenant 100/s burst 100\nquota 2/day\ntool analyze_photo {\n quota 1/month\n}\nstore redis "+rd.URL))
	h := e.member("valid-redis-toolout", "acme")
	e.passes(1, "analyze_photo", h...)
	e.passes(1, "echo", h...)
	want := "this API key's daily quota (2) is used up too, so no other tool works with this key before " + nextDay(time.Now()).Format(time.RFC3339)
	for i := range 2 {
		if m := refusal(t, e.post(harness.ToolCall(5, "analyze_photo", nil), h...), http.StatusTooManyRequests, "tool_quota").Error.Message; !strings.Contains(m, want) {
			t.Fatalf("the tool's call, refusal %d: %q, want it to say %q", i+1, m, want)
		}
	}
	e = start(t, "zone redisupmonth\ntenant 100/s burst 100\nquota 2/day\nquota 3/month\nstore redis "+rd.URL)
	h = []string{"Authorization", "Bearer valid-redis-upmonth"}
	e.prove("valid-redis-upmonth")
	e.passes(2, "echo", h...)
	for i := range 2 {
		if got, r := e.quotaBatch(2, h...); got.Error.Data.ResetsAt != nextMonth(time.Now()).Format(time.RFC3339) {
			t.Fatalf("a batch of 2 with the day used up and 1 left this month, refusal %d: %s", i+1, r.Body)
		}
	}
}
