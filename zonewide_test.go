package mcplimit_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// twoServers is a config of two servers whose handlers share the zone
// "shared", with the handlers' JSON a and b.
func twoServers(t *testing.T, a, b string) []byte {
	server := func(handler string) string {
		return `{"listen":["127.0.0.1:` + itoa(harness.FreePort(t)) + `"],"automatic_https":{"disable":true},` +
			`"routes":[{"handle":[{"handler":"mcp_ratelimit","zone":"shared"` + handler + `},{"handler":"static_response","body":"ok"}]}]}`
	}
	return []byte(`{"admin":{"listen":"127.0.0.1:` + itoa(harness.FreePort(t)) + `","config":{"persist":false}},` +
		`"storage":{"module":"file_system","root":"` + t.TempDir() + `"},` +
		`"apps":{"http":{"servers":{"a":` + server(a) + `,"b":` + server(b) + `}}}}`)
}

// A zone has one flush interval and one store. Handlers of one config
// that set them differently are refused, naming the difference: the zone
// would take the settings of whichever Caddy loads last, which between
// servers changes from one load to the next. A reload may change them.
func TestHandlersOfOneZoneMustAgreeOnItsZoneWideSettings(t *testing.T) {
	if err := caddy.Load(twoServers(t, ``, ``), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	if err := caddy.Load(twoServers(t, `,"flush_interval":"5s"`, `,"flush_interval":"5s"`), true); err != nil {
		t.Fatalf("a reload changing the zone's flush interval in every handler: %v", err)
	}
	err := caddy.Load(twoServers(t, `,"flush_interval":"5s"`, ``), true)
	if err == nil {
		t.Fatal("Caddy loaded two handlers of one zone with different flush intervals")
	}
	for _, want := range []string{`zone "shared": handlers of the zone in this config set its zone-wide settings differently`, "flush_interval ", "5s", "30s", "give every handler of the zone the same flush_interval and store"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("load error does not say %q: %v", want, err)
		}
	}
}
