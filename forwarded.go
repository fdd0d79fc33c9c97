package mcplimit

import (
	"net/http"
	"reflect"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// forwardedState is what a zone said about X-Forwarded-For on one Caddy
// server. Each server has trusted proxies of its own, so a zone that two
// servers use warns for each as its configuration calls for; servers are
// known by name, which a reload keeps, so a reload does not warn again.
type forwardedState struct {
	// warned says the zone warned of X-Forwarded-For from an untrusted
	// client, or need not; strictChecked that it checked
	// trusted_proxies_strict on a request from a trusted proxy, or need
	// not.
	warned, strictChecked atomic.Bool
}

// forwardedState returns the zone's forwardedState for the server
// serving r, which is h's: a handler belongs to one server.
func (h *Handler) forwardedState(r *http.Request) *forwardedState {
	if st := h.forwarded.Load(); st != nil {
		return st
	}
	name := ""
	if srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); srv != nil {
		name = srv.Name()
	}
	v, _ := h.zone.forwarded.LoadOrStore(name, new(forwardedState))
	st := v.(*forwardedState)
	h.forwarded.Store(st)
	return st
}

// warnForwardedFor logs, once per zone and server, that a request carries
// X-Forwarded-For while the server trusts no proxy, so the header is
// ignored and the connection address is used; or, for a request from a
// trusted proxy, that trusted_proxies_strict is not set, so Caddy takes
// the leftmost address, which a client behind an appending proxy writes.
func (h *Handler) warnForwardedFor(r *http.Request) {
	if st := h.forwarded.Load(); st != nil && st.strictChecked.Load() {
		return // all said: no header lookup per request
	}
	if len(r.Header["X-Forwarded-For"]) == 0 {
		return
	}
	st := h.forwardedState(r)
	if st.strictChecked.Load() {
		return
	}
	z := h.zone
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); trusted {
		// From a trusted proxy, Caddy takes the leftmost address unless
		// trusted_proxies_strict is set: behind a proxy that appends to
		// what the client sent, the client picks its own address.
		st.warned.Store(true)
		srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
		if st.strictChecked.CompareAndSwap(false, true) && srv != nil && srv.TrustedProxiesStrict == 0 {
			h.logger.Warn("trusted_proxies is set without trusted_proxies_strict: Caddy takes the leftmost X-Forwarded-For address, which a client behind a proxy that appends to the header chooses itself, and with it its own pre-auth budget; set trusted_proxies_strict unless the proxy replaces the header",
				zap.String("zone", z.name))
		}
		return
	}
	if st.warned.Load() {
		return
	}
	if trustsProxies(r) {
		st.warned.Store(true) // the proxies are trusted: the case is the one above
		return
	}
	if st.warned.CompareAndSwap(false, true) {
		st.strictChecked.Store(true) // no proxy trusted: nothing else to say
		h.logger.Warn("request carries X-Forwarded-For but the server trusts no proxy: limiting by the connection address (set trusted_proxies in the server options if a proxy fronts Caddy)",
			zap.String("zone", z.name))
	}
}

// trustsProxies reports whether the serving Caddy server has
// trusted_proxies configured. A request from a trusted proxy says so in
// the trusted_proxy var; for others, Caddy keeps the loaded source in an
// unexported field once provisioned (TrustedProxiesRaw is cleared then),
// so its presence is read by reflection. This runs at most until the one
// warning is logged.
func trustsProxies(r *http.Request) bool {
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); trusted {
		return true
	}
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return false
	}
	if len(srv.TrustedProxiesRaw) > 0 {
		return true
	}
	f := reflect.ValueOf(srv).Elem().FieldByName("trustedProxies")
	return f.IsValid() && f.Kind() == reflect.Interface && !f.IsNil()
}
