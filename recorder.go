package mcplimit

import (
	"errors"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// statusRecorder hands the status the next handler answers with to the
// decision as soon as it is written — before a streamed body (an SSE
// stream) ends — so the backend's verdict on a credential proves or
// forgets it at once, and frees the concurrency slots once an SSE answer
// holds every response (see callWatch). It passes everything through
// (flushing and hijacking via Unwrap).
type statusRecorder struct {
	caddyhttp.ResponseWriterWrapper
	d      *decision
	r      *http.Request // the request, whose replacer verdict reads
	status int
	// refusal marks an answer that a later mcp_ratelimit handler wrote
	// (a refusal), which says nothing about the credential.
	refusal bool
}

// WriteHeader implements http.ResponseWriter.
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.record(code)
	}
	s.ResponseWriterWrapper.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.record(http.StatusOK)
	}
	n, err := len(b), error(nil)
	if !s.d.clientLeft() { // else the call goes on without its client
		n, err = s.ResponseWriterWrapper.Write(b)
	}
	if s.d.watch.awaiting > 0 {
		if s.d.watch.feed(b[:n]) {
			s.d.finish()
		} else {
			s.d.answered(s.d.watch.takeCalls())
		}
	}
	return n, err
}

// ReadFrom implements io.ReaderFrom through Write, so that no answer
// escapes the recorder.
func (s *statusRecorder) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{s}, r)
}

// writerOnly hides every method of a writer but Write, so io.Copy uses it.
type writerOnly struct{ io.Writer }

// record takes the status of the answer as it starts.
func (s *statusRecorder) record(code int) {
	s.status = code
	if !s.refusal {
		s.heard(s.verdict(code), code)
	}
	s.d.hear()
	if !s.d.post || s.d.listens {
		// Only a POST's stream holds answers to the calls it carried: a
		// GET's is a listen stream (and so is a POST of listen requests),
		// and any other request has its answer once the status is
		// written. Its slots go now, so that a stream held open never
		// holds one (a GET may carry a metered body, and either costs 1
		// under meter *).
		s.d.finish()
		return
	}
	s.d.watch.start(s.d, s.Header())
}

// learnError learns from err, what the next handler returned, the status
// of an answer it left to Caddy to write: basic_auth's 401, the error
// directive, a reverse_proxy handle_response route's error write nothing
// through the recorder, and Caddy (or handle_errors) writes the status
// after this handler returns. A rejecting status forgets the identity as
// a written one does, or a revoked credential would keep its tenant
// budget for as long as it kept trying. An error's 2xx proves nothing.
func (s *statusRecorder) learnError(err error) {
	if err == nil {
		return // before he, which errors.As moves to the heap
	}
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) || he.StatusCode < 300 {
		return
	}
	s.heard(he.StatusCode, he.StatusCode)
}

// heard takes verdict, the backend's status, as its answer starting with
// code: it proves, forgets or counts throttling (see learn), and the
// backend's own throttling passes through untouched, without this
// handler's RateLimit values.
func (s *statusRecorder) heard(verdict, code int) {
	s.d.learn(verdict)
	if s.d.chargedNext {
		s.d.describeCharged(s.Header())
	}
	if code == http.StatusTooManyRequests {
		s.d.withdrawRateLimit(s.Header())
	}
}

// verdict is the backend's status for an answer that starts with code. A
// 2xx written by reverse_proxy's handle_response routes may stand for a
// rejection (a 401 turned into a 200 carrying a JSON-RPC error, which the
// SDKs read where they drop a 401's body): reverse_proxy sets the status
// the backend sent as {http.reverse_proxy.status_code} before those run,
// and that is the verdict on the credential. The intercept handler does
// the same for any handler's answer ({http.intercept.status_code}), one
// that is no reverse_proxy included. Only a 2xx to an unproven
// identity is looked behind, the answer that would prove it: an error
// status written over a backend's 2xx is no acceptance, and looking
// behind every proven identity's 2xx would cost every call a walk of the
// replacer. (A value left by an earlier handler, forward_auth's, is a
// 2xx: a request it rejects never gets here.)
func (s *statusRecorder) verdict(code int) int {
	if code < 200 || code >= 300 || !s.d.hasID || s.d.proven {
		return code
	}
	repl, _ := s.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return code
	}
	for _, name := range [...]string{"http.reverse_proxy.status_code", "http.intercept.status_code"} {
		if v, ok := repl.Get(name); ok {
			if upstream, ok := v.(int); ok && upstream >= 100 {
				return upstream
			}
		}
	}
	return code
}

// markRefusal tells every mcp_ratelimit handler earlier in the chain, whose
// status recorders w wraps, that the answer about to be written is a
// refusal of ours, not the backend's verdict: it neither proves nor
// forgets a credential (a 200 under refuse_with jsonrpc would prove one),
// nor counts as upstream throttling.
func markRefusal(w http.ResponseWriter) {
	for {
		if rec, ok := w.(*statusRecorder); ok {
			rec.refusal = true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}
