// Package harness runs the real things the integration tests need: a
// demo MCP backend built with the official Go SDK, Caddy with this module
// in process (Caddy is a process-wide singleton, so tests using it run
// one after another), and separate Caddy processes built from ./cmd/caddy
// sharing one storage directory. Every listener, the admin endpoint
// included, takes a free loopback port.
package harness

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/mcpratelimit/caddy-mcp-ratelimit"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/demo"
)

// FreePort returns a free TCP port on 127.0.0.1, never one it returned
// before in this process.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// The kernel may hand a port just closed out again, and Caddy
		// binds with SO_REUSEPORT: two listeners of one test on one port
		// would share its connections.
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
	t.Fatal("finding a free port: every port offered was handed out before")
	return 0
}

// portsGiven holds the ports FreePort handed out in this process.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Backend is a running demo MCP backend.
type Backend struct {
	*demo.Backend
	// Addr is host:port of the backend; /mcp serves Streamable HTTP
	// statelessly with JSON answers, /session with sessions and SSE,
	// /linger like /session but holding each answer open for a second
	// after its last message, /sse the legacy HTTP+SSE transport, and
	// /merge-trailers like /mcp, for callers with a credential, with
	// request trailers read as headers.
	Addr string
}

// StartBackend starts the demo backend with test hooks on a free
// loopback port.
func StartBackend(t testing.TB) *Backend {
	t.Helper()
	b := demo.New()
	b.TestHooks = true
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.Handler())
	mux.Handle("/session", b.SessionHandler())
	session := b.SessionHandler()
	mux.HandleFunc("/linger", func(w http.ResponseWriter, r *http.Request) {
		session.ServeHTTP(w, r)
		if r.Method == http.MethodPost {
			time.Sleep(time.Second)
		}
	})
	mux.Handle("/sse", b.SSEHandler())
	// /merge-trailers serves /mcp to authenticated callers only, as an
	// application on uvicorn with httptools does that reads its headers
	// into a dict: the request's trailers join the headers, and the last
	// value of a name wins.
	stateless := b.Handler()
	mux.HandleFunc("/merge-trailers", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for k, vv := range r.Trailer {
			r.Header[k] = vv
		}
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "credential required", http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		stateless.ServeHTTP(w, r)
	})
	mux.HandleFunc("/throttle", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		// X-Upstream-Policy makes the backend send a RateLimit-Policy of
		// the caller's choosing, such as one equal to a limiter's own.
		policy, left := `"upstream";q=100;w=60`, `"upstream";r=0;t=7`
		if p := r.Header.Get("X-Upstream-Policy"); p != "" {
			policy, left = p, r.Header.Get("X-Upstream-RateLimit")
		}
		w.Header().Set("RateLimit-Policy", policy)
		w.Header().Set("RateLimit", left)
		http.Error(w, "upstream provider quota", http.StatusTooManyRequests)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &Backend{Backend: b, Addr: strings.TrimPrefix(srv.URL, "http://")}
}

// Caddy is Caddy running in this process.
type Caddy struct {
	// URL is the base URL of the site, e.g. http://127.0.0.1:41234.
	URL string
	// Admin is the base URL of the admin endpoint.
	Admin string
	// Storage is the file-system storage directory.
	Storage string
	// Port and AdminPort are the listening ports.
	Port, AdminPort int
}

// Options tune StartCaddy.
type Options struct {
	// Global is extra global options (inside the top-level braces).
	Global string
	// Storage overrides the storage directory.
	Storage string
	// HTTPS serves the site over HTTPS with Caddy's internal CA, on
	// HTTP/1.1, HTTP/2 and HTTP/3 (QUIC), as Caddy serves HTTPS sites by
	// default.
	HTTPS bool
}

// Config renders a Caddyfile: global options with a free admin port,
// auto_https off and file-system storage, then one site on a free port
// whose body is site. In site, $BACKEND is the backend's host:port.
func Config(site, backend string, port, adminPort int, storage, global string) string {
	return render(site, backend, port, adminPort, storage, global, false)
}

