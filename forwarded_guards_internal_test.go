package mcplimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// xffHandler returns a handler under the server settings key, and the
// warnings it logs.
func xffHandler(t *testing.T, zone string, key forwardedKey) (*Handler, *observer.ObservedLogs) {
	t.Helper()
	h := provisionForTest(t, &Handler{Zone: zone, Preauth: &RateLimit{Rate: "100/s", Burst: 100}})
	core, logs := observer.New(zap.WarnLevel)
	h.logger = zap.New(core)
	h.forwarded.Store(h.zone.forwardedState(key))
	return h, logs
}

// xffRequest is a prepared request with the given headers, from a trusted
// proxy when trusted is set.
func xffRequest(trusted bool, hdr ...string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://test/mcp", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	caddyhttp.SetVar(req.Context(), caddyhttp.TrustedProxyVarKey, trusted)
	return req
}

// warned returns the messages logged.
func warned(logs *observer.ObservedLogs) (msgs []string) {
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
	}
	return msgs
}

// A server that trusts no proxy warns of X-Forwarded-For only once a
// request carries it, and trusted_proxies_strict without trusted_proxies
// trusts no proxy all the same.
func TestForwardedForWarningWaitsForTheHeader(t *testing.T) {
	for name, key := range map[string]forwardedKey{
		"no_proxy":               {server: "srv0"},
		"strict_without_proxies": {server: "srv0", strict: true},
	} {
		t.Run(name, func(t *testing.T) {
			h, logs := xffHandler(t, "xff-wait-"+name, key)
			h.warnForwardedFor(xffRequest(false))
			if msgs := warned(logs); len(msgs) != 0 {
				t.Fatalf("warned of a request without X-Forwarded-For: %q", msgs)
			}
			h.warnForwardedFor(xffRequest(false, "X-Forwarded-For", "203.0.113.1"))
			h.warnForwardedFor(xffRequest(false, "X-Forwarded-For", "203.0.113.2"))
			if msgs := warned(logs); len(msgs) != 1 || !strings.Contains(msgs[0], "trusts no proxy") {
				t.Fatalf("warnings %q, want one that the server trusts no proxy", msgs)
			}
		})
	}
}
