package mcplimit

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// unsetWatch is a placeholder of identity, the group key or a tier's
// match that Caddy does not answer itself (unknownPlaceholder). An
// earlier handler may set it for a request (a map's destination, an auth
// handler's, a plugin's), which a handler's provision cannot see. Where
// none does, it is empty, so that the identity reads it as empty, the
// request skips the group layer or does not match the tier, with nothing
// else to say so: the first request for which it is not set is warned
// about. Where one sets a placeholder outside http., an identity reads a
// value derived from the request (a map's), which the first request for
// which it is set is warned about; one under http. is warned about at
// start if it is such a value (see warnDerivedIdentity).
// Only the first unsetChecks requests are looked at: asking the replacer
// runs the handler that sets it (a map's regular expressions) again.
type unsetWatch struct {
	key, in, consequence string
	derived              bool // read by the identity, and derived where set
	unsetWarned          atomic.Bool
	setWarned            atomic.Bool  // set, in an identity: derived
	checks               atomic.Int64 // requests looked at
}

// unsetChecks is how many of a handler's requests a watch looks at.
const unsetChecks = 1024

// unsetWatches returns a watch for each placeholder of pol's identity,
// group key and tiers' match that is none of Caddy's own.
func unsetWatches(pol *policy) []*unsetWatch {
	var ws []*unsetWatch
	watch := func(text, consequence string, identity bool) {
		for key := range placeholderKeys(text) {
			if unknownPlaceholder(key) {
				derived := identity && !strings.HasPrefix(key, "http.")
				ws = append(ws, &unsetWatch{key: key, in: text, consequence: consequence, derived: derived})
			}
		}
	}
	for _, ph := range pol.identity {
		watch(ph, "the identity reads it as empty (a request with nothing else in it has no identity)", true)
	}
	watch(pol.groupKey, "they skip the group layer", false)
	for _, t := range pol.tiers {
		watch(t.placeholder, "tier "+t.name+" does not apply to them", false)
	}
	return ws
}

// warnUnsetPlaceholders logs, once per watch of the handler, a request
// for which no earlier handler set the watched placeholder, and, for one
// the identity reads as a derived value, a request for which one did.
func (h *Handler) warnUnsetPlaceholders(r *http.Request) {
	for _, w := range h.unset {
		if w.checks.Load() >= unsetChecks || w.unsetWarned.Load() && (!w.derived || w.setWarned.Load()) {
			continue
		}
		w.checks.Add(1)
		repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if repl == nil {
			return
		}
		_, set := repl.Get(w.key)
		switch {
		case !set && w.unsetWarned.CompareAndSwap(false, true):
			h.logger.Warn(unsetWarning(w.key)+": it is empty for such requests, so "+w.consequence,
				zap.String("zone", h.zone.name), zap.String("placeholder", "{"+w.key+"}"), zap.String("in", w.in))
		case set && w.derived && w.setWarned.CompareAndSwap(false, true):
			h.logger.Warn(derivedIdentityWarning, zap.String("zone", h.zone.name), zap.String("placeholder", "{"+w.key+"}"))
		}
	}
}

// unsetWarning says what the unset placeholder key is: one under http.
// that Caddy's HTTP server does not answer is a handler's or a typo of
// one it does; one outside is a map's or a plugin's, or a Caddyfile
// shorthand written in JSON.
func unsetWarning(key string) string {
	if strings.HasPrefix(key, "http.") {
		return "placeholder is none that Caddy's HTTP server answers itself (a typo, such as {http.request.headers.Authorization} for {http.request.header.Authorization}?) and no earlier handler (an auth handler, a matcher, a plugin) set it for a request"
	}
	return "placeholder is none of Caddy's own (in JSON, placeholders have their full names, such as {http.request.header.Authorization}) and no earlier handler (a map, a plugin) set it for a request"
}
