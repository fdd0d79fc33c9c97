package mcplimit

import (
	"time"

	"go.uber.org/zap"
)

// totalsKind is the directory of AppDataDir where a zone keeps a copy of
// the shared quota totals it last read from storage (countsCopyPath). A
// start while storage is unreadable counts on from it
// (quota.Counter.SeedTotals) instead of from zero, so an identity that had
// used up its quota stays refused. Totals only grow within a period, so
// any copy of the current period is a lower bound; processes sharing a
// data directory may each write it.
const totalsKind = "mcp_ratelimit-totals"

// saveTotals copies the zone's shared quota totals to the host: when
// storage starts failing, when the zone stops, at the first flush after a
// quota was used up or refused here (totalsDue), and at the first flush
// totalsRefresh after the last copy, which takes in the quotas other
// instances used up. Not at every flush: with 100k tenants the copy is
// megabytes, tens of milliseconds to write.
func (z *zone) saveTotals() {
	now := time.Now()
	cs, ok := z.quota.Totals(now)
	if !ok {
		return // nothing read from storage yet: the copy there may know more
	}
	if err := writeCounts(countsCopyPath(totalsKind, z.name), cs); err != nil {
		z.logger.Load().Warn("quota totals not copied to this host: a start while storage is unreadable would count from zero",
			zap.String("zone", z.name), zap.Error(err))
		return
	}
	z.totalsSaved.Store(now.UnixNano())
}

// totalsRefresh is how old the host's copy of the totals may grow before a
// flush writes it again.
const totalsRefresh = 5 * time.Minute

// seedTotals starts the zone's quota from the host's copy of the totals,
// for a start while storage is unreadable.
func (z *zone) seedTotals(logger *zap.Logger) {
	cs, err := readCounts(countsCopyPath(totalsKind, z.name))
	if err != nil {
		logger.Warn("quota totals copied on this host unreadable: counting from zero until storage answers", zap.String("zone", z.name), zap.Error(err))
		return
	}
	if len(cs) > 0 {
		z.quota.SeedTotals(cs, time.Now())
		logger.Info("quota counts go on from the totals last read from storage, copied on this host, until storage answers", zap.String("zone", z.name), zap.Int("keys", len(cs)))
	}
}

// markTotalsDue has the next flush copy the totals to the host (see
// totalsDue). A flood of refusals only reads the flag.
func (z *zone) markTotalsDue() {
	if !z.totalsDue.Load() {
		z.totalsDue.Store(true)
	}
}
