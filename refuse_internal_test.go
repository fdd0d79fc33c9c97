package mcplimit

import (
	"encoding/json"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestAppendJSONStringReadsBackAsEncodingJSONWould(t *testing.T) {
	for _, s := range []string{"plain", `quo"te\back`, "ctl\x01\n\t", "<&>", "héllo ✓", "bad\xffutf8", "\u2028\u2029", `tool "x"`} {
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
