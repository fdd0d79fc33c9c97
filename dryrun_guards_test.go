package mcplimit_test

import (
	"net/http"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// In dry run, a pre-auth refusal of the rest of a costly call's cost is
// recorded as pre-auth's, not folded into a longer wait of a later layer:
// each layer that would refuse is recorded once. Address .1 drains the
// global bucket (3 tokens, one an hour); address .2 spends one of its 3
// pre-auth tokens on a tools/list, so its call costing 3 finds its first
// token but not the rest (a wait of minutes), and the global bucket empty
// (a wait of hours).
func TestDryRunRestOfCostPreauthRefusalIsRecordedAsPreauths(t *testing.T) {
	e := start(t, "zone dryrest\ndry_run\npreauth 1/m burst 3\nglobal 1/h burst 3\ncost echo 3\nquota off",
		harness.Options{Global: "servers {\n trusted_proxies static 127.0.0.1/32\n}"})
	if r := e.call(1, "X-Forwarded-For", "198.51.100.1"); r.Status != http.StatusOK {
		t.Fatalf("call draining the global bucket: %d %s", r.Status, r.Body)
	}
	if r := e.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "X-Forwarded-For", "198.51.100.2"); r.Status != http.StatusOK {
		t.Fatalf("tools/list: %d %s", r.Status, r.Body)
	}
	if r := e.call(2, "X-Forwarded-For", "198.51.100.2"); r.Status != http.StatusOK {
		t.Fatalf("call in dry run: %d %s", r.Status, r.Body)
	}
	st, b := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	body := string(b)
	for _, l := range []string{"preauth", "global"} {
		if n := promValue(body, "mcp_ratelimit_dry_run_refusals_total", `layer="`+l+`"`, `zone="dryrest"`); n != 1 {
			t.Fatalf("would-be %s refusals: %v, want 1", l, n)
		}
	}
}
