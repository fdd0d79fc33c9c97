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
//
// Caddy swaps its admin server while it loads and then exits without
// waiting for the old one's handler, so the refusal can be cut off by the
// exit (the load reads EOF). Such a run shows nothing either way and is
// tried again; an accepted load, or no answer in every run, fails.
func TestALoadDuringAStopIsRefused(t *testing.T) {
	const runs = 3
	for run := 1; run <= runs; run++ {
		status, body, err := loadDuringAStop(t)
		if err != nil {
			t.Logf("run %d: the load's answer was cut off by the exit: %v", run, err)
			continue
		}
		if status == http.StatusOK || !strings.Contains(body, "caddy is exiting") {
			t.Fatalf("load during the stop: %d %s, want it refused as Caddy is exiting", status, body)
		}
		return
	}
	t.Fatalf("the load during the stop was not answered in %d runs", runs)
}

// loadDuringAStop starts a process, stops it while a call runs, loads a
// config meanwhile and returns the load's answer, once the call has been
// finished by the graceful stop.
func loadDuringAStop(t *testing.T) (int, string, error) {
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
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if r := <-slow; r.Status != http.StatusOK {
		t.Fatalf("the slow call: %d %s, want it finished by the graceful stop", r.Status, r.Body)
	}
	p.Stop()
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, string(body), nil
}
