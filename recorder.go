package mcplimit

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// statusRecorder remembers the status the next handler answered with,
// so the backend's verdict on a credential can prove or forget it. It
// passes everything through (flushing and hijacking via Unwrap).
type statusRecorder struct {
	*caddyhttp.ResponseWriterWrapper
	status int
}

func newStatusRecorder(w http.ResponseWriter) *statusRecorder {
	return &statusRecorder{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
}

// WriteHeader implements http.ResponseWriter.
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriterWrapper.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriterWrapper.Write(b)
}
