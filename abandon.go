package mcplimit

import (
	"context"
	"net/http"
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
// to run any number of calls at once.
func (d *decision) detach(r *http.Request) *http.Request {
	if !d.concAll && !d.concID {
		return r
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(r.Context(), func() { time.AfterFunc(abandonedCallHold, cancel) })
	d.undetach = func() {
		stop()
		cancel()
	}
	return r.WithContext(ctx)
}
