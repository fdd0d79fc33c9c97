package mcplimit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// Tool names make quota keys that round-trip and hold no space or newline,
// which would end the key of a stored quota line.
func TestToolQuotaKeysEscapeTheName(t *testing.T) {
	d := &decision{}
	fp := [16]byte{1, 2, 3}
	for _, name := range []string{"echo", "photo tool", "50% off", "two\nlines", "a/b", "%20", "café"} {
		key := d.quotaKey("t/", []byte(name), fp)
		for _, c := range key {
			if c == ' ' || c == '\n' {
				t.Fatalf("key %q of tool %q holds a space or newline", key, name)
			}
		}
		if got := toolOfKey(key); got != name {
			t.Fatalf("toolOfKey(%q) = %q, want %q", key, got, name)
		}
	}
	if key := string(d.quotaKey("t/", []byte("echo"), fp)); key != "t/echo/01020300000000000000000000000000" {
		t.Fatalf("a plain tool name changed its key: %q", key)
	}
}

// The call whose 2xx proves its identity is counted in the quota of the
// tool it called: its body, handed on and closed by the next handler (as
// reverse_proxy's transport does once it has sent it), may hold another
// request's bytes by the time the answer comes.
func TestProvingCallIsCountedUnderItsOwnTool(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "proving-tool", Preauth: &RateLimit{Rate: "100/s", Burst: 100},
		Tools: map[string]*ToolPolicy{"echo": {Quota: &QuotaLimit{Day: 10}}},
	})
	const token = "Bearer valid-proving-tool"
	req := httptest.NewRequest(http.MethodPost, "http://test/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
	req.Header.Set("Authorization", token)
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
		// Another request takes the body's buffer from the pool.
		other, _, err := jsonrpc.ReadBody(strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"zzzz"}}`), 1<<20)
		if err != nil {
			return err
		}
		defer other.Release()
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err := h.ServeHTTP(httptest.NewRecorder(), req, next); err != nil {
		t.Fatal(err)
	}
	key := "t/echo/" + fingerprintHex(h.zone.fpKey.Load().sum(token))
	if n := h.zone.quota.Used([]byte(key), quota.Day, time.Now()); n != 1 {
		t.Fatalf("the proving call counts %d in its tool's quota, want 1", n)
	}
}
