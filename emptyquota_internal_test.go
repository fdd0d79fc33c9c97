package mcplimit

import (
	"encoding/json"
	"strings"
	"testing"
)

// A quota given as `{}` in JSON, or with only zero fields, is one left
// out, as a layer's empty rate limit is: the top-level quota keeps its
// default, and a group or tool quota is none. An admin API edit that
// deletes a quota's last period leaves such an object behind.
func TestAnEmptyQuotaIsOneLeftOut(t *testing.T) {
	for _, tc := range []struct{ js, want string }{
		{`{"quota":{}}`, "day 5000"},
		{`{"quota":{"day":0}}`, "day 5000"},
		{`{"quota":{"off":false}}`, "day 5000"},
		{`{"quota":{"month":70}}`, "month 70"},
		{`{"group_quota":{}}`, "no group quota"},
		{`{"group":{"key":"{http.auth.user.org}","rate":"5/s"},"group_quota":{}}`, "no group quota"},
		{`{"tools":{"photo":{"cost":2,"quota":{}}}}`, "no photo quota"},
	} {
		var h Handler
		if err := json.Unmarshal([]byte(tc.js), &h); err != nil {
			t.Fatalf("decoding %s: %v", tc.js, err)
		}
		p, err := compile(&h)
		if err != nil {
			t.Fatalf("%s refused: %v", tc.js, err)
		}
		var got []string
		if q := p.base.quota; q.day > 0 {
			got = append(got, "day "+itoa(q.day))
		} else if q.month > 0 {
			got = append(got, "month "+itoa(q.month))
		}
		if strings.Contains(tc.js, "group_quota") && !p.groupQuota.any() {
			got = append(got, "no group quota")
		}
		if tp := p.tools["photo"]; tp != nil && !tp.quota.any() {
			got = append(got, "no photo quota")
		}
		if !strings.Contains(strings.Join(got, ", "), tc.want) {
			t.Errorf("%s compiled to %v, want %s", tc.js, got, tc.want)
		}
	}
	// A tool whose only setting is an empty quota sets nothing.
	var h Handler
	if err := json.Unmarshal([]byte(`{"tools":{"photo":{"quota":{}}}}`), &h); err != nil {
		t.Fatal(err)
	}
	if _, err := compile(&h); err == nil || !strings.Contains(err.Error(), "tool photo: sets nothing") {
		t.Fatalf("a tool with an empty quota alone: %v", err)
	}
}
