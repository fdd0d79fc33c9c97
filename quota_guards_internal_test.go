package mcplimit

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A batch a tool's quota never admits as sent (3 calls, 2 a day), when
// not even one call of that tool fits the key's quota now (2 left, a call
// costs 3), is told the quota's reset, not a retry in a second: no smaller
// request of that tool passes before then.
func TestNeverFittingToolBatchWithNothingFittingNowWaitsForTheReset(t *testing.T) {
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{
		Zone: "never-nothing-fits", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 10}, Global: &RateLimit{Off: true},
		Tools: map[string]*ToolPolicy{"slow": {Cost: 3, Quota: &QuotaLimit{Day: 2}}},
	})
	const auth = "Bearer valid-never-nothing-fits"
	for i := range 8 { // the proving call and 7 more: 2 of the key's 10 left
		if code, body := serveCall(t, h, auth, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow"}}`
	batch := "[" + strings.ReplaceAll(call, "%d", "1") + "," + strings.ReplaceAll(call, "%d", "2") + "," + strings.ReplaceAll(call, "%d", "3") + "]"
	rec := serveBody(t, h, batch, auth, http.StatusOK)
	ra, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"limit":"tool_quota"`) || ra < 2 {
		t.Fatalf("3 calls of slow (2 a day), 2 of the key's 10 left, a call costing 3: %d, Retry-After %q, %s; want the tool quota's reset", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

// A batch exceeding the month's quota (1 left of 3) while the day's is
// used up is told the month's reset, and no size that fits now: none does
// (the day has nothing left), so "requests costing at most 0 fit the
// quotas now" would be no advice. On the month's last day the two reset
// together, and the used-up day is named.
func TestExceededQuotaWithNothingFittingNowNamesNoSizeThatFits(t *testing.T) {
	awayFromMidnight(t)
	want := "more than the 1 left of this API key's monthly quota (3)"
	if now := time.Now().UTC(); quota.Day.Next(now).Equal(quota.Month.Next(now)) {
		want = "Quota exhausted: this API key used its daily quota (2)"
	}
	h := provisionForTest(t, &Handler{
		Zone: "exceeded-nothing-fits", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "100/s", Burst: 100}, Quota: &QuotaLimit{Day: 2, Month: 3}, Global: &RateLimit{Off: true},
	})
	const auth = "Bearer valid-exceeded-nothing-fits"
	for i := range 2 { // the day used up, 1 left this month
		if code, body := serveCall(t, h, auth, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}]`
	rec := serveBody(t, h, batch, auth, http.StatusOK)
	body := rec.Body.String()
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(body, want) || strings.Contains(body, "fit the quotas now") {
		t.Fatalf("a batch of 2, the day used up, 1 left this month: %d %s", rec.Code, body)
	}
}
