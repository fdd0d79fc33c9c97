package mcplimit

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestConcurrencySlotIsReleasedWhenTheNextHandlerPanics(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "panic-release", Concurrency: &Concurrency{Max: 1, PerIdentity: 1},
		Quota: &QuotaLimit{Off: true}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	panicking := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { panic("backend handler bug") })
	serve := func(next caddyhttp.Handler) (status int, panicked bool) {
		req := httptest.NewRequest(http.MethodPost, "http://test/mcp",
			bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)))
		req.Header.Set("Authorization", "Bearer valid-panic")
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
		w := httptest.NewRecorder()
		defer func() {
			if recover() != nil {
				panicked = true
			}
		}()
		_ = h.ServeHTTP(w, req, next)
		return w.Code, false
	}
	if _, panicked := serve(panicking); !panicked {
		t.Fatal("the panic did not propagate")
	}
	if n := h.zone.metrics.inflightN.Load(); n != 0 {
		t.Fatalf("%d calls still counted in flight after the panic", n)
	}
	ok := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if status, _ := serve(ok); status != http.StatusOK {
		t.Fatalf("the slot held by the panicked call was not released: status %d", status)
	}
}
