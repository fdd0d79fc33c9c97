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
// what the error routes forward.
func (d *decision) holdThroughErrorRoutes(r *http.Request) {
	if !d.concAll && !d.concID && d.inflight == 0 {
		return
	}
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Errors == nil || len(srv.Errors.Routes) == 0 {
		return
	}
	held := heldSlots{z: d.z, fp: d.fp, n: d.concN, all: d.concAll, id: d.concID, inflight: d.inflight}
	d.concAll, d.concID, d.inflight = false, false, 0
	context.AfterFunc(r.Context(), held.free)
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
func (s heldSlots) free() {
	if s.all {
		s.z.all.Release(globalKey, s.n)
	}
	if s.inflight > 0 {
		s.z.metrics.inflightAdd(-s.inflight)
	}
	if s.id {
		s.z.perID.Release(s.fp, s.n)
	}
}
