package mcplimit

import (
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A zone that starts on a fingerprint key made now (renamed, or on an
// empty storage) gives its overrides fingerprints of another key: they
// match no identity, and the load says so, naming how many. A zone whose
// key was there, and one without overrides, say nothing of it.
func TestOverridesOfANewKeyAreWarnedOf(t *testing.T) {
	const fp = "00112233445566778899aabbccddeeff"
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	for _, c := range []struct {
		name   string
		h      *Handler
		cached bool // this host holds the zone's last key
		want   bool
	}{
		{"a new key, overrides", &Handler{Zone: "orphans", Overrides: map[string]*Limits{fp: {Tenant: &RateLimit{Rate: "9/s"}}}}, false, true},
		{"the same zone again: its key is there", &Handler{Zone: "orphans", Overrides: map[string]*Limits{fp: {Tenant: &RateLimit{Rate: "9/s"}}}}, false, false},
		{"a new key, no overrides", &Handler{Zone: "no-overrides"}, false, false},
		// Storage gets the key this host last used: the zone's own.
		{"an empty storage, the key cached on this host", &Handler{Zone: "cached-key", Overrides: map[string]*Limits{fp: {Tenant: &RateLimit{Rate: "9/s"}}}}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", t.TempDir()) // no key cached on this host
			if c.cached {
				if err := writeKeyCache(c.h.Zone, newFingerprintKey()); err != nil {
					t.Fatal(err)
				}
			}
			pol, err := compile(c.h)
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zap.WarnLevel)
			z, err := newZone(storage, pol, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			_ = z.Destruct()
			warned := logs.FilterMessageSnippet("overrides' fingerprints were computed under another key").All()
			if got := len(warned) == 1 && warned[0].ContextMap()["overrides"] == int64(1); got != c.want {
				t.Fatalf("warned %v (%v), want %v", got, logs.All(), c.want)
			}
		})
	}
}

// With store redis the zone's key is Redis's: it is new only when Redis
// answered and took the key offered, as it does when it holds none.
func TestOverridesOfANewRedisKeyAreCountedWhenRedisHadNone(t *testing.T) {
	const fp = "00112233445566778899aabbccddeeff"
	pol, err := compile(&Handler{Zone: "orphans-redis", Overrides: map[string]*Limits{fp: {Tenant: &RateLimit{Rate: "9/s"}}},
		Store: &Store{Redis: &RedisStore{URL: "redis://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	offered, other := newFingerprintKey(), newFingerprintKey()
	answered := &zoneRedis{}
	answered.keyAdopted.Store(true)
	for _, c := range []struct {
		name string
		made bool
		rz   *zoneRedis
		key  []byte
		want int
	}{
		{"Redis took the key made now", true, answered, offered, 1},
		{"Redis held another", true, answered, other, 0},
		{"Redis not reached yet", true, &zoneRedis{}, offered, 0},
		{"storage's key was there", false, answered, offered, 0},
	} {
		if got := orphanedOverrides(pol, c.made, c.rz, c.key, offered); got != c.want {
			t.Errorf("%s: %d overrides orphaned, want %d", c.name, got, c.want)
		}
	}
}

// A zone that started on a key made then, its Redis store out of reach,
// warns once it first reaches a Redis that held no key and took that
// one: its overrides match no identity, as at a start with Redis there.
func TestOverridesOfAKeyRedisTakesLaterAreWarnedOf(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	port := freePort(t)
	h := &Handler{Zone: "orphans-later", Overrides: map[string]*Limits{"00112233445566778899aabbccddeeff": {Tenant: &RateLimit{Rate: "9/s"}}},
		Store: &Store{Redis: &RedisStore{URL: fmt.Sprintf("redis://127.0.0.1:%d", port)}}}
	pol, err := compile(h)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	z, err := newZone(&certmagic.FileStorage{Path: t.TempDir()}, pol, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	warned := func() int {
		return len(logs.FilterMessageSnippet("overrides' fingerprints were computed under another key").All())
	}
	if n := warned(); n != 0 {
		t.Fatalf("%d warnings with Redis out of reach, want none yet", n)
	}
	redis := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Process.Kill(); _ = redis.Wait() })
	for deadline := time.Now().Add(30 * time.Second); warned() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning 30s after Redis came up holding no key: %v", logs.All())
		}
	}
	time.Sleep(2 * time.Second) // more probes and key checks: still one warning
	if n := warned(); n != 1 {
		t.Fatalf("%d warnings, want one", n)
	}
}
