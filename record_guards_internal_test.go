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

// The refusals a window held back, when the next window's first refusal
// comes before a drain, are logged apart, as a drain logs them: an event
// that names no caller, while the refusal's own event, with its
// fingerprint, represents that refusal alone.
func TestHeldBackRefusalsAreNotLoggedAsTheNextCallers(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "held-back", Quota: &QuotaLimit{Off: true}})
	core, logs := observer.New(zap.InfoLevel)
	h.logger = zap.New(core)
	h.zone.logger.Store(h.logger)
	t0 := time.Now()
	d := &decision{z: h.zone, now: t0, hasID: true}
	for range sampleThreshold + 5 {
		h.record(d, refusal{layer: layerPreauth, wait: time.Second}, false)
	}
	next := &decision{z: h.zone, now: t0.Add(sampleWindow), hasID: true}
	next.fp[0] = 0xab
	h.record(next, refusal{layer: layerPreauth, wait: time.Second}, false)
	var apart, own []map[string]any
	for _, e := range logs.FilterMessage("refused").All() {
		switch m := e.ContextMap(); m["fingerprint"] {
		case nil:
			apart = append(apart, m)
		case fingerprintHex(next.fp):
			own = append(own, m)
		}
	}
	if len(apart) != 1 || apart[0]["represents_count"] != uint64(5) || apart[0]["layer"] != "preauth" || len(apart[0]) != 3 {
		t.Fatalf("events naming no caller %v, want one for the 5 held back with zone, layer and represents_count alone", apart)
	}
	if len(own) != 1 || own[0]["represents_count"] != uint64(1) || own[0]["fingerprint"] != fingerprintHex(next.fp) {
		t.Fatalf("the next refusal's events %v, want one representing it alone, with its fingerprint", own)
	}
}
