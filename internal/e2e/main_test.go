package e2e

import (
	"os"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.RemoveBuild()
	os.Exit(code)
}
