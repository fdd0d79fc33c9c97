package mcplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// When several of the items decided in Redis refuse a batch, the refusal
// given has every other one folded in (longestOf), not two at a time: a
// tenant bucket's wait that the quota's refusal (to the reset) outlasted
// must still reach the global bucket's refusal that outlasts both. Tenant
// 1/m burst 3, quota 5/day and a global burst of 2: after three calls
// (apart, as the global bucket refills; the first, proving one, is
// charged to pre-auth, not to the tenant), a batch of three finds the
// tenant 2 tokens short of it, the quota 1 short and the global burst
// smaller than it. The global refusal names 2 calls, what the quota has
// left, and the wait before the tenant holds 2 tokens: a minute, not the
// global bucket's own moment.
func TestRedisRefusalFoldsEveryItemThatRefuses(t *testing.T) {
	h := onRedis(t, &Handler{
		Zone: "redis-fold-refusals", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Rate: "1/m", Burst: 3}, Quota: &QuotaLimit{Day: 5},
		Global: &RateLimit{Rate: "100/s", Burst: 2},
	})
	const token = "Bearer valid-fold-refusals"
	for i := range 3 {
		time.Sleep(20 * time.Millisecond) // the global bucket refills
		if code, body := serveCall(t, h, token, http.StatusOK); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	calls := make([]string, 3)
	for i := range calls {
		calls[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/call","params":{"name":"echo"}}`
	}
	// Were the batch forwarded, it would be answered 200.
	rec := serveBody(t, h, "["+strings.Join(calls, ",")+"]", token, http.StatusOK)
	var answers []struct {
		Error struct {
			Message string `json:"message"`
			Data    struct {
				Limit         string `json:"limit"`
				MaxPerRequest int    `json:"maxPerRequest"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &answers); err != nil || rec.Code != http.StatusTooManyRequests || len(answers) != 3 {
		t.Fatalf("want a 429 answering each call: %d %s (%v)", rec.Code, rec.Body, err)
	}
	got := answers[0].Error
	if got.Data.Limit != "global" || got.Data.MaxPerRequest != 2 || !strings.Contains(got.Message, "never be admitted") {
		t.Fatalf("want the global refusal naming 2 calls: %s", rec.Body)
	}
	if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 50 || ra > 60 {
		t.Fatalf("Retry-After %q, want the tenant's 50 to 60 seconds for 2 tokens", rec.Header().Get("Retry-After"))
	}
}
