package mcplimit

import (
	"encoding/json"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

func TestAppendJSONStringReadsBackAsEncodingJSONWould(t *testing.T) {
	for _, s := range []string{"plain", `quo"te\back`, "ctl\x01\n\t", "<&>", "héllo ✓", "bad\xffutf8", "\u2028\u2029", `tool "x"`,
		"run<of>safe&bytes\"between\\escapes\x1f.", "é\xff\u2028ok\uFFFDend", "\xe2\x80", "tail✓"} {
		got := appendJSONString(nil, []byte(s))
		var back, want string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, got, err)
		}
		js, _ := json.Marshal(s)
		_ = json.Unmarshal(js, &want)
		if back != want {
			t.Errorf("%q reads back as %q, encoding/json gives %q", s, back, want)
		}
	}
}

// A full set whose examined buckets tell nothing (empty shards after
// max_known was lowered) must not send a 292-year Retry-After.
func TestCapacityRefusalWithoutAKnownWaitSaysOneSecond(t *testing.T) {
	ref := capacityRefusal(layerTenant, rate.InfDuration)
	if s := ceilSeconds(ref.wait); s != 1 {
		t.Fatalf("Retry-After %d, want 1", s)
	}
	if ref := capacityRefusal(layerPreauth, 42*time.Second); ceilSeconds(ref.wait) != 42 {
		t.Fatalf("a known wait changed: %v", ref.wait)
	}
}

// On a month's last day the day's and the month's quota reset together:
// the month's refusal is the one to give, locally and from Redis's levels.
func TestMonthQuotaOutlastsTheDayOnItsLastDay(t *testing.T) {
	last := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	day := quotaRefusal(layerQuota, quota.Item{Period: quota.Day, Limit: 1}, "", last)
	month := quotaRefusal(layerQuota, quota.Item{Period: quota.Month, Limit: 1}, "", last)
	if !month.outlasts(&day) || day.outlasts(&month) {
		t.Fatal("the month's refusal does not outlast the day's on the month's last day")
	}
	mid := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	day = quotaRefusal(layerQuota, quota.Item{Period: quota.Day, Limit: 1}, "", mid)
	month = quotaRefusal(layerQuota, quota.Item{Period: quota.Month, Limit: 1}, "", mid)
	if !month.outlasts(&day) || day.outlasts(&month) {
		t.Fatal("the month's refusal does not outlast the day's mid-month")
	}
}
