package mcplimit

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// abandonedCallHold bounds how long a call whose client has left is held
// while the backend may still run it (a variable so tests can shorten it).
var abandonedCallHold = time.Minute

// detach returns r under a context that the client's leaving cancels only
// abandonedCallHold later, when d holds concurrency slots or awaits the
// backend's verdict on an unproven identity (see awaitsVerdict). Backends
// (the Go SDK's among them) run a tool call to its end whether or not its
// caller is still there: a call stays in flight, and keeps its slots,
// until the backend answers it, or a caller could hang up and call again
// to run any number of calls at once; and the backend's 2xx is what
// proves an unproven identity or counts its call (see learn), or a valid
// key could hang up on every call to run them uncounted. Once the client
// has left, what the backend sends is dropped (see clientLeft): a failed
// write would make reverse_proxy give the call up at the backend's next
// message. Once the slots are freed (see finish) and the verdict is
// heard (see statusRecorder.record), nothing is held: the client's
// leaving ends the request again, at once.
func (d *decision) detach(r *http.Request) *http.Request {
	slots, verdict := d.concAll || d.concID, d.awaitsVerdict()
	if !slots && !verdict {
		return r
	}
	client := r.Context()
	d.client = client
	ctx, cancel := context.WithCancel(context.WithoutCancel(client))
	var holds atomic.Int32 // what the request is held for: slots, a verdict
	release := func() {
		if holds.Add(-1) == 0 && client.Err() != nil {
			cancel()
		}
	}
	if slots {
		holds.Add(1)
		d.letGo = release
	}
	if verdict {
		holds.Add(1)
		d.heard, d.awaiting = release, ctx
	}
	var hold atomic.Pointer[time.Timer]
	stop := context.AfterFunc(client, func() {
		if holds.Load() == 0 {
			cancel()
			return
		}
		hold.Store(time.AfterFunc(abandonedCallHold, cancel))
	})
	d.undetach = func() {
		stop()
		if t := hold.Load(); t != nil {
			t.Stop()
		}
		cancel()
	}
	return r.WithContext(ctx)
}

// hear tells detach that the status just written is the backend's
// verdict, when it awaits one. While it does, only the hold's running out
// ends the request's context (see detach): a status written after that is
// reverse_proxy's 499 for a request whose context ended, not the
// backend's, and leaves the verdict unheard.
func (d *decision) hear() {
	if d.heard == nil || d.awaiting.Err() != nil {
		return
	}
	d.heard()
	d.heard = nil
}

// unheard charges an unproven identity's call whose verdict detach gave
// up waiting for, its client gone: the backend may run it still, as it
// runs any call to its end, and its 2xx would have counted it, so it is
// charged as a call answered without proof is (see learn), or a valid key
// could run calls the backend takes over abandonedCallHold uncounted by
// hanging up on each. A request that ended otherwise without a verdict
// (the backend failed: no status of its own) is not charged.
func (d *decision) unheard() {
	if d.heard == nil || d.awaiting.Err() == nil {
		return
	}
	d.heard = nil
	d.chargeUnproven()
}

// awaitsVerdict reports whether the backend's answer to the request is
// still to decide what it is charged: an unproven identity's request
// that costs something, which a 2xx proves or counts (see learn).
func (d *decision) awaitsVerdict() bool {
	return d.hasID && !d.proven && !d.answeredBlind && d.cost > 0
}

// clientLeft reports whether the client of a detached call has gone.
func (d *decision) clientLeft() bool {
	return d.client != nil && d.client.Err() != nil
}
