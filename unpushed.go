package mcplimit

import (
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// unpushedKind is the directory of AppDataDir where a zone keeps the quota
// counts it could not push to Caddy storage (storage was unreachable),
// beside the key cache and outside the storage, which is what failed; see
// hostFiles for the files in it.
const unpushedKind = "mcp_ratelimit-unpushed"

// saveUnpushed writes us to the zone's file, replacing it whole.
func (z *zone) saveUnpushed(us []quota.Count) error { return writeCounts(z.unpushed.path(), us) }

// dropUnpushed removes the zone's file: nothing in it is left to push.
func (z *zone) dropUnpushed() {
	if err := z.unpushed.remove(); err != nil {
		z.logger.Load().Error("counts pushed to storage are still kept on this host: a process of the zone taking the file over would count them again",
			zap.String("zone", z.name), zap.String("file", z.unpushed.path()), zap.Error(err))
	}
}

// adoptUnpushed counts again what stopped processes of the zone could not
// push, to be pushed at the next flush. Their files go once this process's
// own file holds their counts, so that a crash in between loses none.
func (z *zone) adoptUnpushed(now time.Time) {
	us, claims, err := z.unpushed.takeOrphans(now)
	if err != nil {
		z.logger.Load().Error("counts another process could not push: unreadable", zap.String("zone", z.name), zap.String("dir", z.unpushed.dir), zap.Error(err))
	}
	if len(us) > 0 {
		z.quota.AddUnpushed(us)
		if err := z.saveUnpushed(z.quota.Unpushed()); err != nil {
			z.logger.Load().Error("counts taken over from another process could not be kept on this host: a crash before the next flush would lose them",
				zap.String("zone", z.name), zap.Error(err))
		}
		z.logger.Load().Info("counts a stopped process could not push are counted again, and pushed at the next flush", zap.String("zone", z.name), zap.Int("keys", len(us)))
	}
	if err := dropClaims(claims); err != nil {
		z.logger.Load().Error("files of counts taken over are still on this host: another process may count them again",
			zap.String("zone", z.name), zap.Error(err))
	}
}

// mirrorUnpushed keeps the host's copy of the counts not yet pushed to
// storage up to date after each flush: written while storage fails, so a
// crash during an outage loses no more than one flush interval, and
// removed once they are pushed. A flush that failed after its pushes
// went through (an unlock, a read) leaves nothing to keep either: a copy
// kept would count them again.
func (z *zone) mirrorUnpushed(pushed bool) {
	var us []quota.Count
	if !pushed {
		us = z.quota.Unpushed()
	}
	if len(us) == 0 {
		z.dropUnpushed()
		return
	}
	if err := z.saveUnpushed(us); err != nil {
		z.logger.Load().Error("counts not pushed to storage could not be kept on this host either: a crash now would lose them",
			zap.String("zone", z.name), zap.Int("keys", len(us)), zap.Error(err))
	}
}
