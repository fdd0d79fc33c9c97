package mcplimit_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// postH3 sends body over HTTP/3 on a request stream of its own whose
// Content-Length header says length, then ends the stream, and returns
// the answer.
func postH3(t *testing.T, url, body string, length int64) *harness.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/mcp"),
		&tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, nil)
	if err != nil {
		t.Fatalf("dialing QUIC: %v", err)
	}
	defer conn.CloseWithError(0, "")
	str, err := (&http3.Transport{}).NewClientConn(conn).OpenRequestStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url, http.NoBody)
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer valid-h3")
	if err := str.SendRequestHeader(req); err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := str.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := str.ReadResponse()
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return &harness.Response{Status: resp.StatusCode, Header: resp.Header, Body: got}
}

// Over HTTP/3, quic-go ends a request body where its stream ends, whatever
// its Content-Length said (net/http refuses such a body over HTTP/1 and
// HTTP/2). A body shorter than its length is refused: handed on with the
// length read, a call cut in two would reach the backend as a whole
// message, and so would the rest of one cut short anywhere else.
func TestHTTP3BodyShorterThanItsContentLengthIsRefused(t *testing.T) {
	e := start(t, "preauth 100/s burst 100", harness.Options{HTTPS: true})
	url, b := e.mcp, e.backend
	call := harness.ToolCall(7, "echo", map[string]any{"text": "hi"})
	if r := postH3(t, url, call, int64(len(call))); r.Status != http.StatusOK || b.ToolCalls() != 1 {
		t.Fatalf("a whole body over HTTP/3: %d %s, %d calls reached the backend; want 200 and 1", r.Status, r.Body, b.ToolCalls())
	}
	for _, c := range []struct {
		name   string
		body   string
		length int64
	}{
		{"the whole message, a longer length", call, int64(len(call)) + 50},
		{"half the message, its whole length", call[:len(call)/2], int64(len(call))},
		{"all but the last byte, its whole length", call[:len(call)-1], int64(len(call))},
		{"a length over max_body", call, 20 << 20},
	} {
		r := postH3(t, url, c.body, c.length)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "shorter than its Content-Length header says") {
			t.Errorf("%s: %d %s, want 400 naming the length", c.name, r.Status, r.Body)
		}
	}
	if n := b.ToolCalls(); n != 1 {
		t.Fatalf("%d calls reached the backend, want only the whole one", n)
	}
}
