package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A config loaded through the admin API while a graceful stop waits for a
// call would run until the process exits, never stopped, and what it
// counted would never be flushed: the load is refused, naming why.
func TestALoadDuringAStopIsRefused(t *testing.T) {
	backend := harness.StartBackend(t)
	p := harness.StartProcess(t, harness.BuildCaddy(t), site(100), backend.Addr, harness.TempDir(t, "storage"), "")
	prove(t, p, "valid-alice")
	slow := make(chan *harness.Response, 1)
	go func() {
		slow <- harness.Post(t, p.URL+"/mcp", harness.ToolCall(2, "slow", map[string]any{"millis": 3000}), "Authorization", "Bearer valid-alice")
	}()
	harness.Eventually(t, 10*time.Second, "the slow call at the backend", func() bool { return backend.ToolCalls() == 1 })
	p.Interrupt(t)
	time.Sleep(300 * time.Millisecond) // the stop waits for the slow call
	cfg := harness.Config(site(200), backend.Addr, p.Port, p.AdminPort, harness.TempDir(t, "other"), "")
	resp, err := http.Post(p.Admin+"/load", "text/caddyfile", strings.NewReader(cfg))
	if err != nil {
		t.Fatalf("load during the stop: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "caddy is exiting") {
		t.Fatalf("load during the stop: %d %s, want it refused as Caddy is exiting", resp.StatusCode, body)
	}
	if r := <-slow; r.Status != http.StatusOK {
		t.Fatalf("the slow call: %d %s, want it finished by the graceful stop", r.Status, r.Body)
	}
	p.Stop()
}
