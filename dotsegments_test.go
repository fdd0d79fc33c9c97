package mcplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// dotPaths are paths Caddy's path matcher cleans out of /mcp* (or that
// it never matches, where Tomcat drops the ';' parameter and merges the
// slashes, or where IIS turns a backslash into a slash) while a backend
// that routes by the raw path sends them to its /mcp mount.
var dotPaths = []string{
	"/mcp/messages/../..",
	"/mcp/messages/%2e%2e/%2E%2E",
	"/mcp/..%2f",
	"/mcp/.%2e",
	"/mcp/x/../..",
	"/health/..;/mcp/messages",
	"/;x/mcp",
	"/;/mcp/messages",
	"/%3bx/mcp",
	"/x%5c..%5cmcp",
	"/x%5C..%5Cmcp/messages",
	"/%5cmcp",
}

// readmeDotRecipe returns the lines of the README's dot-segment snippet
// that refuse such paths.
func readmeDotRecipe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "@dotted ") || strings.HasPrefix(l, "respond @dotted ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("README's dot-segment recipe: found %q, want the @dotted matcher and its respond", lines)
	}
	return strings.Join(lines, "\n\t")
}

// rawBackend records the request URI of every request it answers.
type rawBackend struct {
	mu   sync.Mutex
	uris []string
}

func (b *rawBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.uris = append(b.uris, r.RequestURI)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
}

// got returns the request URIs answered since the last call.
func (b *rawBackend) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.uris
	b.uris = nil
	return u
}

// TestReadmeDotSegmentRecipe shows the bypass the README's "A matcher,
// and paths with dot segments" describes, and that its snippet closes it.
func TestReadmeDotSegmentRecipe(t *testing.T) {
	be := &rawBackend{}
	srv := httptest.NewServer(be)
	t.Cleanup(srv.Close)
	backend := strings.TrimPrefix(srv.URL, "http://")
	site := func(zone, recipe string) string {
		return fmt.Sprintf(`%s
	mcp_ratelimit /mcp* {
		zone %s
		preauth 1/h burst 2
	}
	reverse_proxy %s`, recipe, zone, backend)
	}
	call := harness.ToolCall(1, "echo", map[string]any{"text": "x"})
	drain := func(c *harness.Caddy) {
		t.Helper()
		for i, want := range []int{200, 200, 429} {
			if r := harness.Post(t, c.URL+"/mcp/messages/", call); r.Status != want {
				t.Fatalf("call %d on /mcp/messages/: %d %s, want %d", i+1, r.Status, r.Body, want)
			}
		}
		be.got()
	}

	c := harness.StartCaddy(t, site("dots_open", ""), nil, harness.Options{})
	drain(c)
	for _, p := range dotPaths {
		r := harness.Post(t, c.URL+p, call)
		if got := be.got(); r.Status != http.StatusOK || len(got) != 1 || got[0] != p {
			t.Fatalf("without the recipe, %s: %d, backend saw %q; want the call forwarded as sent (the bypass the README describes)", p, r.Status, got)
		}
	}

	c.Load(t, harness.Config(site("dots_closed", readmeDotRecipe(t)), backend, c.Port, c.AdminPort, c.Storage, ""))
	drain(c)
	for _, p := range dotPaths {
		r := harness.Post(t, c.URL+p, call)
		if got := be.got(); r.Status != http.StatusBadRequest || len(got) != 0 {
			t.Fatalf("with the recipe, %s: %d, backend saw %q; want 400 and nothing forwarded", p, r.Status, got)
		}
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/a..b/c", "/", "/a;b/c"} {
		if r := harness.Post(t, c.URL+p, call); r.Status != http.StatusOK || len(be.got()) != 1 {
			t.Fatalf("with the recipe, %s: %d; want it served as before", p, r.Status)
		}
	}
}
