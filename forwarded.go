package mcplimit

import (
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// forwardedKey names a Caddy server and the trusted-proxy settings it
// serves with. A zone says what it has to say about X-Forwarded-For once
// per server and settings: servers are known by name, which a reload
// keeps, so a reload does not warn again, but one that changes the
// settings has its own say.
type forwardedKey struct {
	server         string
	trusts, strict bool   // trusted_proxies set; trusted_proxies_strict set
	headers        string // client_ip_headers, joined by ", "
}

// forwardedState is what a zone said about X-Forwarded-For under one
// forwardedKey: done once it warned, or has nothing to warn of.
type forwardedState struct {
	key     forwardedKey
	headers []string // key.headers, one name each
	done    atomic.Bool
}

// forwardedState returns the zone's forwardedState for the server serving
// r, which is h's: a handler belongs to one server. Provision took it when
// Caddy provisioned the handler in its server (see noteServer).
func (h *Handler) forwardedState(r *http.Request) *forwardedState {
	if st := h.forwarded.Load(); st != nil {
		return st
	}
	var key forwardedKey
	if srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); srv != nil {
		key = forwardedKeyOf(srv)
	}
	st := h.zone.forwardedState(key)
	h.forwarded.Store(st)
	return st
}

// noteServer takes the zone's forwardedState for srv, the server h is
// provisioned in, as the config loads: a reload to other trusted-proxy
// settings and back has its say again even when no request came between.
func (h *Handler) noteServer(srv *caddyhttp.Server) {
	h.forwarded.Store(h.zone.forwardedState(forwardedKeyOf(srv)))
}

// forwardedKeyOf is the forwardedKey of srv.
func forwardedKeyOf(srv *caddyhttp.Server) forwardedKey {
	return forwardedKey{server: srv.Name(), trusts: trustsProxies(srv), strict: srv.TrustedProxiesStrict != 0, headers: strings.Join(srv.ClientIPHeaders, ", ")}
}

// forwardedState returns the zone's forwardedState under key, a fresh one
// when the server's settings are not those the zone last saw for it.
func (z *zone) forwardedState(key forwardedKey) *forwardedState {
	fresh := &forwardedState{key: key}
	if key.headers != "" {
		fresh.headers = strings.Split(key.headers, ", ")
	}
	// Strict trusted proxies read the rightmost untrusted address, which no
	// client behind them chooses: nothing to warn of.
	fresh.done.Store(key.trusts && key.strict)
	for {
		v, loaded := z.forwarded.LoadOrStore(key.server, fresh)
		st := v.(*forwardedState)
		if !loaded || st.key == key {
			return st
		}
		// A reload changed the server's settings: the new ones have their
		// own say, also when they are ones it had before.
		if z.forwarded.CompareAndSwap(key.server, st, fresh) {
			return fresh
		}
	}
}

// warnForwardedFor logs, once per zone, server and trusted-proxy settings,
// that a request carries X-Forwarded-For while the server trusts no proxy,
// so the header is ignored and the connection address is used; or, for a
// request from a trusted proxy carrying one of the server's client IP
// headers, that trusted_proxies_strict is not set, so Caddy takes the
// leftmost address, which a client behind an appending proxy writes.
func (h *Handler) warnForwardedFor(r *http.Request) {
	if st := h.forwarded.Load(); st != nil && st.done.Load() {
		return // all said: no header lookup per request
	}
	st := h.forwardedState(r)
	if !st.key.trusts {
		if len(r.Header["X-Forwarded-For"]) > 0 && st.done.CompareAndSwap(false, true) {
			h.logger.Warn("request carries X-Forwarded-For but the server trusts no proxy: limiting by the connection address (set trusted_proxies in the server options if a proxy fronts Caddy)",
				zap.String("zone", h.zone.name))
		}
		return
	}
	// From a trusted proxy, Caddy takes the leftmost address unless
	// trusted_proxies_strict is set: behind a proxy that appends to what
	// the client sent, the client picks its own address.
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	if trusted && carriesAny(r.Header, st.headers) && st.done.CompareAndSwap(false, true) {
		h.logger.Warn("trusted_proxies is set without trusted_proxies_strict: Caddy takes the leftmost address of the client IP headers, which a client behind a proxy that appends to them chooses itself, and with it its own pre-auth budget; set trusted_proxies_strict unless the proxy replaces them",
			zap.String("zone", h.zone.name), zap.String("client_ip_headers", st.key.headers))
	}
}

// carriesAny reports whether hdr has a value for one of names.
func carriesAny(hdr http.Header, names []string) bool {
	for _, name := range names {
		if len(hdr.Values(name)) > 0 {
			return true
		}
	}
	return false
}

// trustsProxies reports whether srv has trusted_proxies or
// trusted_proxies_unix configured. Caddy keeps the loaded source in an
// unexported field once provisioned (TrustedProxiesRaw is cleared then),
// so its presence is read by reflection, once per handler.
func trustsProxies(srv *caddyhttp.Server) bool {
	if len(srv.TrustedProxiesRaw) > 0 || srv.TrustedProxiesUnix {
		return true
	}
	f := reflect.ValueOf(srv).Elem().FieldByName("trustedProxies")
	return f.IsValid() && f.Kind() == reflect.Interface && !f.IsNil()
}
