package mcplimit_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A pre-auth refusal of a request whose declared length is over max_body
// gives that 413 at once: the body, which will never be read, is not
// waited for (net/http would otherwise drain up to 256 KiB of it before
// sending the answer, here until the client's deadline, since it never
// comes).
func TestPreauthRefusalOfAnOversizedDeclaredBodyDoesNotWaitForIt(t *testing.T) {
	e := start(t, "max_body 1KiB\npreauth 1/m burst 1")
	e.call(1)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	// 2000 bytes announced (over max_body, under peekLimit and net/http's
	// 256 KiB drain), one sent.
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n\r\n{", conn.RemoteAddr())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the declared body is pending: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %s, want 413", resp.StatusCode, body)
	}
}

// A body refused for its size or its content coding, once pre-auth let
// it in, is read to its end after its refusal is sent over HTTP/1 (for at
// most 2s and 64 MiB), as nginx's lingering close does; the connection
// then closes (the refusal says so). Left unread, the body still arriving fills the
// connection until the server closes it: a client still writing it (Go's
// and Node's read the answer meanwhile, Python's requests writes it all
// first) meets a failed write or a reset, not the 413 or 415 it was sent.
// Here the client reads the answer before it writes the rest of its body,
// so the answer must come first.
func TestRefusedBodyIsReadToItsEndSoTheClientReadsItsAnswer(t *testing.T) {
	e := start(t, "preauth 100/s burst 100")
	call := harness.ToolCall(7, "echo", map[string]any{"text": strings.Repeat("x", 40<<20)}) // past any socket buffers
	json, length := "Content-Type: application/json\r\n", fmt.Sprintf("Content-Length: %d\r\n", len(call))
	// Just over max_body: the answer must come before the server would
	// have read more.
	const first = 1<<20 + 1<<10
	for _, c := range []struct {
		name, headers, body string
		status              int
	}{
		{"over max_body", json + length, call, http.StatusRequestEntityTooLarge},
		{"over max_body, chunked", json + "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(call), call), http.StatusRequestEntityTooLarge},
		{"over max_body, sent before a 100 Continue", json + "Expect: 100-continue\r\n" + length, call, http.StatusRequestEntityTooLarge},
		{"gzip", json + "Content-Encoding: gzip\r\n" + length, call, http.StatusUnsupportedMediaType},
		{"UTF-16", "Content-Type: application/json; charset=utf-16\r\n" + length, call, http.StatusUnsupportedMediaType},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only so a failure cannot hang
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer valid-linger\r\n"+
			"Accept: application/json, text/event-stream\r\n%s\r\n%s", conn.RemoteAddr(), c.headers, c.body[:first])
		rd := bufio.NewReader(conn)
		resp, err := http.ReadResponse(rd, nil)
		for err == nil && resp.StatusCode == http.StatusContinue {
			resp, err = http.ReadResponse(rd, nil)
		}
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), `"error"`) || !resp.Close {
			t.Fatalf("%s: %d %s (Connection: close %v), want %d with its JSON-RPC error, closing", c.name, resp.StatusCode, body, resp.Close, c.status)
		}
		if _, err := io.WriteString(conn, c.body[first:]); err != nil {
			t.Fatalf("%s: writing the rest of the body after the answer: %v; want it read to its end", c.name, err)
		}
		if _, err := rd.ReadByte(); err != io.EOF {
			t.Fatalf("%s: after the body: %v, want the connection closed", c.name, err)
		}
		conn.Close()
	}
}

