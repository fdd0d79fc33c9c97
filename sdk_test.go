package mcplimit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkSession connects the official Go SDK client to the site's /mcp
// through Caddy with the given bearer token.
func sdkSession(t *testing.T, e *env, token string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{token: token, next: tr}}
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.mcp, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("SDK client connecting through Caddy: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func sdkEcho(ctx context.Context, s *mcp.ClientSession, text string) (*mcp.CallToolResult, error) {
	return s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
}

func sdkResultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestSDKClientToolCallRoundTripsThroughTheLimiter(t *testing.T) {
	e := start(t, "tenant 5/s burst 20")
	s := sdkSession(t, e, "valid-sdk")
	before := e.backend.ToolCalls()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, text := range []string{"hi", "again"} {
		res, err := sdkEcho(ctx, s, text)
		if err != nil {
			t.Fatalf("CallTool %d: %v", i, err)
		}
		if res.IsError || sdkResultText(res) != text {
			t.Fatalf("CallTool %d: isError=%v text %q, want %q", i, res.IsError, sdkResultText(res), text)
		}
	}
	if got := e.backend.ToolCalls() - before; got != 2 {
		t.Fatalf("backend saw %d tool calls, want 2", got)
	}
	// Discovery passes too and is not metered.
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatalf("ListTools: %v", err)
	}
}

func TestSDKClientGetsAPromptErrorWhenRefused(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nquota off")
	s := sdkSession(t, e, "valid-sdk")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := sdkEcho(ctx, s, "hi"); err != nil || sdkResultText(res) != "hi" {
		t.Fatalf("first call within burst: %v %v", res, err)
	}
	before := e.backend.ToolCalls()
	began := time.Now()
	res, err := sdkEcho(ctx, s, "hi")
	if err == nil {
		t.Fatalf("a refused call returned a result: %+v", res)
	}
	if ctx.Err() != nil {
		t.Fatalf("CallTool only returned when the 10s context expired: %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the refusal took %v to surface", took)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a refused call reached the backend")
	}
	t.Logf("SDK error on refusal: %v", err)
	// The session survives a refusal: discovery still works.
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatalf("session broken after a refusal: %v", err)
	}
}

// A call whose body is over max_body is refused with its own id, read
// from the body's beginning: the SDK hands the agent the error, and the
// session goes on (an answer with id null ends it).
func TestSDKSessionSurvivesAnOversizedCall(t *testing.T) {
	e := start(t, "max_body 4KiB\ntenant 10/s burst 100\nquota off")
	s := sdkSession(t, e, "valid-sdk-big")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := e.backend.ToolCalls()
	_, err := sdkEcho(ctx, s, strings.Repeat("x", 8<<10))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -31004 || !strings.Contains(rpcErr.Message, "too large") {
		t.Fatalf("an oversized call: %v, want the refusal's JSON-RPC error (-31004, too large)", err)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("an oversized call reached the backend")
	}
	if res, err := sdkEcho(ctx, s, "small"); err != nil || sdkResultText(res) != "small" {
		t.Fatalf("the next call on the same session: %v %v", res, err)
	}
}

func TestSDKClientReadsToolResultRefusal(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nquota off\nrefuse_with tool_result")
	s := sdkSession(t, e, "valid-sdk")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := sdkEcho(ctx, s, "hi"); err != nil || res.IsError || sdkResultText(res) != "hi" {
		t.Fatalf("first call within burst: %v %v", res, err)
	}
	before := e.backend.ToolCalls()
	res, err := sdkEcho(ctx, s, "hi")
	if err != nil {
		t.Fatalf("refuse_with tool_result must reach the SDK as a tool result, got error %v", err)
	}
	if !res.IsError {
		t.Fatalf("refusal tool result has isError=false: %+v", res)
	}
	if txt := sdkResultText(res); !strings.Contains(txt, "Rate limited") || !strings.Contains(txt, "Retry in") {
		t.Fatalf("refusal text %q does not tell the caller to wait", txt)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a refused call reached the backend")
	}
}

func TestSDKClientReadsJSONRPCRefusal(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nquota off\nrefuse_with jsonrpc")
	s := sdkSession(t, e, "valid-sdk")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sdkEcho(ctx, s, "hi"); err != nil {
		t.Fatalf("first call within burst: %v", err)
	}
	_, err := sdkEcho(ctx, s, "hi")
	if err == nil {
		t.Fatal("a refused call returned a result")
	}
	if ctx.Err() != nil {
		t.Fatalf("CallTool only returned when the context expired: %v", err)
	}
	if !strings.Contains(err.Error(), "Rate limited") {
		t.Fatalf("the SDK error does not carry the refusal message: %v", err)
	}
}

// A Go SDK client that listens for list changes holds a listen stream
// open (a subscriptions/listen POST, SEP-2575, under revision 2026-07-28)
// as long as its session lasts. Under meter * it costs 1 like a GET's
// listen stream, and like one it holds no concurrency slot once its answer
// starts: else the client's one slot (per_identity 1) would be its own
// stream's, and every call of its session refused.
func TestSDKListenStreamHoldsNoConcurrencySlot(t *testing.T) {
	e := start(t, "preauth 100/s burst 100\ntenant 100/s burst 100\nquota off\nmeter *\nconcurrency 5 per_identity 1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.mcp, HTTPClient: sdkClient("valid-listener"), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for i := range 3 {
		if _, err := sdkEcho(ctx, s, "hi"); err != nil {
			t.Fatalf("call %d with the session's listen stream open: %v", i, err)
		}
	}
}
