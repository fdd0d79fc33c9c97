package mcplimit

import (
	"strings"
	"testing"
	"time"
)

// Two handlers' zone-wide settings differ when their flush intervals or
// stores do, and the difference is said without a Redis URL, which may
// hold a password.
func TestZoneWideConflictNamesWhatDiffers(t *testing.T) {
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
		{&policy{redis: redis(secret, false)}, &policy{redis: redis("redis://127.0.0.1:6379/1", false)}, "store redis with another url, cluster or timeout in another"},
		{&policy{redis: redis(secret, false)}, &policy{redis: redis(secret, true)}, "store redis with another url, cluster or timeout in another"},
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
