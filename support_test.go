package mcplimit_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	mcplimit "github.com/mcpratelimit/caddy-mcp-ratelimit"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// TestMain gives the tests their own Caddy data directory, where zones
// cache their fingerprint keys: the tests' zones must not overwrite the
// copies of a Caddy the user runs.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcprl-data-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	harness.RemoveBuild()
	os.Exit(code)
}

// rpcError is the JSON-RPC error of a refusal.
type rpcError struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Limit             string `json:"limit"`
			Code              string `json:"code"`
			RetryAfterSeconds int    `json:"retryAfterSeconds"`
			ResetsAt          string `json:"resetsAt"`
			Argument          string `json:"argument"`
			Tool              string `json:"tool"`
			MaxPerRequest     int    `json:"maxPerRequest"`
		} `json:"data"`
	} `json:"error"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

// env is one integration test's Caddy and backend.
type env struct {
	t       *testing.T
	caddy   *harness.Caddy
	backend *harness.Backend
	mcp     string
}

// start runs Caddy in process with the given mcp_ratelimit block (the
// directive's body) in front of the demo backend's /mcp.
func start(t *testing.T, block string, opts ...harness.Options) *env {
	t.Helper()
	b := harness.StartBackend(t)
	site := fmt.Sprintf("mcp_ratelimit {\n%s\n}\nreverse_proxy $BACKEND", block)
	var o harness.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c := harness.StartCaddy(t, site, b, o)
	return &env{t: t, caddy: c, backend: b, mcp: c.URL + "/mcp"}
}

// startSite is start with a whole site body.
func startSite(t *testing.T, site string, opts ...harness.Options) *env {
	t.Helper()
	b := harness.StartBackend(t)
	var o harness.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c := harness.StartCaddy(t, site, b, o)
	return &env{t: t, caddy: c, backend: b, mcp: c.URL + "/mcp"}
}

// call posts a tools/call of echo with the given headers.
func (e *env) call(id int, hdr ...string) *harness.Response {
	e.t.Helper()
	return harness.Post(e.t, e.mcp, harness.ToolCall(id, "echo", map[string]any{"text": "hi"}), hdr...)
}

// queryCookieCall posts a tools/call of echo to the endpoint with the
// given query string and Cookie header.
func (e *env) queryCookieCall(query, cookie string) *harness.Response {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.mcp+"?"+query, strings.NewReader(harness.ToolCall(3, "echo", map[string]any{"text": "hi"})))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Cookie", cookie)
	return harness.Do(e.t, req)
}

// fillAddresses has mcplimit.MinBucketRoom addresses (X-Forwarded-For
// 10.0.x.y, from a Caddy trusting its loopback proxy) each make one call
// that leaves its pre-auth bucket drained, as a zone with max_known at
// most half of that fills its pre-auth bucket set. The zone's pre-auth
// rate must be slow enough that no bucket refills while it runs (1/h): a
// full one would make room.
func (e *env) fillAddresses() {
	e.t.Helper()
	for i := range mcplimit.MinBucketRoom {
		xff := fmt.Sprintf("10.0.%d.%d", i>>8, i&255)
		if r := e.call(1, "Authorization", "Bearer bad-fill", "X-Forwarded-For", xff); r.Status == http.StatusTooManyRequests {
			e.t.Fatalf("address %s filling the set: %d %s", xff, r.Status, r.Body)
		}
	}
}

// fillTenants has mcplimit.MinBucketRoom identities (Bearer prefix-N)
// each prove itself and make one call, which leaves its tenant bucket
// drained, as a zone with max_known at most half of that fills its tenant
// bucket set. The tenant rate must be slow enough that no bucket refills
// while it runs (1/h).
func (e *env) fillTenants(prefix string) {
	e.t.Helper()
	for i := range mcplimit.MinBucketRoom {
		tok := fmt.Sprintf("%s-%d", prefix, i)
		e.prove(tok)
		e.spend(tok, 1)
	}
}

// post posts body with the given headers.
func (e *env) post(body string, hdr ...string) *harness.Response {
	e.t.Helper()
	return harness.Post(e.t, e.mcp, body, hdr...)
}

// prove makes token a proven identity by having the backend accept it.
// spend makes n metered calls with token (ids 0 to n-1), each of which
// must be admitted.
func (e *env) spend(token string, n int) {
	e.t.Helper()
	for i := range n {
		if r := e.call(i, "Authorization", "Bearer "+token); r.Status != http.StatusOK {
			e.t.Fatalf("call %d with %s: %d %s", i, token, r.Status, r.Body)
		}
	}
}

// forget has the backend reject a free tools/list of the identity whose
// headers auth names (the demo backend answers X-Demo-Status), which
// forgets it.
func (e *env) forget(auth ...string) {
	e.t.Helper()
	if r := e.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, append(auth, "X-Demo-Status", "403")...); r.Status != http.StatusForbidden {
		e.t.Fatalf("forgetting: status %d", r.Status)
	}
}

func (e *env) prove(token string, hdr ...string) {
	e.t.Helper()
	r := e.post(harness.Initialize(1), append([]string{"Authorization", "Bearer " + token}, hdr...)...)
	if r.Status != http.StatusOK {
		e.t.Fatalf("proving %s: status %d: %s", token, r.Status, r.Body)
	}
}

// refusal decodes and checks the common shape of a refusal, of its first
// entry's error for a batch.
func refusal(t *testing.T, r *harness.Response, status int, limit string) rpcError {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	var e rpcError
	if strings.HasPrefix(string(r.Body), "[") {
		var all []rpcError
		r.JSON(t, &all)
		if len(all) == 0 {
			t.Fatalf("an empty batch of answers: %s", r.Body)
		}
		e = all[0]
	} else {
		r.JSON(t, &e)
	}
	if e.Error == nil {
		t.Fatalf("no JSON-RPC error in %s", r.Body)
	}
	if e.Error.Data.Limit != limit {
		t.Fatalf("data.limit %q, want %q (%s)", e.Error.Data.Limit, limit, r.Body)
	}
	if r.Header.Get("Retry-After") == "" || r.Header.Get("Cache-Control") != "no-store" ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("refusal headers incomplete: %v", r.Header)
	}
	return e
}