// render is Config, or with https the site on HTTPS with Caddy's internal
// CA and HTTP/3 (which auto_https off would leave without a certificate).
func render(site, backend string, port, adminPort int, storage, global string, https bool) string {
	site = strings.ReplaceAll(site, "$BACKEND", backend)
	scheme, tlsOptions := "http", "auto_https off"
	if https {
		scheme, tlsOptions = "https", "skip_install_trust\n\tservers {\n\t\tprotocols h1 h2 h3\n\t}"
		site = "tls internal\n" + site
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	%s
	storage file_system %s
	%s
}

%s://127.0.0.1:%d {
	bind 127.0.0.1
	%s
}
`, adminPort, tlsOptions, storage, global, scheme, port, site)
}

// StartCaddy loads a config into the in-process Caddy and stops it when
// the test ends.
func StartCaddy(t testing.TB, site string, b *Backend, opts Options) *Caddy {
	t.Helper()
	c := &Caddy{Port: FreePort(t), AdminPort: FreePort(t), Storage: opts.Storage}
	if c.Storage == "" {
		c.Storage = t.TempDir()
	}
	backend := ""
	if b != nil {
		backend = b.Addr
	}
	cfg := render(site, backend, c.Port, c.AdminPort, c.Storage, opts.Global, opts.HTTPS)
	c.URL = "http://127.0.0.1:" + strconv.Itoa(c.Port)
	c.Admin = "http://127.0.0.1:" + strconv.Itoa(c.AdminPort)
	c.Load(t, cfg)
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Logf("stopping caddy: %v", err)
		}
	})
	if opts.HTTPS {
		c.URL = "https://127.0.0.1:" + strconv.Itoa(c.Port)
		// The site's certificate is issued in the background.
		Eventually(t, 10*time.Second, "the site's certificate", func() bool {
			conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(c.Port), &tls.Config{InsecureSkipVerify: true})
			if err == nil {
				conn.Close()
			}
			return err == nil
		})
	}
	return c
}

// Adapt turns a Caddyfile into JSON, failing the test on error.
func Adapt(t testing.TB, caddyfileText string) []byte {
	t.Helper()
	js, err := AdaptErr(caddyfileText)
	if err != nil {
		t.Fatalf("adapting Caddyfile: %v\n%s", err, caddyfileText)
	}
	return js
}

// AdaptErr turns a Caddyfile into JSON.
func AdaptErr(caddyfileText string) ([]byte, error) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	js, warns, err := adapter.Adapt([]byte(caddyfileText), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return nil, err
	}
	for _, w := range warns {
		if strings.Contains(w.Message, "mcp_ratelimit") {
			return nil, fmt.Errorf("warning: %s", w.Message)
		}
	}
	return js, nil
}

// Load adapts and loads a full Caddyfile.
func (c *Caddy) Load(t testing.TB, caddyfileText string) {
	t.Helper()
	if err := caddy.Load(Adapt(t, caddyfileText), true); err != nil {
		t.Fatalf("loading config: %v", err)
	}
}

// adminClient opens a connection per request: Caddy replaces its admin
// server at every config load, and a kept-alive connection to the one it
// replaced answers the next request with EOF.
var adminClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// adminDo sends req to the admin endpoint. A request that has the same
// effect sent twice (a GET, a PATCH, a POST to /load) whose connection is
// dropped before any answer is retried a few times: a config load
// replaces the admin server, and a connection the old one had accepted is
// closed unanswered.
func adminDo(req *http.Request) (*http.Response, error) {
	if !repeatable(req) {
		return adminClient.Do(req)
	}
	return sendAgainIfDropped(adminClient, req)
}

// sendAgainIfDropped sends req with c, and sends it again, a few times,
// while its connection is dropped before any answer.
func sendAgainIfDropped(c *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := c.Do(req)
	for try := 0; err != nil && droppedUnanswered(err) && try < 5; try++ {
		time.Sleep(20 * time.Millisecond)
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		resp, err = c.Do(req)
	}
	return resp, err
}

// repeatable reports whether req has the same effect sent twice: Caddy's
// admin API PATCH replaces what is at its path, and /load loads the whole
// config it carries.
func repeatable(req *http.Request) bool {
	return req.Method == http.MethodGet || req.Method == http.MethodPatch ||
		req.Method == http.MethodPost && req.URL.Path == "/load"
}

// AdminDo sends a request to the admin endpoint, with extra headers as
// name, value pairs, and returns status and body.
func (c *Caddy) AdminDo(t testing.TB, method, path string, body []byte, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.Admin+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", c.Admin)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := adminDo(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// AdminJSON GETs path from the admin endpoint and decodes its JSON answer
// into v, failing t unless the answer is a 200 that decodes.
func (c *Caddy) AdminJSON(t testing.TB, path string, v any) {
	t.Helper()
	status, body := c.AdminDo(t, http.MethodGet, path, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decoding %s: %v", path, body, err)
	}
}

// droppedUnanswered reports a connection closed or refused before any
// response arrived.
func droppedUnanswered(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.Body, err)
	}
}

// Post sends body to url with the MCP Streamable HTTP headers plus hdr
// (pairs of name, value) and returns the response.
func Post(t testing.TB, url, body string, hdr ...string) *Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return Do(t, req)
}

// client opens a connection per request, so config reloads (which close
// idle connections) never break a test's next request.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// Send sends req on a connection of its own. A connection dropped before
// any answer is retried a few times: during a config reload Caddy closes
// the old listener, and connections still queued on it are reset without
// ever reaching a handler.
func Send(req *http.Request) (*http.Response, error) {
	return sendAgainIfDropped(client, req)
}

// Do sends req (see Send) and reads the whole response.
func Do(t testing.TB, req *http.Request) *Response {
	t.Helper()
	resp, err := Send(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// ToolCall renders a tools/call request.
func ToolCall(id int, tool string, args map[string]any) string {
	if args == nil {
		args = map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	return string(b)
}

// Initialize renders an initialize request.
func Initialize(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, id)
}

// Eventually polls cond every 20ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TempDir returns a fresh directory that survives until the test ends.
func TempDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// HandlerPath returns the admin /config/ path of the one handler named
// handler in the running config (e.g. "mcp_ratelimit"), failing the test
// when there is not exactly one.
func (c *Caddy) HandlerPath(t testing.TB, handler string) string {
	t.Helper()
	st, body := c.AdminDo(t, http.MethodGet, "/config/", nil)
	if st != http.StatusOK {
		t.Fatalf("GET /config/: %d %s", st, body)
	}
	var cfg any
	if err := json.Unmarshal(body, &cfg); err != nil {
		t.Fatal(err)
	}
	var found []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			if x["handler"] == handler {
				found = append(found, path)
			}
			for k, v := range x {
				walk(v, path+"/"+k)
			}
		case []any:
			for i, v := range x {
				walk(v, path+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(cfg, "/config")
	if len(found) != 1 {
		t.Fatalf("want one %s handler in the config, found %v", handler, found)
	}
	return found[0]
}