// A small body refused for its content coding or charset, sent over
// about a second by a client that writes its whole body before it reads
// the answer (Python's requests and http.client do), gets its 415 with its
// id: the 415's peek at the body waits, over HTTP/1, as long as the linger
// that reads the rest would. With half a second's peek, the read that timed
// out left Caddy's body reader failing every read after it, the connection
// closed with the body still arriving, and the client met a reset instead
// of its answer.
func TestSlowSmallBodyRefusedForItsHeadersGetsItsAnswer(t *testing.T) {
	e := start(t, "zone slow415\npreauth 100/s burst 100")
	call := harness.ToolCall(7, "echo", map[string]any{"text": strings.Repeat("x", 30000)})
	for _, c := range []struct{ name, header string }{
		{"gzip", "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"},
		{"UTF-16", "Content-Type: application/json; charset=utf-16\r\n"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only so a failure cannot hang
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer valid-slow415\r\n"+
			"Accept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n", conn.RemoteAddr(), c.header, len(call))
		// Ten pieces, 80ms apart: past the half second, well within 2s.
		piece := len(call)/10 + 1
		for i := 0; i < len(call); i += piece {
			if _, err := io.WriteString(conn, call[i:min(i+piece, len(call))]); err != nil {
				t.Fatalf("%s: writing the body at byte %d: %v", c.name, i, err)
			}
			time.Sleep(80 * time.Millisecond)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: reading the answer after the whole body: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(body), `"id":7`) {
			t.Fatalf("%s: %d %s, want 415 answering id 7", c.name, resp.StatusCode, body)
		}
	}
}

// The rest of a refused body is read for a bounded time: a client that
// stalls after its refusal is let go (after 2s), not waited for as long
// as it keeps the connection open.
func TestRefusedBodyStalledAfterItsRefusalIsLetGo(t *testing.T) {
	e := start(t, "preauth 100/s burst 100")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // far past the 2s: only so a failure cannot hang
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer valid-stalled\r\nContent-Encoding: gzip\r\n"+
		"Content-Length: %d\r\n\r\n%s", conn.RemoteAddr(), 40<<20, strings.Repeat("x", 1<<10))
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("%d, want 415", resp.StatusCode)
	}
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal, with the body stalled: %v, want the connection closed", err)
	}
}

// Over HTTP/2 a refused body is not read on: the stream ends alone, the
// client reads its 413, and the connection serves the next request. (The
// Connection: close that ends a lingering HTTP/1 refusal would have the
// server send GOAWAY here, ending the connection of every stream.)
func TestRefusedBodyOverHTTP2KeepsTheConnection(t *testing.T) {
	e := start(t, "preauth 100/s burst 100", harness.Options{Global: "servers {\n protocols h1 h2c\n}"})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	var reused []bool
	trace := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(c httptrace.GotConnInfo) { reused = append(reused, c.Reused) },
	})
	post := func(body string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(trace, http.MethodPost, e.mcp, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer valid-h2-refused")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("answered over %s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode
	}
	if s := post(harness.ToolCall(7, "echo", map[string]any{"text": strings.Repeat("x", 4<<20)})); s != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d, want 413", s)
	}
	if s := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); s != http.StatusOK {
		t.Fatalf("next request: %d, want 200", s)
	}
	if len(reused) != 2 || !reused[1] {
		t.Fatalf("connections reused %v: want the next request on the same connection", reused)
	}
}

// A pre-auth refusal echoes the id of a body of exactly peekLimit (64
// KiB), which it reads: only a larger one is answered with id null unread.
func TestPreauthRefusalEchoesTheIDOfABodyOfExactlyThePeekLimit(t *testing.T) {
	e := start(t, "preauth 1/m burst 1")
	e.call(1)
	base := harness.ToolCall(7, "echo", map[string]any{"text": ""})
	for size, want := range map[int]string{64 << 10: `"id":7`, 64<<10 + 1: `"id":null`} {
		body := harness.ToolCall(7, "echo", map[string]any{"text": strings.Repeat("x", size-len(base))})
		if len(body) != size {
			t.Fatalf("body of %d bytes, want %d", len(body), size)
		}
		r := e.post(body)
		if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), want) {
			t.Fatalf("body of %d bytes: %d %s, want a pre-auth refusal with %s", size, r.Status, r.Body, want)
		}
	}
}

