package mcplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// With every request metered (`*`) and a concurrency cap, a request that
// carries no JSON-RPC body (a GET's listen stream) takes a slot but has no
// calls to watch: it is served, not a panic.
func TestUnparsedRequestUnderConcurrencyIsServed(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			h := provisionForTest(t, &Handler{Zone: "conc-unparsed-" + method, Meter: []string{"*"},
				Preauth: &RateLimit{Rate: "100/s", Burst: 100}, Concurrency: &Concurrency{Max: 5}})
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
				w.WriteHeader(http.StatusOK)
				return nil
			})
			req := httptest.NewRequest(method, "/mcp", nil)
			req.Header.Set("Authorization", "Bearer someone")
			w := httptest.NewRecorder()
			if err := h.ServeHTTP(w, req, next); err != nil || w.Code != http.StatusOK {
				t.Fatalf("%s under concurrency: %d %v %s, want it served", method, w.Code, err, w.Body)
			}
		})
	}
}
