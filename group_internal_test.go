package mcplimit

import (
	"net/http"
	"strings"
	"testing"
)

// A member's call that its own quota refuses holds none of the group's
// tokens, not even for a moment: another member's call decided meanwhile
// (here, from inside the first one's quota step) finds the group bucket
// whole. Group burst 4: the two proving calls and p1's second take 3, and
// p1's quota of 2 is then used up; the token left is p2's, whatever p1
// sends.
func TestRefusedMembersCallHoldsNoGroupTokenMeanwhile(t *testing.T) {
	awayFromMidnight(t)
	h := provisionForTest(t, &Handler{
		Zone: "group-meanwhile", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tenant: &RateLimit{Off: true}, Quota: &QuotaLimit{Day: 2}, Global: &RateLimit{Off: true},
		Group: &Group{Key: "{http.request.header.X-Org}", Rate: "1/h", Burst: 4},
	})
	const p1, p2 = "Bearer valid-member-1", "Bearer valid-member-2"
	org := []string{"X-Org", "acme"}
	for i, auth := range []string{p1, p1, p2} {
		if code, body := serveCall(t, h, auth, http.StatusOK, org...); code != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, code, body)
		}
	}
	quotaStep := admissionSteps[4]
	t.Cleanup(func() { admissionSteps[4] = quotaStep })
	meanwhile := 0
	admissionSteps[4] = func(d *decision) bool {
		if meanwhile == 0 {
			meanwhile++
			if code, body := serveCall(t, h, p2, http.StatusOK, org...); code != http.StatusOK {
				t.Errorf("p2's call while p1's over its quota is decided: %d %s", code, body)
			}
		}
		return quotaStep(d)
	}
	code, body := serveCall(t, h, p1, http.StatusOK, org...)
	admissionSteps[4] = quotaStep
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"limit":"quota"`) {
		t.Fatalf("p1's call over its quota: %d %s", code, body)
	}
	if meanwhile != 1 {
		t.Fatalf("%d calls decided meanwhile, want 1", meanwhile)
	}
}
