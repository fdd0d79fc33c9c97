package demo

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("mcp_demo", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := new(Handler)
		err := m.UnmarshalCaddyfile(h.Dispenser)
		return m, err
	})
	httpcaddyfile.RegisterDirectiveOrder("mcp_demo", httpcaddyfile.After, "reverse_proxy")
}

// Handler serves the demo MCP backend from inside Caddy, so the demo needs
// a single process. It is a terminal handler.
type Handler struct {
	// Transport is `streamable` (default) or `sse` (legacy HTTP+SSE).
	Transport string `json:"transport,omitempty"`

	h http.Handler
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.mcp_demo", New: func() caddy.Module { return new(Handler) }}
}

// Provision builds the backend.
func (h *Handler) Provision(caddy.Context) error {
	b := New()
	if h.Transport == "sse" {
		h.h = b.SSEHandler()
	} else {
		h.h = b.Handler()
	}
	return nil
}

// ServeHTTP serves MCP.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h.h.ServeHTTP(w, r)
	return nil
}

// UnmarshalCaddyfile parses `mcp_demo [streamable|sse]`.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		h.Transport = d.Val()
		if h.Transport != "streamable" && h.Transport != "sse" {
			return d.Errf("mcp_demo: transport %q: want streamable or sse", h.Transport)
		}
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
