// Package demo is a small MCP server built with the official Go SDK, used
// by the demo (`go run ./cmd/caddy run --config examples/Caddyfile`) and
// by the integration tests as the real backend behind Caddy.
//
// It exposes the tools `echo` (returns its text), `slow` (reports progress
// once when asked to, then waits for the given milliseconds or until the
// call is cancelled) and `analyze_photo`,
// counts the tool calls that actually reach it, and checks credentials
// like a real server would: a request without an Authorization header is
// served anonymously, a bearer token starting with "valid" or "demo" is
// accepted, and anything else gets 401.
package demo

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Backend is the demo MCP server.
type Backend struct {
	calls    atomic.Int64
	requests atomic.Int64
	server   *mcp.Server
	// TestHooks makes the backend honour the X-Demo-Status request header
	// (answer with that status instead) and X-Demo-Early-Hints (send a 103
	// before the answer), for tests of how the limiter learns from the
	// backend's verdicts.
	TestHooks bool
}

// EchoArgs are the arguments of the echo tool.
type EchoArgs struct {
	Text  string `json:"text,omitempty" jsonschema:"text to echo back"`
	Limit int    `json:"limit,omitempty" jsonschema:"page size (ignored)"`
}

// SlowArgs are the arguments of the slow tool.
type SlowArgs struct {
	Millis int `json:"millis,omitempty" jsonschema:"how long to take, in milliseconds"`
}

// PhotoArgs are the arguments of the analyze_photo tool.
type PhotoArgs struct {
	URL string `json:"url,omitempty" jsonschema:"photo to analyze"`
}

// New returns a demo backend.
func New() *Backend {
	b := &Backend{}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-ratelimit-demo", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes its text."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
			b.calls.Add(1)
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Takes its time."},
		func(ctx context.Context, req *mcp.CallToolRequest, in SlowArgs) (*mcp.CallToolResult, any, error) {
			b.calls.Add(1)
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "started"})
			}
			select {
			case <-time.After(time.Duration(in.Millis) * time.Millisecond):
			case <-ctx.Done():
			}
			return text("done"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "analyze_photo", Description: "Pretends to analyze a photo."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PhotoArgs) (*mcp.CallToolResult, any, error) {
			b.calls.Add(1)
			return text("a photo of " + in.URL), nil, nil
		})
	b.server = s
	return b
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// ToolCalls returns how many tool calls reached the backend.
func (b *Backend) ToolCalls() int64 { return b.calls.Load() }

// Requests returns how many HTTP requests reached the backend.
func (b *Backend) Requests() int64 { return b.requests.Load() }

// Handler serves the Streamable HTTP transport statelessly with JSON
// responses, so plain curl calls work without a session.
func (b *Backend) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true, Stateless: true, JSONResponse: true})
	return b.guard(h)
}

// SessionHandler serves the Streamable HTTP transport with sessions and
// SSE responses, including the standalone GET stream.
func (b *Backend) SessionHandler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	return b.guard(h)
}

// SSEHandler serves the legacy HTTP+SSE transport.
func (b *Backend) SSEHandler() http.Handler {
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return b.server },
		&mcp.SSEOptions{DisableLocalhostProtection: true})
	return b.guard(h)
}

// guard checks credentials and applies test hooks before the SDK sees
// the request.
func (b *Backend) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		if b.TestHooks {
			if s, err := strconv.Atoi(r.Header.Get("X-Demo-Status")); err == nil {
				w.WriteHeader(s)
				return
			}
			if r.Header.Get("X-Demo-Early-Hints") != "" {
				w.Header().Set("Link", "</style.css>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
			}
		}
		if auth := r.Header.Get("Authorization"); auth != "" {
			// Parsed as the Go SDK's auth.RequireBearerToken does: any
			// whitespace, and the scheme in any case.
			f := strings.Fields(auth)
			ok := len(f) == 2 && strings.EqualFold(f[0], "bearer")
			if !ok || !(strings.HasPrefix(f[1], "valid") || strings.HasPrefix(f[1], "demo")) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="demo"`)
				http.Error(w, "invalid credential", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
