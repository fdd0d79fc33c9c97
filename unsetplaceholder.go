package mcplimit

import (
	"net/http"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// unsetWatch is a placeholder of identity, the group key or a tier's
// match that is none of Caddy's own (unknownPlaceholder). An earlier
// handler may set it for a request (a map's destination, a plugin's),
// which a handler's provision cannot see; where none does, it is empty,
// so that the request has no identity, skips the group layer or does not
// match the tier, with nothing else to say so. The first request for
// which it is not set is warned about.
type unsetWatch struct {
	key, in, consequence string
	warned               atomic.Bool
}

// unsetWatches returns a watch for each placeholder of pol's identity,
// group key and tiers' match that is none of Caddy's own.
func unsetWatches(pol *policy) []*unsetWatch {
	var ws []*unsetWatch
	watch := func(text, consequence string) {
		for key := range placeholderKeys(text) {
			if unknownPlaceholder(key) {
				ws = append(ws, &unsetWatch{key: key, in: text, consequence: consequence})
			}
		}
	}
	for _, ph := range pol.identity {
		watch(ph, "they have no identity")
	}
	watch(pol.groupKey, "they skip the group layer")
	for _, t := range pol.tiers {
		watch(t.placeholder, "tier "+t.name+" does not apply to them")
	}
	return ws
}

// warnUnsetPlaceholders logs, once per watch of the handler, a request
// for which no earlier handler set the watched placeholder.
func (h *Handler) warnUnsetPlaceholders(r *http.Request) {
	for _, w := range h.unset {
		if w.warned.Load() {
			continue
		}
		repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if repl == nil {
			return
		}
		if _, ok := repl.Get(w.key); !ok && w.warned.CompareAndSwap(false, true) {
			h.logger.Warn("placeholder is none of Caddy's own (in JSON, placeholders have their full names, such as {http.request.header.Authorization}) and no earlier handler (a map, a plugin) set it for a request: it is empty for such requests, so "+w.consequence,
				zap.String("zone", h.zone.name), zap.String("placeholder", "{"+w.key+"}"), zap.String("in", w.in))
		}
	}
}
