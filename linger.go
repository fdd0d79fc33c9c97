package mcplimit

import (
	"io"
	"net/http"
	"time"
)

// lingerWait bounds how long the rest of a refused body is read and
// dropped once its refusal is sent, and lingerMax how much of it is.
const (
	lingerWait = 2 * time.Second
	lingerMax  = 64 << 20
)

// startLinger is called on refusing a body that is left unread, in part
// (over max_body) or whole (a content coding or charset not read), once
// pre-auth has let the request in. Over HTTP/1 the rest of the body is
// then read and dropped after the refusal is sent (lingerOn), as nginx's
// lingering close does: a client that writes its whole body before it
// reads the answer (Python's requests; any client while the server has
// stopped reading) otherwise meets the connection's reset when the server
// closes it with the body still arriving, and its kernel drops the answer
// it had received, so it sees a reset instead of its 413 or 415. (HTTP/2
// ends the stream alone, and the client reads its answer.) The refusal
// says Connection: close: net/http then sends it without first reading up
// to 256 KiB of the body itself, and what the client has not sent by the
// end of the wait is never read as a next request. Otherwise the deadline
// passes now: the server reads no more of the body and does not wait for
// it.
func (d *decision) startLinger(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 && setReadDeadline(w, time.Now().Add(lingerWait)) {
		d.linger = true
		return
	}
	setReadDeadline(w, time.Now())
}

// lingerOn sends the refusal written to w, then reads and drops what is
// left of r's body, for at most lingerWait and lingerMax. A body whose end
// it has not seen by then is left unread, and the connection closes, as
// the refusal said it would.
func lingerOn(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).Flush()
	_, _ = io.CopyN(io.Discard, r.Body, lingerMax)
}
