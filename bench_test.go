package mcplimit

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// benchHandler provisions a handler on its own zone with file storage.
func benchHandler(b *testing.B, h *Handler) *Handler {
	return provisionForTest(b, h)
}

// provisionForTest compiles h and attaches it to a fresh zone on file
// storage, without a running Caddy.
func provisionForTest(b testing.TB, h *Handler) *Handler {
	b.Helper()
	pol, err := compile(h)
	if err != nil {
		b.Fatal(err)
	}
	z, err := newZone(&certmagic.FileStorage{Path: b.TempDir()}, pol, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = z.Destruct() })
	h.pol, h.zone, h.logger = pol, z, zap.NewNop()
	return h
}

// sink is a reusable response writer.
type sink struct {
	hdr    http.Header
	status int
}

func (s *sink) Header() http.Header         { return s.hdr }
func (s *sink) Write(p []byte) (int, error) { return len(p), nil }
func (s *sink) WriteHeader(code int)        { s.status = code }

// rewindBody is a request body that can be rewound without allocating.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// benchServe drives ServeHTTP with one reused request whose body is
// rewound every iteration; next reads and closes the body like
// reverse_proxy does.
func benchServe(b *testing.B, h *Handler, body []byte, token string, wantStatus int) {
	req := httptest.NewRequest(http.MethodPost, "http://bench/mcp", nil)
	req.Header.Set("Authorization", token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	w := &sink{hdr: http.Header{}}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
		w.WriteHeader(http.StatusOK)
		return nil
	})
	rd := new(rewindBody)
	serve := func() {
		rd.Reset(body)
		req.Body = rd
		req.ContentLength = int64(len(body))
		clear(w.hdr)
		if err := h.ServeHTTP(w, req, next); err != nil {
			b.Fatal(err)
		}
	}
	for range 3 { // proves the token, then spends the burst of a 1/h tenant
		serve()
	}
	if w.status != wantStatus {
		b.Fatalf("status %d, want %d", w.status, wantStatus)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		serve()
	}
}

// toolCall300 is a ~300-byte tools/call as the Go SDK sends it.
var toolCall300 = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_documents","arguments":{"query":"quarterly revenue by region for the last fiscal year","limit":25,"include_archived":false,"sort":"relevance"},"_meta":{"progressToken":"0c5d3a9e-7d1f-4b8a-9f2e-3c6b1a2d4e5f"}}}`)

func BenchmarkServeHTTPAdmitted(b *testing.B) {
	h := benchHandler(b, &Handler{
		Zone: "bench-admit", Preauth: &RateLimit{Rate: "1000000/s", Burst: 1000000},
		Tenant: &RateLimit{Rate: "1000000/s", Burst: 1000000}, Quota: &QuotaLimit{Day: 1 << 40},
		Global: &RateLimit{Rate: "1000000/s", Burst: 1000000},
	})
	benchServe(b, h, toolCall300, "Bearer valid-bench", http.StatusOK)
}

func BenchmarkServeHTTPRefused(b *testing.B) {
	h := benchHandler(b, &Handler{
		Zone: "bench-refuse", Preauth: &RateLimit{Rate: "1000000/s", Burst: 1000000},
		Tenant: &RateLimit{Rate: "1/h", Burst: 1}, Quota: &QuotaLimit{Off: true},
	})
	benchServe(b, h, toolCall300, "Bearer valid-bench", http.StatusTooManyRequests)
}
