package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A mistyped subcommand is an error, not a help text and success: a
// script running it must not carry on as if it had printed a fingerprint.
func TestUnknownSubcommandFails(t *testing.T) {
	out, err := exec.Command(harness.BuildCaddy(t), "mcp-ratelimit", "fingerprnt").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown subcommand "fingerprnt"`) {
		t.Fatalf("exit error %v, output %s: want a failure naming the subcommand", err, out)
	}
}
