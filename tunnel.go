package mcplimit

import "net/http"

// tunnelRefused is the refusal of a request asking for a tunnel.
const tunnelRefused = "Protocol upgrades (WebSocket, h2c) and CONNECT tunnels are not accepted here: calls sent through a tunnel could not be rate limited. Send each call as its own HTTP request."

// tunnels reports whether r asks for a tunnel: a protocol upgrade (the
// Connection header lists "upgrade", as for WebSocket or h2c) or a
// CONNECT (WebSocket over HTTP/2 and HTTP/3 included). Once the backend
// agrees, reverse_proxy copies bytes both ways, and no message sent
// through it is seen, let alone counted.
func tunnels(r *http.Request) bool {
	return r.Method == http.MethodConnect || connectionNames(r, "Upgrade")
}
