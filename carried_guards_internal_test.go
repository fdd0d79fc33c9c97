package mcplimit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// A body handed on may be closed more than once (a transport closes it on
// an error and again as it ends): its buffer goes back to the pool once,
// or two later requests would read their bodies into one buffer.
func TestHandedOnBodyReleasesItsBufferOnce(t *testing.T) {
	buf, _, err := jsonrpc.ReadBody(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	br := &bodyReader{buf: buf}
	br.Reset(buf.Bytes())
	if _, err := io.ReadAll(br); err != nil {
		t.Fatal(err)
	}
	_ = br.Close()
	_ = br.Close()
	bodiesKeepApart(t, "after a double close")
}

// bodiesKeepApart reads two bodies and fails when they share one buffer,
// as they do when one was put back in the pool twice.
func bodiesKeepApart(t *testing.T, when string) {
	t.Helper()
	a, _, _ := jsonrpc.ReadBody(strings.NewReader("aaaa"), 1<<10)
	b, _, _ := jsonrpc.ReadBody(strings.NewReader("bbbb"), 1<<10)
	defer a.Release()
	defer b.Release()
	if a == b || string(a.Bytes()) != "aaaa" {
		t.Fatalf("two bodies read %s share one buffer: %q, %q", when, a.Bytes(), b.Bytes())
	}
}

// The body an admitted request hands on is the next handler's to close
// (reverse_proxy's transport does): the decision's release must not return
// its buffer to the pool a second time, or two later requests would read
// their bodies into one buffer.
func TestHandedOnBodyIsReleasedByItsReaderOnly(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "handed-on-body", Preauth: &RateLimit{Rate: "100/s", Burst: 100}})
	var got []byte
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		got, _ = io.ReadAll(r.Body)
		_ = r.Body.Close() // as the transport does
		w.WriteHeader(http.StatusOK)
		return nil
	})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	if err := h.ServeHTTP(httptest.NewRecorder(), preparedPost(context.Background(), body, "valid-handed-on"), next); err != nil {
		t.Fatal(err)
	}
	if string(got) != body {
		t.Fatalf("the next handler read %q, want the body as sent", got)
	}
	bodiesKeepApart(t, "after the request")
}
