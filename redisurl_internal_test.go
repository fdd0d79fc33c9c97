package mcplimit

import (
	"strings"
	"testing"
)

// A store URL's placeholders Caddy knows are expanded; a brace no
// placeholder takes (in a password) stays as written, so the URL fails to
// parse and says to encode it, rather than reaching Redis with the brace's
// text cut out of the password.
func TestRedisURLKeepsBracesNoPlaceholderTakes(t *testing.T) {
	t.Setenv("MCPRL_TEST_REDIS_HOST", "cache.example")
	rs := &RedisStore{URL: "redis://:QzS3{crT}@{env.MCPRL_TEST_REDIS_HOST}:6379/0"}
	if got := expandRedisURL(rs); got != "redis://:QzS3{crT}@cache.example:6379/0" {
		t.Fatalf("expanded %q, want the host's placeholder expanded and the password's braces kept", got)
	}
	err := checkRedisStore(rs, "braces")
	if err == nil || !strings.Contains(err.Error(), "percent-encode") || strings.Contains(err.Error(), "crT") {
		t.Fatalf("err = %v, want the URL refused, saying to encode the password, without quoting it", err)
	}
}
