package mcplimit

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// Two handlers' zone-wide settings differ when their flush intervals or
// stores do, and the difference is said without a Redis URL, which may
// hold a password.
func TestZoneWideConflictNamesWhatDiffers(t *testing.T) {
	t.Setenv("ZONEWIDE_DB", "4")
	redis := func(url string, cluster bool) *RedisStore { return &RedisStore{URL: url, Cluster: cluster} }
	secret := "redis://:hunter2@127.0.0.1:6379/1"
	for _, tc := range []struct {
		a, b *policy
		want string
	}{
		{&policy{flush: time.Second}, &policy{flush: time.Second}, ""},
		{&policy{flush: time.Second, redis: redis(secret, false)}, &policy{flush: time.Second, redis: redis(secret, false)}, ""},
		{&policy{flush: 5 * time.Second}, &policy{flush: 30 * time.Second}, "flush_interval 5s here, 30s in another"},
		{&policy{redis: redis(secret, false)}, &policy{}, "store redis here, no store in another"},
		{&policy{}, &policy{redis: redis(secret, false)}, "no store here, store redis in another"},
		{&policy{redis: redis(secret, false)}, &policy{redis: redis("redis://127.0.0.1:6379/1", false)}, "store redis url with another user or password in another"},
		{&policy{redis: redis(secret, false)}, &policy{redis: redis("redis://:hunter2@127.0.0.1:6379/2", false)}, "store redis url with another db in another"},
		{&policy{redis: redis(secret, false)}, &policy{redis: redis("rediss://:hunter3@127.0.0.2:6379/1?pool_size=3", false)}, "store redis url with another scheme, user or password, host, options in another"},
		// As they run: no DB is DB 0, and options are options in any
		// order.
		{&policy{redis: redis("redis://127.0.0.1:6379", false)}, &policy{redis: redis("redis://127.0.0.1:6379/0", false)}, ""},
		{&policy{redis: redis("redis://h:1/0?pool_size=7&dial_timeout=2s", false)}, &policy{redis: redis("redis://h:1/0?dial_timeout=2s&pool_size=7", false)}, ""},
		{&policy{redis: redis("redis://h:1?addr=h:2&addr=h:3", true)}, &policy{redis: redis("redis://h:1?addr=h:3&addr=h:2", true)}, ""},
		{&policy{redis: redis(secret, false)}, &policy{redis: redis(secret, true)}, "store redis without cluster here, with cluster in another"},
		{&policy{redis: redis(secret, false)}, &policy{redis: &RedisStore{URL: secret, Timeout: caddy.Duration(time.Second)}}, "store redis timeout 50ms here, 1s in another"},
		// As they run: a timeout left out is the default, and a URL is
		// what its placeholders expand to.
		{&policy{redis: redis(secret, false)}, &policy{redis: &RedisStore{URL: secret, Timeout: caddy.Duration(redisstore.DefaultTimeout)}}, ""},
		{&policy{redis: redis("redis://127.0.0.1:6379/{env.ZONEWIDE_DB}", false)}, &policy{redis: redis("redis://127.0.0.1:6379/4", false)}, ""},
		{&policy{flush: time.Second}, &policy{flush: 2 * time.Second, redis: redis(secret, false)}, "flush_interval 1s here, 2s in another; no store here, store redis in another"},
	} {
		got := zoneWideConflict(tc.a, tc.b)
		if got != tc.want {
			t.Errorf("zoneWideConflict = %q, want %q", got, tc.want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("zoneWideConflict quotes the password: %q", got)
		}
	}
}
