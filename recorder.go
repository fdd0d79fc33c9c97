package mcplimit

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// statusRecorder hands the status the next handler answers with to the
// decision as soon as it is written — before a streamed body (an SSE
// stream) ends — so the backend's verdict on a credential proves or
// forgets it at once. It passes everything through (flushing and
// hijacking via Unwrap).
type statusRecorder struct {
	caddyhttp.ResponseWriterWrapper
	d      *decision
	status int
}

// WriteHeader implements http.ResponseWriter.
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
		s.d.learn(code)
	}
	s.ResponseWriterWrapper.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
		s.d.learn(http.StatusOK)
	}
	return s.ResponseWriterWrapper.Write(b)
}
