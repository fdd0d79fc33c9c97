package mcplimit

import (
	"time"

	"go.uber.org/zap"
)

// record counts a refusal and logs it, sampled once a flood passes the
// threshold. A dry run's refusal marks the request to take nothing (see
// admit).
func (h *Handler) record(d *decision, ref refusal, dry bool) {
	d.z.metrics.refused(ref.layer, dry)
	if dry {
		d.wouldGive(ref)
	}
	k := sampleKey{layer: ref.layer, dry: dry}
	n, heldBack := d.z.sampler.record(k, d.now)
	if heldBack > 0 {
		d.z.logHeldBack(k, heldBack)
	}
	if n == 0 {
		return
	}
	cost := d.cost
	if ref.kind == kindRate {
		// What the bucket was asked for: pre-auth and anonymous take at
		// least 1 of a request that costs nothing.
		cost = int64(ref.n)
	}
	fields := []zap.Field{
		zap.String("zone", d.z.name),
		zap.String("layer", ref.layer.String()),
		zap.Int64("retry_after", ceilSeconds(ref.wait)),
		zap.Int64("cost", cost),
		zap.Uint64("represents_count", n),
	}
	if d.hasID {
		fields = append(fields, zap.String("fingerprint", fingerprintHex(d.fp)))
	}
	if d.lim.tier != "" {
		fields = append(fields, zap.String("tier", d.lim.tier))
	}
	if dry {
		fields = append(fields, zap.Bool("dry_run", true))
		h.logger.Info("would refuse (dry run)", fields...)
		return
	}
	h.logger.Info("refused", fields...)
}

// wouldGive keeps in d.dryRefs the refusals a dry run records that
// enforcement would weigh: a refusal of the request as sent ends its
// decision before any layer after pre-auth, and the layers' refusals are
// weighed all at once, as probe weighs them (dryRefusal). (Pre-auth's
// refusal of the first token, which enforcement gives before the body is
// read, is recorded after inspection; admit puts it first, unless the
// request was refused as sent, which enforcement tells ahead of a wait.)
func (d *decision) wouldGive(ref refusal) {
	switch {
	case !d.dryRefused:
		d.dryRefs = append(d.dryRefs[:0], ref)
	case d.dryRefs[0].layer != layerRequest:
		d.dryRefs = append(d.dryRefs, ref)
	}
	d.dryRefused = true
}

// dryRefusal is the refusal enforcement would have given the request a
// dry run admits, nil when no layer would refuse it.
func (d *decision) dryRefusal() *refusal {
	if !d.dryRefused {
		return nil
	}
	d.dryRef = longestOf(d.dryRefs)
	return &d.dryRef
}

// drainSampler logs the refusals that sampling left unrepresented in
// windows that have ended, or in all of them when the zone stops.
func (z *zone) drainSampler(stopping bool) {
	for k, n := range z.sampler.drain(time.Now(), stopping) {
		z.logHeldBack(k, n)
	}
}

// logHeldBack logs the n refusals of k that a window's sampling held back:
// one event that stands for several requests, so it names none of them.
func (z *zone) logHeldBack(k sampleKey, n uint64) {
	msg := "refused"
	fields := []zap.Field{zap.String("zone", z.name), zap.String("layer", k.layer.String()), zap.Uint64("represents_count", n)}
	if k.dry {
		msg = "would refuse (dry run)"
		fields = append(fields, zap.Bool("dry_run", true))
	}
	z.logger.Load().Info(msg, fields...)
}
