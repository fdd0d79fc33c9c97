package buckets

import "time"

// Reservation records tokens taken by a successful [Set.Reserve], so that they
// can be given back. It is a small value; copy it freely, but cancel it at most
// once. The zero value reserves nothing, and cancelling it does nothing.
type Reservation struct {
	owner canceler
	seq   uint64
	n     int
	idx   int32
	left  float64
}

// Left returns the tokens the bucket held right after the reservation, so
// that RateLimit headers need no second lookup.
func (r Reservation) Left() float64 { return r.left }

// canceler is the shard that holds a reservation's bucket.
type canceler interface {
	cancel(idx int32, seq uint64, n int, now time.Time)
}

// Cancel gives the reserved tokens back to the bucket at now, up to its burst.
//
// Unlike [rate.Reservation.CancelAt], which restores nothing once the
// reservation's time has passed, this adds the tokens back whenever it is
// called. For the most recent reservation of the bucket the result is exactly
// the level the bucket would have had without it. For an older one it can be
// higher, when the bucket came within n tokens of full meanwhile, but by no
// more than the tokens the bucket took in (by refill or other cancellations)
// since the reservation; cancelling right after reserving, as all-or-nothing
// admission does, makes that negligible.
//
// If the bucket has been dropped since (it had refilled completely, or the
// key went to a Rate of rate.Inf), there is nothing to give back and Cancel
// does nothing; it never credits a newer bucket of the same key.
func (r Reservation) Cancel(now time.Time) {
	if r.owner != nil {
		r.owner.cancel(r.idx, r.seq, r.n, now)
	}
}

func (sh *shard[K]) reservation(idx int32, n int) Reservation {
	b := &sh.slab[idx]
	return Reservation{owner: sh, seq: b.seq, n: n, idx: idx, left: b.tokens}
}

func (sh *shard[K]) cancel(idx int32, seq uint64, n int, now time.Time) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if int(idx) < len(sh.slab) && sh.slab[idx].seq == seq {
		sh.slab[idx].give(n, sh.clock.Since(now))
	}
}

// Compensate returns a Reservation whose Cancel calls undo: for a charge
// made elsewhere (an external store) that an all-or-nothing admission
// must be able to take back like a bucket's tokens.
func Compensate(undo func(now time.Time)) Reservation {
	return Reservation{owner: undoFunc(undo)}
}

// undoFunc is the canceler of Compensate.
type undoFunc func(now time.Time)

func (f undoFunc) cancel(_ int32, _ uint64, _ int, now time.Time) { f(now) }
