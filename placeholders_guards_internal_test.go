package mcplimit

import (
	"net/http/httptest"
	"testing"

	maphandler "github.com/caddyserver/caddy/v2/modules/caddyhttp/map"
)

// A request placeholder's prefix without the field it names is none that
// Caddy answers: {http.request.tls}, {http.request.host.labels} and
// {http.vars} are empty for every request.
func TestPrefixesOfCaddysPlaceholdersAreNotItsOwn(t *testing.T) {
	for _, key := range []string{"http.request.tls", "http.request.host.labels", "http.vars", "http.request.tlsx", "http.varsx"} {
		if caddyHTTPPlaceholder(key) {
			t.Errorf("{%s} is read as Caddy's own", key)
		}
	}
}

// A watch done warning stops asking the replacer (which runs the handler
// that sets the placeholder, a map's expressions, again): a tier's once it
// warned it unset, an identity's once it warned it both unset and set.
func TestUnsetWatchStopsAskingOnceItWarned(t *testing.T) {
	h := &Handler{
		Identity: []string{"{mykey}"},
		Tiers:    []Tier{{Name: "paid", Match: TierMatch{Placeholder: "{plan}", Values: []string{"paid"}}, Limits: Limits{Quota: &QuotaLimit{Day: 9}}}},
	}
	logs, warn := watchUnset(t, h)
	mapped := &maphandler.Handler{Source: "{http.request.method}", Destinations: []string{"mykey"}, Defaults: []string{"k"}}
	_ = warn(httptest.NewRecorder(), unsetRequest())                                       // both unset
	if err := mapped.ServeHTTP(httptest.NewRecorder(), unsetRequest(), warn); err != nil { // the identity's set
		t.Fatal(err)
	}
	if logs.Len() != 3 {
		t.Fatalf("%d warnings, want 3 (both unset, the identity derived)", logs.Len())
	}
	for range 5 {
		if err := mapped.ServeHTTP(httptest.NewRecorder(), unsetRequest(), warn); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range h.unset {
		if n := w.checks.Load(); n != 2 && w.key == "mykey" || n != 1 && w.key == "plan" {
			t.Errorf("{%s} looked at %d requests, want none after it warned", w.key, n)
		}
	}
}
