package mcplimit

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The refusals of a dry run that sampling left unlogged are logged, when
// drained, as would-be refusals marked dry_run, as the sampled ones are.
func TestDrainedDryRunRefusalsAreMarkedDryRun(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "drain-dry", DryRun: true, Quota: &QuotaLimit{Off: true}})
	core, logs := observer.New(zap.InfoLevel)
	h.zone.logger.Store(zap.New(core))
	k := sampleKey{layer: layerTenant, dry: true}
	now := time.Now()
	for range sampleThreshold + 5 {
		h.zone.sampler.record(k, now)
	}
	h.zone.drainSampler(true)
	var represented int64
	for _, e := range logs.All() {
		if e.ContextMap()["layer"] != layerTenant.String() {
			continue
		}
		if e.Message != "would refuse (dry run)" || e.ContextMap()["dry_run"] != true {
			t.Fatalf("drained dry-run refusals logged as %q %v, want \"would refuse (dry run)\" marked dry_run", e.Message, e.ContextMap())
		}
		represented += int64(e.ContextMap()["represents_count"].(uint64))
	}
	if represented != 5 {
		t.Fatalf("drained events represent %d dry-run refusals, want the 5 sampling held", represented)
	}
}

// A refusal under a tier names the tier in its log event.
func TestRefusalLogNamesTheTier(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "tier-log", Quota: &QuotaLimit{Off: true}})
	core, logs := observer.New(zap.InfoLevel)
	h.logger = zap.New(core)
	d := &decision{z: h.zone, now: time.Now()}
	d.lim.tier = "gold"
	h.record(d, refusal{layer: layerTenant, wait: time.Second}, false)
	ev := logs.FilterMessage("refused").All()
	if len(ev) != 1 || ev[0].ContextMap()["tier"] != "gold" {
		t.Fatalf("refusal under tier gold logged %v, want one event with tier gold", logs.All())
	}
}
