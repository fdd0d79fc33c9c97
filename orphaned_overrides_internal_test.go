package mcplimit

import (
	"testing"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A zone that starts with a fingerprint key made now (renamed, or on an
// empty storage) gives its overrides fingerprints of another key: they
// match no identity, and the load says so, naming how many. A zone whose
// key was there, one without overrides, and one whose key comes from
// Redis say nothing of it.
func TestOverridesOfANewKeyAreWarnedOf(t *testing.T) {
	const fp = "00112233445566778899aabbccddeeff"
	withOverride := func(zone string, redis bool) *Handler {
		h := &Handler{Zone: zone, Overrides: map[string]*Limits{fp: {Tenant: &RateLimit{Rate: "9/s"}}}}
		if redis {
			h.Store = &Store{Redis: &RedisStore{URL: "redis://127.0.0.1:1"}}
		}
		return h
	}
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	for _, c := range []struct {
		name string
		h    *Handler
		want bool
	}{
		{"a new key, overrides", withOverride("orphans", false), true},
		{"the same zone again: its key is there", withOverride("orphans", false), false},
		{"a new key, no overrides", &Handler{Zone: "no-overrides"}, false},
		{"a new key from storage, Redis's in force", withOverride("orphans-redis", true), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", t.TempDir()) // no key cached on this host
			pol, err := compile(c.h)
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.WarnLevel)
			if _, err := startKey(storage, pol.zone, zap.New(core), orphanable(pol)); err != nil {
				t.Fatal(err)
			}
			warned := logs.FilterMessageSnippet("overrides' fingerprints were computed under another key").All()
			if got := len(warned) == 1 && warned[0].ContextMap()["overrides"] == int64(1); got != c.want {
				t.Fatalf("warned %v (%v), want %v", got, logs.All(), c.want)
			}
		})
	}
}
