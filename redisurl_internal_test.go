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

// A store URL holding a placeholder Caddy knows is checked at start, once
// expanded, never as written: a variable whose value holds a brace (a
// password's `{x}`) failed `caddy adapt` with "invalid URL scheme", the
// placeholder's own text parsed as the URL, instead of the start's
// error saying to encode the password.
func TestRedisURLFromAVariableIsCheckedExpanded(t *testing.T) {
	t.Setenv("MCPRL_TEST_REDIS_URL", "redis://:SECRET{x}yz@127.0.0.1:6379/2")
	rs := &RedisStore{URL: "{env.MCPRL_TEST_REDIS_URL}"}
	if _, err := compile(&Handler{Store: &Store{Redis: rs}}); err != nil {
		t.Fatalf("compiling: %v, want the URL left to the start", err)
	}
	err := checkRedisStore(rs, "braces")
	if err == nil || !strings.Contains(err.Error(), "percent-encode") || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("err = %v, want the URL refused at start, saying to encode the password, without quoting it", err)
	}
	for url, now := range map[string]bool{
		"redis://127.0.0.1:6379/0":               true,
		"redis://:QzS3{crT}@127.0.0.1:6379/0":    true, // no placeholder: the brace fails it now
		"{env.MCPRL_TEST_REDIS_URL}":             false,
		"redis://:{crT}@{env.MCPRL_TEST_HOST}/0": false,
	} {
		if got := checkableNow(url); got != now {
			t.Errorf("checkableNow(%q) = %v, want %v", url, got, now)
		}
	}
}

// A placeholder in a store URL that expands to nothing (an unset
// variable) fails the start naming it, wherever it stands in the URL:
// go-redis would dial its default port, or host, for the part it leaves
// empty, each instance its own local Redis.
func TestRedisURLWithAnEmptyPlaceholderIsRefused(t *testing.T) {
	for url, want := range map[string]string{
		"{env.MCPRL_TEST_UNSET_REDIS_URL}":                    "empty once expanded",
		"redis://127.0.0.1:{env.MCPRL_TEST_UNSET_PORT}/2":     "{env.MCPRL_TEST_UNSET_PORT} is empty",
		"redis://{env.MCPRL_TEST_UNSET_HOST}:6380/2":          "{env.MCPRL_TEST_UNSET_HOST} is empty",
		"redis://:{env.MCPRL_TEST_UNSET_PW}@127.0.0.1:6379/2": "{env.MCPRL_TEST_UNSET_PW} is empty",
	} {
		err := checkRedisStore(&RedisStore{URL: url}, "unset")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("store redis %s: err = %v, want %q", url, err, want)
		}
	}
	t.Setenv("MCPRL_TEST_SET_PORT", "6380")
	if err := checkRedisStore(&RedisStore{URL: "redis://127.0.0.1:{env.MCPRL_TEST_SET_PORT}/2"}, "set"); err != nil {
		t.Fatalf("store redis with its port in a variable that is set: %v", err)
	}
}
