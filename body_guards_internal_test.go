package mcplimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// peekIDs waits for a body only as long as it can bound the wait: through
// a writer that cannot set a read deadline it reads nothing, so a body
// that never arrives does not hold the refusal, which echoes id null.
func TestPeekIDsReadsNothingWhenItCannotBoundTheWait(t *testing.T) {
	pr, pw := io.Pipe() // a body of 10 bytes announced, none sent
	t.Cleanup(func() { _ = pw.Close() })
	r := httptest.NewRequest(http.MethodPost, "/mcp", pr)
	r.ContentLength = 10
	d := &decision{}
	done := make(chan struct{})
	go func() {
		d.peekIDs(httptest.NewRecorder(), r) // a recorder has no read deadline
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("peekIDs waited for a body whose wait it could not bound")
	}
	if !d.unread || d.body != nil {
		t.Fatalf("unread %v, body %v: want the body left unread", d.unread, d.body)
	}
}

// A UTF-8 charset is not foreign however it is quoted or followed: in
// single quotes (where RFC 2231's reading finds nothing after the second
// quote), or ending at a comma of a folded field.
func TestForeignCharsetPassesUTF8InEveryNotation(t *testing.T) {
	for _, ct := range []string{
		"application/json; charset='utf-8'",
		"application/json; charset=utf-8, application/json",
	} {
		if got, foreign := foreignCharset([]string{ct}); foreign {
			t.Errorf("foreignCharset(%q) = %q, foreign; want UTF-8 accepted", ct, got)
		}
	}
}
