package mcplimit

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

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

// appendJSONString skips eight safe bytes at a time: a byte to escape, or
// a rune to decode, at any offset of a word must still be seen.
func TestAppendJSONStringSeesEveryByteAtEveryOffset(t *testing.T) {
	safe := []byte("abcdefghijklmnopqrstuvwx")
	for _, odd := range []string{`"`, `\`, "<", ">", "&", "\x00", "\x1f", "\n", "\x7f", "\x80", "\xff", "é", "\u2028"} {
		for at := range len(safe) {
			in := append(append(append([]byte{}, safe[:at]...), odd...), safe[at:]...)
			got := appendJSONString(nil, in)
			var back string
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("%q encodes to invalid JSON %s: %v", in, got, err)
			}
			want, _ := json.Marshal(string(in))
			var wantBack string
			_ = json.Unmarshal(want, &wantBack)
			if back != wantBack {
				t.Fatalf("%q reads back as %q, want %q", in, back, wantBack)
			}
			for _, c := range got[1 : len(got)-1] {
				if c < 0x20 || c == '<' || c == '>' || c == '&' {
					t.Fatalf("%q encodes to %q, which holds %q raw", in, got, c)
				}
			}
		}
	}
	for c := range 256 {
		x := uint64(c) << 24 // byte c among seven 'a's
		x |= 0x6161616161616161 &^ (0xff << 24)
		if want := c < utf8.RuneSelf && jsonSafe[c]; jsonWordSafe(x) != want {
			t.Errorf("jsonWordSafe with byte %#x = %v, want %v", c, !want, want)
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

// On a month's last day, a call costing more than the whole daily quota
// while the month's quota is used up is told the daily quota is too small
// for it: both reset at the same moment, and after it the same call would
// still be refused, so the refusal that says what to change is given.
func TestTooSmallDayOutlastsAUsedUpMonthResettingWithIt(t *testing.T) {
	last := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	day := quotaRefusal(layerQuota, quota.Item{Period: quota.Day, N: 10, Limit: 5}, "", last)
	month := quotaRefusal(layerQuota, quota.Item{Period: quota.Month, N: 10, Limit: 100, Used: 100}, "", last)
	if !day.never() || !month.usedUp() {
		t.Fatalf("setup: day never %v, month used up %v", day.never(), month.usedUp())
	}
	if !day.outlasts(&month) || month.outlasts(&day) {
		t.Fatal("a used-up month outlasts the too-small day resetting with it")
	}
}
