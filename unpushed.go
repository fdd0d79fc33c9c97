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

// boundUnpushedKind is unpushedKind for the counts bound for Redis (see
// redisBoundPrefix). A crash while storage refuses them must not lose
// them: the next process pushes the calls they mark to Redis and takes
// them out of the record, which, without them, would go below what other
// instances marked, and a raise would carry those instances' calls too.
const boundUnpushedKind = "mcp_ratelimit-redis-bound-unpushed"

// unpushedCopy is the host's copy of the counts a counter could not push
// to storage, kept so that a crash during a storage outage loses no more
// than one flush interval of them: the next process of the zone on the
// host counts them again (adoptUnpushed).
type unpushedCopy struct {
	files   hostFiles
	counter *quota.Counter
	what    string // the counts' name in logs
}

// unpushedCopies are the zone's copies: its quota counts, and the counts
// bound for Redis.
func (z *zone) unpushedCopies() [2]*unpushedCopy {
	return [2]*unpushedCopy{&z.unpushed, &z.boundUnpushed}
}

// save writes us to the zone's file, replacing it whole.
func (u *unpushedCopy) save(us []quota.Count) error { return writeCounts(u.files.path(), us) }

// dropUnpushed removes the zone's file of u: nothing in it is left to push.
func (z *zone) dropUnpushed(u *unpushedCopy) {
	if err := u.files.remove(); err != nil {
		z.logger.Load().Error("counts pushed to storage are still kept on this host: a process of the zone taking the file over would count them again",
			zap.String("zone", z.name), zap.String("counts", u.what), zap.String("file", u.files.path()), zap.Error(err))
	}
}

// adoptUnpushed counts again what stopped processes of the zone could not
// push, to be pushed at the next flush. Their files go once this process's
// own file holds their counts, so that a crash in between loses none.
func (z *zone) adoptUnpushed(u *unpushedCopy, now time.Time) {
	log := z.logger.Load().With(zap.String("zone", z.name), zap.String("counts", u.what))
	us, claims, err := u.files.takeOrphans(now)
	if err != nil {
		log.Error("counts another process could not push: unreadable", zap.String("dir", u.files.dir), zap.Error(err))
	}
	if len(us) > 0 {
		u.counter.AddUnpushed(us)
		if err := u.save(u.counter.Unpushed()); err != nil {
			log.Error("counts taken over from another process could not be kept on this host: a crash before the next flush would lose them", zap.Error(err))
		}
		log.Info("counts a stopped process could not push are counted again, and pushed at the next flush", zap.Int("keys", len(us)))
	}
	if err := dropClaims(claims); err != nil {
		log.Error("files of counts taken over are still on this host: another process may count them again", zap.Error(err))
	}
}

// mirrorUnpushed keeps the host's copy of the counts not yet pushed to
// storage up to date after each flush: written while storage fails, so a
// crash during an outage loses no more than one flush interval, and
// removed once they are pushed. A flush that failed after its pushes
// went through (an unlock, a read) leaves nothing to keep either: a copy
// kept would count them again.
func (z *zone) mirrorUnpushed(u *unpushedCopy, pushed bool) {
	var us []quota.Count
	if !pushed {
		us = u.counter.Unpushed()
	}
	if len(us) == 0 {
		z.dropUnpushed(u)
		return
	}
	if err := u.save(us); err != nil {
		z.logger.Load().Error("counts not pushed to storage could not be kept on this host either: a crash now would lose them",
			zap.String("zone", z.name), zap.String("counts", u.what), zap.Int("keys", len(us)), zap.Error(err))
	}
}

// keepWhileWaiting keeps the counts of u not yet pushed on the host when
// a push finds its storage lock held, before it waits, and again every
// flush interval until the returned function ends the wait, as
// mirrorUnpushed keeps them after a failed flush: Caddy's file storage
// looks at a held lock again once a second, so with several instances
// flushing often a push can wait longer than an interval, and a crash
// during the wait then still loses no more than one interval of counts.
// The flush's own mirrorUnpushed removes the copy once they are pushed.
func (z *zone) keepWhileWaiting(u *unpushedCopy) (waited func()) {
	z.mirrorUnpushed(u, false)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(z.pol.Load().flush)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				z.mirrorUnpushed(u, false)
			}
		}
	}()
	return func() {
		close(stop)
		<-stopped
	}
}

// keepUnpushed saves on this host the counts the final flush could not
// push (storage unreachable) and releases the file: the next process of
// the zone to look counts them again and pushes them. With nothing left
// to push, a copy an earlier flush kept goes.
func (z *zone) keepUnpushed(u *unpushedCopy) {
	log := z.logger.Load().With(zap.String("zone", z.name), zap.String("counts", u.what))
	us := u.counter.Unpushed()
	if len(us) == 0 {
		z.dropUnpushed(u)
		return
	}
	if err := u.save(us); err != nil {
		log.Error("counts not pushed to storage are lost: they could not be saved on this host either", zap.Int("keys", len(us)), zap.Error(err))
		return
	}
	u.files.release()
	log.Warn("counts not pushed to storage kept on this host until a process of the zone takes them over", zap.String("file", u.files.path()), zap.Int("keys", len(us)))
}
