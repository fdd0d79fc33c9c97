package mcplimit

import (
	"strings"
	"testing"

	"github.com/caddyserver/certmagic"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// served reports whether reg serves the zone's metrics.
func served(t *testing.T, reg *prometheus.Registry) bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "mcp_ratelimit_") {
			return true
		}
	}
	return false
}

// Every config load brings a registry of its own (Caddy's, with the Go
// runtime's collectors in it). A zone kept across loads is in the
// registries of the configs running and of the admin endpoint, and lets
// the others go: it kept every one it was ever in, about 20 KB per load,
// for as long as it lived. A load Caddy rejects leaves its registry to the
// admin endpoint, which serves it until the next load.
func TestZoneMetricsLetGoOfTheRegistriesOfConfigsGone(t *testing.T) {
	m := newZoneMetrics("regs")
	var running *prometheus.Registry
	load := func(ok bool) *prometheus.Registry {
		reg := prometheus.NewRegistry()
		m.serveAdmin(reg)                       // the admin endpoint, provisioned first
		if err := m.register(reg); err != nil { // the new config's handler
			t.Fatal(err)
		}
		if ok {
			if running != nil {
				m.release(running) // the old config's handler, cleaned up
			}
			running = reg
		} else {
			m.release(reg) // the rejected config's handler, cleaned up
		}
		return reg
	}
	first := load(true)
	for range 50 {
		load(true)
	}
	if n := len(m.regs); n != 1 {
		t.Fatalf("the zone is in %d registries after 51 loads, want the running config's alone", n)
	}
	if served(t, first) {
		t.Fatal("the first config's registry still holds the zone's metrics")
	}
	rejected := load(false)
	if !served(t, rejected) || !served(t, running) {
		t.Fatal("after a rejected load, the admin endpoint's registry (the rejected config's) or the running config's lacks the zone")
	}
	load(true)
	if served(t, rejected) || len(m.regs) != 1 {
		t.Fatalf("the rejected config's registry is kept after the next load (%d registries)", len(m.regs))
	}
	m.unregister()
	if served(t, running) || len(m.regs) != 0 {
		t.Fatal("a zone gone is still in a registry")
	}
}

// A handler cleaned up takes the zone's metrics out of its config's
// registry, while the handlers of the config running keep them in theirs.
func TestHandlerCleanupTakesTheZoneOutOfItsConfigsRegistry(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	old, err := compile(&Handler{Zone: "regs-handler"})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := compile(&Handler{Zone: "regs-handler"})
	if err != nil {
		t.Fatal(err)
	}
	oldReg, curReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	z, err := acquireZone(st, oldReg, old, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquireZone(st, curReg, cur, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	z.unhold(old) // the old config's handler, cleaned up
	if err := dropZone(z); err != nil {
		t.Fatal(err)
	}
	if served(t, oldReg) || !served(t, curReg) {
		t.Fatalf("old config's registry serves the zone: %v, the running one's: %v; want false, true", served(t, oldReg), served(t, curReg))
	}
	z.unhold(cur)
	if err := dropZone(z); err != nil {
		t.Fatal(err)
	}
}
