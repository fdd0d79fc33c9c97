package mcplimit_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A protocol upgrade (WebSocket) or a CONNECT turns the request into a
// tunnel that reverse_proxy copies both ways once the backend agrees:
// every call sent through it would reach the backend uncounted, a quota
// used up or not. Such requests are refused before the backend sees them.
func TestTunnelsAreRefused(t *testing.T) {
	var tunnels atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect && r.Header.Get("Upgrade") == "" {
			w.WriteHeader(http.StatusOK)
			return
		}
		tunnels.Add(1)
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = rw.Flush()
	}))
	t.Cleanup(up.Close)
	e := startSite(t, "mcp_ratelimit {\npreauth 100/s burst 100\n}\nreverse_proxy "+up.Listener.Addr().String())
	host := strings.TrimPrefix(e.caddy.URL, "http://")
	for _, c := range []struct{ name, head string }{
		{"websocket", "GET /mcp HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"},
		{"websocket with a credential", "GET /mcp HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer valid-tunnel\r\nConnection: keep-alive, upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"},
		{"h2c", "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nContent-Length: 2\r\n\r\n{}"},
		{"CONNECT", "CONNECT " + host + " HTTP/1.1\r\nHost: " + host + "\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := c.head
			if !strings.Contains(head, "\r\n\r\n") {
				head += "\r\n"
			}
			if _, err := conn.Write([]byte(head)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || tunnels.Load() != 0 {
				t.Fatalf("status %d, %d tunnel(s) reached the backend; want 400 and none", resp.StatusCode, tunnels.Load())
			}
		})
	}
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("a plain call after the refused tunnels: %d %s", r.Status, r.Body)
	}
}
