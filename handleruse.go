package mcplimit

import (
	"sync"
	"sync/atomic"
)

// handlerUse counts a handler's calls in ServeHTTP (every request but a
// GET listen stream, see ServeHTTP), so that a handler
// cleaned up while some still run lets go of its zone only once the last
// has finished. Caddy unloads a config by stopping its servers without
// waiting for their requests and then cleaning its modules up: a zone
// that went at once would be flushed and gone while the backend still ran
// a call, and what the call's answer teaches (a caller proven, a count)
// would be lost.
type handlerUse struct {
	active  atomic.Int64
	cleaned atomic.Bool
	once    sync.Once
	letGo   func()
	// ended is called when a call of the cleaned-up handler ends and
	// others still run.
	ended func()
}

// enter counts a request in.
func (u *handlerUse) enter() { u.active.Add(1) }

// leave counts a request that entered out (when counted); the last one
// out of a cleaned-up handler lets go of the zone, off the request (the
// zone's going flushes), and the others call ended.
func (u *handlerUse) leave(counted bool) {
	if !counted {
		return
	}
	left := u.active.Add(-1)
	switch {
	case !u.cleaned.Load():
	case left == 0:
		go u.once.Do(u.letGo)
	default:
		u.ended()
	}
}

// cleanup marks the handler cleaned up, and lets go of the zone now when
// none of its requests runs.
func (u *handlerUse) cleanup() {
	u.cleaned.Store(true)
	if u.active.Load() == 0 {
		u.once.Do(u.letGo)
	}
}
