package mcplimit

import (
	"net/http"
	"time"
)

// setReadDeadline sets the read deadline of w's connection (of its stream,
// on HTTP/2) and reports whether it could. It walks w's Unwrap chain as
// http.ResponseController does, without the allocation a controller costs
// every metered request.
func setReadDeadline(w http.ResponseWriter, t time.Time) bool {
	for {
		switch u := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return u.SetReadDeadline(t) == nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = u.Unwrap()
		default:
			return false
		}
	}
}

// bodyWait is how long a metered body may take to arrive: 5s, plus a
// second per 64 KiB the body may hold (21s for the default 1 MiB).
func bodyWait(maxBody int64) time.Duration {
	return 5*time.Second + time.Duration(maxBody/(64<<10))*time.Second
}
