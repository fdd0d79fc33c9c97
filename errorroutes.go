package mcplimit

import (
	"context"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// holdThroughErrorRoutes keeps the concurrency slots of a request whose
// next handler returned an error, and its calls in the in-flight gauge,
// until the request ends, when the server has error routes: Caddy runs
// them (handle_errors) after this handler returns, and they may send the
// call on to another backend, a fallback, where it runs as a call in
// flight. Freed at the handler's return, they would let any number of
// calls run there at once. The request's context ends once the server
// has written its answer, or with the client's leaving, which also ends
// what the error routes forward. A handler of the zone in the error
// routes finds the request marked (see heldByErrorRoute): the call holds
// its slots already.
func (d *decision) holdThroughErrorRoutes(r *http.Request) {
	if !d.concAll && !d.concID && d.inflight == 0 {
		return
	}
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Errors == nil || len(srv.Errors.Routes) == 0 {
		return
	}
	held := &heldSlots{z: d.z, fp: d.fp, n: d.concN, all: d.concAll, id: d.concID, inflight: d.inflight}
	d.concAll, d.concID, d.inflight = false, false, 0
	d.z.errorHolds.Add(1)
	caddyhttp.SetVar(r.Context(), d.z.heldVar, held)
	context.AfterFunc(r.Context(), held.free)
}

// heldByErrorRoute reports whether r is a request of d's zone whose
// slots are held through the error routes now running it: a handler of
// the zone there takes none again (the call would be refused for the
// slots it holds itself), and counts no calls in flight again.
func (d *decision) heldByErrorRoute(r *http.Request) bool {
	if d.z.errorHolds.Load() == 0 {
		return false
	}
	_, held := caddyhttp.GetVar(r.Context(), d.z.heldVar).(*heldSlots)
	return held
}

// heldSlots are the slots and in-flight calls of a request that the
// decision, given back to its pool, no longer holds.
type heldSlots struct {
	z        *zone
	fp       [16]byte
	n        int
	all, id  bool
	inflight int64
}

// free gives the slots back and takes the calls out of the gauge, as
// decision.finish does.
func (s *heldSlots) free() {
	s.z.errorHolds.Add(-1)
	s.z.releaseSlots(&s.fp, s.n, s.all, s.id, s.inflight)
}
