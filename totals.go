package mcplimit

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// totalsPath is where this host keeps a copy of the shared quota totals a
// zone last read from storage: <AppDataDir>/mcp_ratelimit-totals/<zone
// name in hex>.counts. A start while storage is unreadable counts on from
// it (quota.Counter.SeedTotals) instead of from zero, so an identity that
// had used up its quota stays refused. Totals only grow within a period,
// so any copy of the current period is a lower bound; processes sharing a
// data directory may each write it.
func totalsPath(zone string) string {
	return filepath.Join(caddy.AppDataDir(), "mcp_ratelimit-totals", hex.EncodeToString([]byte(zone))+".counts")
}

// saveTotals copies the zone's shared quota totals to the host: when
// storage starts failing, and when the zone stops.
func (z *zone) saveTotals() {
	cs, ok := z.quota.Totals(time.Now())
	if !ok {
		return // nothing read from storage yet: the copy there may know more
	}
	var b []byte
	for _, c := range cs {
		b = appendCountLine(b, c)
	}
	if err := writeHostFile(totalsPath(z.name), b); err != nil {
		z.logger.Load().Warn("quota totals not copied to this host: a start while storage is unreadable would count from zero",
			zap.String("zone", z.name), zap.Error(err))
	}
}

// seedTotals starts the zone's quota from the host's copy of the totals,
// for a start while storage is unreadable.
func (z *zone) seedTotals(logger *zap.Logger) {
	data, err := os.ReadFile(totalsPath(z.name))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		logger.Warn("quota totals copied on this host unreadable: counting from zero until storage answers", zap.String("zone", z.name), zap.Error(err))
		return
	}
	cs := parseCounts(data)
	z.quota.SeedTotals(cs, time.Now())
	logger.Info("quota counts go on from the totals last read from storage, copied on this host, until storage answers", zap.String("zone", z.name), zap.Int("keys", len(cs)))
}