// The body handed on is the one read whole, so it goes on with its
// length: a chunked request reaches the backend with a Content-Length and
// no Transfer-Encoding (servers that cannot read a chunked body, as some
// WSGI servers cannot, read it all the same).
func TestChunkedBodyReachesTheBackendWithItsLength(t *testing.T) {
	type framing struct {
		length int64
		te     []string
	}
	seen := make(chan framing, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case seen <- framing{r.ContentLength, r.TransferEncoding}:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	t.Cleanup(backend.Close)
	e := startSite(t, "mcp_ratelimit {\npreauth 100/s burst 100\n}\nreverse_proxy "+strings.TrimPrefix(backend.URL, "http://"))
	body := harness.ToolCall(1, "echo", map[string]any{"text": "hi"})
	req, _ := http.NewRequest(http.MethodPost, e.mcp, io.NopCloser(strings.NewReader(body)))
	req.ContentLength = -1 // chunked
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r := harness.Do(t, req); r.Status != http.StatusOK {
		t.Fatalf("chunked call: %d %s", r.Status, r.Body)
	}
	if got := <-seen; got.length != int64(len(body)) || len(got.te) != 0 {
		t.Fatalf("the backend got Content-Length %d, Transfer-Encoding %q; want %d and none", got.length, got.te, len(body))
	}
}

// A call naming two tools (params.name twice, which lenient parsers read
// either way) that break both tools' bounds is refused naming the first
// in the body, as the tools appear, every time.
func TestArgRefusalOfACallNamingTwoToolsNamesTheFirst(t *testing.T) {
	e := start(t, "tenant 100/s burst 100\nquota off\ntool alpha {\n arg n max 1\n}\ntool beta {\n arg n max 1\n}")
	e.prove("valid-twotools")
	for _, c := range []struct{ first, second string }{{"alpha", "beta"}, {"beta", "alpha"}} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + c.first + `","name":"` + c.second + `","arguments":{"n":5}}}`
		r := e.post(body, "Authorization", "Bearer valid-twotools")
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || got.Error.Data.Tool != c.first {
			t.Fatalf("%s then %s: %d %s, want 400 naming %s", c.first, c.second, r.Status, r.Body, c.first)
		}
	}
}

// A POST without a body is read as one (an empty message), so its
// Content-Encoding decides the answer as any body's does: refused by
// pre-auth, it gets the 415 that no wait lets pass, not a wait.
func TestPreauthRefusalOfAnEmptyEncodedPostIs415(t *testing.T) {
	e := start(t, "preauth 1/m burst 1")
	e.call(1)
	if r := e.post("", "Content-Encoding", "gzip"); r.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("empty gzip POST after pre-auth ran out: %d %s, want 415", r.Status, r.Body)
	}
}

// A UTF-16 body read by a pre-auth refusal gets the 415 that no wait lets
// pass, as a gzip one does, not a wait.
func TestPreauthRefusalOfAUTF16BodyIs415(t *testing.T) {
	e := start(t, "preauth 1/h burst 1")
	e.call(1)
	var le16 []byte
	for _, u := range utf16.Encode([]rune(harness.ToolCall(2, "echo", map[string]any{"text": "x"}))) {
		le16 = binary.LittleEndian.AppendUint16(le16, u)
	}
	if r := e.post(string(le16)); r.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("UTF-16LE body with pre-auth empty: %d %s, want 415", r.Status, r.Body)
	}
}

// A body cut short of its Content-Length is refused even when a handler
// before the limiter kept what arrived of it: Caddy's {http.request.body}
// placeholder reads the body, and on its early end keeps the part it read
// as the body, the declared length unchanged. Handed on with the length
// read, the call would reach the backend as a whole one.
func TestBodyCutShortBeforeTheLimiterIsRefused(t *testing.T) {
	e := startSite(t, "route {\n\tvars seen {http.request.body}\n\tmcp_ratelimit {\n\t\tpreauth 100/s burst 100\n\t}\n\treverse_proxy $BACKEND\n}")
	call := harness.ToolCall(7, "echo", map[string]any{"text": "hi"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.caddy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer valid-cut\r\nContent-Length: %d\r\n\r\n%s",
		conn.RemoteAddr(), len(call)+50, call)
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "shorter than its Content-Length header says") || e.backend.ToolCalls() != 0 {
		t.Fatalf("%d %s, %d calls reached the backend; want 400 naming the length and none", resp.StatusCode, body, e.backend.ToolCalls())
	}
}
