package mcplimit

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// abandonedCallHold bounds how long a call whose client has left keeps
// its concurrency slots while the backend may still run it (a variable so
// tests can shorten it).
var abandonedCallHold = time.Minute

// detach returns r under a context that the client's leaving cancels
// only abandonedCallHold later, when d holds concurrency slots. Backends
// (the Go SDK's among them) run a tool call to its end whether or not its
// caller is still there: a call stays in flight, and keeps its slots,
// until the backend answers it, or a caller could hang up and call again
// to run any number of calls at once. Once the client has left, what the
// backend sends is dropped (see clientLeft): a failed write would make
// reverse_proxy give the call up at the backend's next message. Once the
// slots are freed (see finish), nothing is held: the client's leaving
// ends the request again, at once.
func (d *decision) detach(r *http.Request) *http.Request {
	if !d.concAll && !d.concID {
		return r
	}
	client := r.Context()
	d.client = client
	ctx, cancel := context.WithCancel(context.WithoutCancel(client))
	var hold atomic.Pointer[time.Timer]
	var freed atomic.Bool
	stop := context.AfterFunc(client, func() {
		if freed.Load() {
			cancel()
			return
		}
		hold.Store(time.AfterFunc(abandonedCallHold, cancel))
	})
	d.letGo = func() {
		freed.Store(true)
		if client.Err() != nil {
			cancel()
		}
	}
	d.undetach = func() {
		stop()
		if t := hold.Load(); t != nil {
			t.Stop()
		}
		cancel()
	}
	return r.WithContext(ctx)
}

// clientLeft reports whether the client of a detached call has gone.
func (d *decision) clientLeft() bool {
	return d.client != nil && d.client.Err() != nil
}
