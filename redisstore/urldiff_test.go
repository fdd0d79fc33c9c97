package redisstore

import "testing"

// Two URLs differ in what go-redis reads from them: no DB is DB 0, options
// count in any order, and the parts that differ are named without the
// URLs, which may hold a password.
func TestURLDifference(t *testing.T) {
	const secret = "redis://:hunter2@127.0.0.1:6379/1"
	for _, c := range []struct {
		a, b    string
		cluster bool
		want    string
	}{
		{secret, secret, false, ""},
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379/0", false, ""},
		{"redis://h:1/0?pool_size=7&dial_timeout=2s", "redis://h:1/0?dial_timeout=2s&pool_size=7", false, ""},
		{"redis://h:1?addr=h:2&addr=h:3", "redis://h:1?addr=h:3&addr=h:2", true, ""},
		{secret, "redis://127.0.0.1:6379/1", false, "user or password"},
		{secret, "redis://:hunter2@127.0.0.1:6379/2", false, "db"},
		{secret, "rediss://:hunter3@127.0.0.2:6379/1?pool_size=3", false, "scheme, user or password, host, options"},
		{"redis://h:1", "redis://h:1?addr=h:2", true, "host"},
		{"redis://h:1/-1", "redis://h:1/-1", false, ""},
		{"redis://h:1/-1", "redis://h:1/-2", false, "url"},
	} {
		if got := URLDifference(c.a, c.b, c.cluster); got != c.want {
			t.Errorf("URLDifference(%q, %q, %v) = %q, want %q", c.a, c.b, c.cluster, got, c.want)
		}
	}
}
