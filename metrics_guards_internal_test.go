package mcplimit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A zone's metrics gone (the zone ended) join no registry, whether a
// handler's or the admin endpoint's: a config loading while the zone ends
// must not serve a dead zone's metrics. Revived (a zone of its name took
// them up), they join again, the admin endpoint's registry included, even
// one that served them before they went.
func TestGoneZoneMetricsJoinNoRegistryUntilRevived(t *testing.T) {
	m := newZoneMetrics("gone")
	m.unregister()
	handlers, admin := prometheus.NewRegistry(), prometheus.NewRegistry()
	if err := m.register(handlers); err != nil {
		t.Fatal(err)
	}
	m.serveAdmin(admin)
	if served(t, handlers) || served(t, admin) {
		t.Fatal("a gone zone's metrics joined a registry")
	}
	m.revive()
	m.serveAdmin(admin)
	if !served(t, admin) {
		t.Fatal("revived, the zone's metrics are not on the admin endpoint")
	}

	again := newZoneMetrics("again")
	reg := prometheus.NewRegistry()
	again.serveAdmin(reg)
	again.unregister()
	again.revive()
	again.serveAdmin(reg)
	if !served(t, reg) {
		t.Fatal("revived, the zone's metrics are not on the admin endpoint that served them before they went")
	}
}
