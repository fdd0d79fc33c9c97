package mcplimit

import (
	"encoding/json"
	"testing"
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
