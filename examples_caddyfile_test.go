package mcplimit_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

func TestExampleCaddyfilesAdapt(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("examples", "*Caddyfile"))
	if err != nil || len(files) < 2 {
		t.Fatalf("example Caddyfiles: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := harness.AdaptErr(string(b)); err != nil {
				t.Fatalf("%s does not adapt: %v", f, err)
			}
		})
	}
}
