package mcplimit

import (
	"errors"
	"io/fs"
	"os"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// unpushedPath is where this host keeps the quota counts a zone could not
// push to Caddy storage before it stopped (storage was unreachable):
// <AppDataDir>/mcp_ratelimit-unpushed/<zone name in hex>.counts, beside
// the key cache and outside the storage, which is what failed.
func unpushedPath(zone string) string { return hostCountsPath("mcp_ratelimit-unpushed", zone) }

// saveUnpushed writes us to the host's file, replacing it whole.
func saveUnpushed(zone string, us []quota.Count) error {
	var b []byte
	for _, u := range us {
		b = appendCountLine(b, u)
	}
	return writeHostFile(unpushedPath(zone), b)
}

// takeUnpushed reads and removes the counts saveUnpushed kept for zone.
func takeUnpushed(zone string) ([]quota.Count, error) {
	return takeHostCounts(unpushedPath(zone))
}

// mirrorUnpushed keeps the host's copy of the counts not yet pushed to
// storage up to date after each flush: written while storage fails, so a
// crash during an outage loses no more than one flush interval, and
// removed once they are pushed.
func (z *zone) mirrorUnpushed(pushed bool) {
	if pushed {
		if err := os.Remove(unpushedPath(z.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			z.logger.Load().Error("counts pushed to storage are still kept on this host: the next start would count them again",
				zap.String("zone", z.name), zap.String("file", unpushedPath(z.name)), zap.Error(err))
		}
		return
	}
	if us := z.quota.Unpushed(); len(us) > 0 {
		if err := saveUnpushed(z.name, us); err != nil {
			z.logger.Load().Error("counts not pushed to storage could not be kept on this host either: a crash now would lose them",
				zap.String("zone", z.name), zap.Int("keys", len(us)), zap.Error(err))
		}
	}
}
