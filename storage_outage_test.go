package mcplimit_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/lockfile"
)

func init() {
	caddy.RegisterModule(flakyStorage{})
}

// flakyStorage is file-system storage that is unreachable while the file
// Down exists: every operation but Unlock then fails. Unlock fails while
// the file Down+".unlock" exists, and the writes (Lock, Store, Delete)
// while Down+".ro" does, as on a read-only folder. Caddyfile:
//
//	storage mcprl_flaky <root> <down file>
type flakyStorage struct {
	Root string `json:"root"`
	Down string `json:"down"`
}

// CaddyModule returns the Caddy module information.
func (flakyStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.storage.mcprl_flaky", New: func() caddy.Module { return new(flakyStorage) }}
}

// UnmarshalCaddyfile reads the root and the down file.
func (s *flakyStorage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // module name
	if !d.Args(&s.Root, &s.Down) || d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// CertMagicStorage implements caddy.StorageConverter.
func (s *flakyStorage) CertMagicStorage() (certmagic.Storage, error) {
	return &flakyFS{fs: &certmagic.FileStorage{Path: s.Root}, down: s.Down}, nil
}

type flakyFS struct {
	fs   *certmagic.FileStorage
	down string
}

var errOutage = errors.New("storage unreachable (test outage)")

func (f *flakyFS) check() error {
	if _, err := os.Stat(f.down); err == nil {
		return errOutage
	}
	return nil
}

var errReadOnly = errors.New("read-only file system (test outage)")

// checkWrite is check for an operation that writes.
func (f *flakyFS) checkWrite() error {
	if _, err := os.Stat(f.down + ".ro"); err == nil {
		return errReadOnly
	}
	return f.check()
}

func (f *flakyFS) Lock(ctx context.Context, name string) error {
	if err := f.checkWrite(); err != nil {
		return err
	}
	return f.fs.Lock(ctx, name)
}

// Unlock works through an outage, so a lock taken before it does not go
// stale; it fails only while the file <down>.unlock exists, and the lock
// then stays held, its file kept fresh, as one certmagic could not remove.
func (f *flakyFS) Unlock(ctx context.Context, name string) error {
	if _, err := os.Stat(f.down + ".unlock"); err == nil {
		return errOutage
	}
	return f.fs.Unlock(ctx, name)
}

func (f *flakyFS) Store(ctx context.Context, key string, value []byte) error {
	if err := f.checkWrite(); err != nil {
		return err
	}
	return f.fs.Store(ctx, key, value)
}

func (f *flakyFS) Load(ctx context.Context, key string) ([]byte, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.fs.Load(ctx, key)
}

func (f *flakyFS) Delete(ctx context.Context, key string) error {
	if err := f.checkWrite(); err != nil {
		return err
	}
	return f.fs.Delete(ctx, key)
}

func (f *flakyFS) Exists(ctx context.Context, key string) bool {
	return f.check() == nil && f.fs.Exists(ctx, key)
}

func (f *flakyFS) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.fs.List(ctx, prefix, recursive)
}

func (f *flakyFS) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	if err := f.check(); err != nil {
		return certmagic.KeyInfo{}, err
	}
	return f.fs.Stat(ctx, key)
}

// outage is one test's flaky storage and Caddy data directory.
type outage struct {
	t          *testing.T
	root, down string
	data       string // XDG_DATA_HOME
}

// newOutage gives the test a flaky storage, up, and a Caddy data
// directory of its own (so no key cached by another test is found).
func newOutage(t *testing.T) *outage {
	dir := t.TempDir()
	o := &outage{t: t, root: filepath.Join(dir, "storage"), down: filepath.Join(dir, "down"), data: filepath.Join(dir, "data")}
	t.Setenv("XDG_DATA_HOME", o.data)
	return o
}

// options makes Caddy use the flaky storage.
func (o *outage) options() harness.Options {
	return harness.Options{Global: fmt.Sprintf("storage mcprl_flaky %s %s", o.root, o.down)}
}

// set makes the storage unreachable (down) or reachable again.
func (o *outage) set(down bool) {
	o.t.Helper()
	o.mark(o.down, down)
}

// setReadOnly makes the storage refuse writes (read-only) or take them
// again.
func (o *outage) setReadOnly(on bool) {
	o.t.Helper()
	o.mark(o.down+".ro", on)
}

// setUnlock makes Unlock fail (down) or work again.
func (o *outage) setUnlock(down bool) {
	o.t.Helper()
	o.mark(o.down+".unlock", down)
}

// mark creates the marker file name (on) or removes it, which flakyFS
// reads at each operation.
func (o *outage) mark(name string, on bool) {
	o.t.Helper()
	if !on {
		if err := os.Remove(name); err != nil {
			o.t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		o.t.Fatal(err)
	}
}

// putKey stores a new random fingerprint key for zone, as another instance
// would, and returns it.
func (o *outage) putKey(zone string) []byte {
	o.t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dir := filepath.Join(o.root, "mcp_ratelimit", zone)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		o.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fingerprint.key"), key, 0o600); err != nil {
		o.t.Fatal(err)
	}
	return key
}

// keyFile is the file of zone's fingerprint key in storage.
func (o *outage) keyFile(zone string) string {
	return filepath.Join(o.root, "mcp_ratelimit", zone, "fingerprint.key")
}

// storedKey is zone's fingerprint key in storage, nil when there is none.
func (o *outage) storedKey(zone string) []byte {
	o.t.Helper()
	key, err := os.ReadFile(o.keyFile(zone))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		o.t.Fatal(err)
	}
	return key
}

// cachedKey is zone's fingerprint key cached on this host, checking that
// only its owner can read it.
func (o *outage) cachedKey(zone string) []byte {
	o.t.Helper()
	name := filepath.Join(o.data, "caddy", "mcp_ratelimit-keycache", hex.EncodeToString([]byte(zone))+".key")
	fi, err := os.Stat(name)
	if err != nil {
		o.t.Fatalf("cached key: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		o.t.Errorf("cached key mode %v, want 0600", fi.Mode().Perm())
	}
	key, err := os.ReadFile(name)
	if err != nil {
		o.t.Fatal(err)
	}
	return key
}

// onlyIdentity returns the fingerprint of the one proven identity of zone.
func onlyIdentity(t *testing.T, e *env, zone string) string {
	t.Helper()
	var v struct {
		Identities []struct {
			Fingerprint string `json:"fingerprint"`
		} `json:"identities"`
	}
	e.caddy.AdminJSON(t, "/mcp_ratelimit/"+zone+"/identities", &v)
	if len(v.Identities) != 1 {
		t.Fatalf("proven identities of %s: %+v, want one", zone, v.Identities)
	}
	return v.Identities[0].Fingerprint
}

// degradedOnKey checks that zone shows degraded in the admin API because
// its fingerprint key is not confirmed in storage, and that the metric
// says whether its quotas are counted in memory: gauge 1, or 0 with a
// Redis store that holds them.
func degradedOnKey(t *testing.T, e *env, zone string, gauge float64) {
	t.Helper()
	qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore
	if !qs.Degraded || !strings.Contains(qs.LastError, "fingerprint key") {
		t.Fatalf("quota_store %+v, want degraded on the fingerprint key", qs)
	}
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_quota_degraded{zone="`+zone+`"}`); v != gauge {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v, want %v", v, gauge)
	}
}

// recovers waits until storage answers zone's flushes again with nothing
// pending, and checks the metric is back to 0.
func recovers(t *testing.T, e *env, zone string) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, "the zone to recover from the outage", func() bool {
		qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore
		return !qs.Degraded && qs.Pending == 0
	})
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_quota_degraded{zone="`+zone+`"}`); v != 0 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v after recovery, want 0", v)
	}
}

// A flush whose known-good set storage does not take fails as one whose
// counts it does not take: the zone shows degraded with the error in the
// admin API and the metric, and recovers, the set saved, once storage
// takes it again.
func TestUnsavableKnownSetShowsAsDegraded(t *testing.T) {
	const zone = "known_unsavable"
	o := newOutage(t)
	e := start(t, "zone "+zone+"\nflush_interval 1s", o.options())
	known := filepath.Join(o.root, "mcp_ratelimit", zone, "known")
	if err := os.MkdirAll(filepath.Join(known, "blocked"), 0o700); err != nil {
		t.Fatal(err)
	}
	e.prove("valid-known-unsavable")
	harness.Eventually(t, 10*time.Second, "the zone to report degraded on the known set", func() bool {
		qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore
		return qs.Degraded && strings.Contains(qs.LastError, "known") && qs.Failures > 0
	})
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_quota_degraded{zone="`+zone+`"}`); v != 1 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v, want 1", v)
	}
	if err := os.RemoveAll(known); err != nil {
		t.Fatal(err)
	}
	recovers(t, e, zone)
	fp := onlyIdentity(t, e, zone)
	harness.Eventually(t, 10*time.Second, "the proven identity saved", func() bool {
		data, err := os.ReadFile(known)
		return err == nil && strings.Contains(string(data), fp)
	})
}

// The scripts are loaded into Redis when a zone starts with it, when it
// comes back after an outage (a restarted Redis has lost them), and when
// the zone's periodic check finds them gone with no call having failed (a
// restart between two calls): no decision pays a script miss (EVALSHA,
// then EVAL sending the script), which on a slow host outlasts the store's
// timeout.
func TestRedisScriptsAreLoadedBeforeTheFirstDecision(t *testing.T) {
	const preloaded = 4 // the decision, peek, refund and push scripts
	rd := harness.StartRedis(t)
	loads := func() int64 { return rd.Calls(t)["script|load"] }
	e := start(t, "zone redis_preload\npreauth 100/s burst 100\nstore redis "+rd.URL)
	loaded := func(what string, from int64) {
		t.Helper()
		harness.Eventually(t, 15*time.Second, "the scripts loaded "+what, func() bool { return loads()-from >= preloaded })
		before := rd.Calls(t)
		e.prove("valid-preload")
		e.spend("valid-preload", 1)
		after := rd.Calls(t)
		if n := after["eval"] - before["eval"]; n != 0 || after["evalsha"] == before["evalsha"] {
			t.Fatalf("%d decisions sent their script %s (calls %v, then %v)", n, what, before, after)
		}
	}
	loaded("at the start", 0)
	rd.Kill()
	e.spend("valid-preload", 1) // decided locally: the zone is degraded
	rd.Start(t)
	harness.Eventually(t, 15*time.Second, "the store back", func() bool {
		return !adminZone(t, e.caddy, "redis_preload")["store"].(map[string]any)["degraded"].(bool)
	})
	loaded("after the outage", 0) // a new Redis counts its calls from 0
	from := loads()
	rd.Do(t, "SCRIPT", "FLUSH")
	loaded("after they were lost between two calls", from)
}

// countedBeforeOutage starts zone on a flaky storage, still up, with a
// daily quota of limit, and has token proven and counted n times; it
// returns the site block, the outage, the env and token's fingerprint.
func countedBeforeOutage(t *testing.T, zone, token string, limit, n int) (string, *outage, *env, string) {
	t.Helper()
	skipNearReset(t, nextDay)
	block := "zone " + zone + "\nflush_interval 1s\nquota " + strconv.Itoa(limit) + "/day"
	o := newOutage(t)
	e := start(t, block, o.options())
	e.prove(token)
	e.spend(token, n)
	return block, o, e, onlyIdentity(t, e, zone)
}

func TestRestartDuringStorageOutageKeepsFingerprints(t *testing.T) {
	const zone, token = "outage_restart", "valid-outage-restart"
	block, o, _, fp := countedBeforeOutage(t, zone, token, 1000, 1)
	if err := caddy.Stop(); err != nil { // a graceful stop flushes
		t.Fatal(err)
	}

	o.set(true)
	e := start(t, block, o.options())
	e.prove(token)
	e.spend(token, 2)
	if got := onlyIdentity(t, e, zone); got != fp {
		t.Fatalf("fingerprint after a restart during the outage %s, want %s as before", got, fp)
	}
	degradedOnKey(t, e, zone, 1)
	if used := identityQuotaUsed(t, e, zone, fp); used["day"] != 3 {
		t.Fatalf("quota used during the outage %v, want day 3: the 1 stored before, from the host's copy of the totals, and the 2 counted in memory", used)
	}

	o.set(false)
	recovers(t, e, zone)
	if got := harness.StoredDayCounts(t, o.root, zone)["i/"+fp]; got != 3 {
		t.Fatalf("stored day count %d, want 3: the outage's counts pushed on top of the earlier one", got)
	}
	if used := identityQuotaUsed(t, e, zone, fp); used["day"] != 3 {
		t.Fatalf("quota used after recovery %v, want day 3", used)
	}
	if !bytes.Equal(o.cachedKey(zone), o.storedKey(zone)) {
		t.Fatal("the key cached on the host is not the stored key")
	}
}

func TestZoneCreatedDuringStorageOutageStoresItsKey(t *testing.T) {
	skipNearReset(t, nextDay)
	for _, tc := range []struct {
		name   string
		reload bool
	}{
		{"a start during the outage", false},
		{"a reload adding the zone during the outage", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const zone, token = "outage_new", "valid-outage-new"
			block := "zone " + zone + "\nflush_interval 1s\nquota 1000/day"
			o := newOutage(t)
			var e *env
			if tc.reload {
				e = start(t, "zone outage_other\nflush_interval 1s", o.options())
				o.set(true)
				site := fmt.Sprintf("mcp_ratelimit {\n%s\n}\nreverse_proxy $BACKEND", block)
				e.caddy.Load(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, o.options().Global))
			} else {
				o.set(true)
				e = start(t, block, o.options())
			}
			e.prove(token)
			e.spend(token, 1)
			fp := onlyIdentity(t, e, zone)
			degradedOnKey(t, e, zone, 1)

			o.set(false)
			recovers(t, e, zone)
			if got := fingerprintOf(t, o.root, zone, "Bearer "+token); got != fp {
				t.Fatalf("fingerprint under the stored key %s, want %s: the zone's key must become the stored one", got, fp)
			}
			if !bytes.Equal(o.cachedKey(zone), o.storedKey(zone)) {
				t.Fatal("the key cached on the host is not the stored key")
			}
			if got := harness.StoredDayCounts(t, o.root, zone)["i/"+fp]; got != 1 {
				t.Fatalf("stored day count %d, want 1", got)
			}
		})
	}
}

func TestZoneCreatedDuringStorageOutageAdoptsKeyStoredMeanwhile(t *testing.T) {
	skipNearReset(t, nextDay)
	const zone, token = "outage_adopt", "valid-outage-adopt"
	o := newOutage(t)
	o.set(true)
	e := start(t, "zone "+zone+"\nflush_interval 1s\nquota 1000/day", o.options())
	e.prove(token)
	e.spend(token, 1)
	provisional := onlyIdentity(t, e, zone)

	// Another instance, which could reach storage, created the key.
	key := o.putKey(zone)

	o.set(false)
	recovers(t, e, zone)
	if !bytes.Equal(o.storedKey(zone), key) {
		t.Fatal("the stored key was replaced")
	}
	if !bytes.Equal(o.cachedKey(zone), key) {
		t.Fatal("the key cached on the host is not the stored key")
	}
	fp := fingerprintOf(t, o.root, zone, "Bearer "+token)
	if fp == provisional {
		t.Fatal("the provisional key was the stored one")
	}
	// The identity now fingerprints under the stored key: it proves itself
	// again and is counted there.
	e.prove(token)
	e.spend(token, 1)
	if used := identityQuotaUsed(t, e, zone, fp); used["day"] != 1 {
		t.Fatalf("quota used under the stored key %v, want day 1", used)
	}
}

func TestRedisKeyKeepsPrecedenceOverStorageAfterOutage(t *testing.T) {
	const zone, token = "outage_redis", "valid-outage-redis"
	rd := harness.StartRedis(t)
	inRedis := make([]byte, 32)
	_, _ = rand.Read(inRedis)
	rd.Do(t, "SET", "mcprl:{"+zone+"}:fpkey", string(inRedis))
	o := newOutage(t)
	// Storage holds another key (written before the store was added),
	// and is unreachable when the zone starts.
	inStorage := o.putKey(zone)
	o.set(true)
	e := start(t, "zone "+zone+"\nflush_interval 1s\nstore redis "+rd.URL, o.options())
	e.prove(token)
	e.spend(token, 1)
	fp := onlyIdentity(t, e, zone)
	m := hmac.New(sha256.New, inRedis)
	m.Write([]byte("Bearer " + token))
	if want := hex.EncodeToString(m.Sum(nil)[:16]); fp != want {
		t.Fatalf("fingerprint %s, want %s under the key in redis", fp, want)
	}
	degradedOnKey(t, e, zone, 0) // Redis holds the quotas

	o.set(false)
	recovers(t, e, zone)
	e.prove(token)
	e.spend(token, 1)
	if got := onlyIdentity(t, e, zone); got != fp {
		t.Fatalf("fingerprint after storage returned %s, want %s: the key in redis takes precedence", got, fp)
	}
	if got := o.storedKey(zone); !bytes.Equal(got, inRedis) || bytes.Equal(got, inStorage) {
		t.Fatal("the key in storage is not redis's once storage answers")
	}
	if !bytes.Equal(o.cachedKey(zone), inRedis) {
		t.Fatal("the key cached on the host is not the one in use")
	}
}

// A graceful stop while storage is unreachable keeps the counts it could
// not push on the host; the next start counts them again and pushes them
// when storage returns: nothing is lost.
func TestStopDuringStorageOutageKeepsUnpushedCounts(t *testing.T) {
	const zone, token = "outage_stop", "valid-outage-stop"
	block, o, e, fp := countedBeforeOutage(t, zone, token, 1000, 1)
	o.set(true)
	e.spend(token, 2)
	if err := caddy.Stop(); err != nil { // its final flush fails
		t.Fatal(err)
	}
	e = start(t, block, o.options())
	if used := identityQuotaUsed(t, e, zone, fp); used["day"] < 2 {
		t.Fatalf("quota used after a restart during the outage %v, want the 2 unpushed counts back", used)
	}
	o.set(false)
	recovers(t, e, zone)
	if got := harness.StoredDayCounts(t, o.root, zone)["i/"+fp]; got != 3 {
		t.Fatalf("stored day count %d, want 3: the counts of the stop during the outage pushed", got)
	}
}

// A push whose Unlock fails leaves its lock held, kept fresh while its file
// exists: the next flushes release it before pushing, so once Unlock works
// the zone recovers and every count is pushed, instead of every push
// waiting on this instance's own lock until a restart.
func TestFailedUnlockDoesNotHoldTheQuotaLockForever(t *testing.T) {
	const zone, token = "unlock_fails", "valid-unlock-fails"
	_, o, e, fp := countedBeforeOutage(t, zone, token, 1000, 1)
	o.setUnlock(true)
	e.spend(token, 2)
	harness.Eventually(t, 10*time.Second, "the zone degraded on the unlock", func() bool {
		qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore
		return qs.Degraded && strings.Contains(qs.LastError, "unlock")
	})
	e.spend(token, 1)
	o.setUnlock(false)
	recovers(t, e, zone)
	if got := harness.StoredDayCounts(t, o.root, zone)["i/"+fp]; got != 4 {
		t.Fatalf("stored day count %d, want 4", got)
	}
}

// During a storage outage the counts not yet pushed are kept on the host
// after every flush, not only at a graceful stop, so a crash loses at most
// one flush interval of them; once pushed, the host's copy goes.
func TestStorageOutageKeepsUnpushedCountsOnTheHostAsItGoes(t *testing.T) {
	const zone, token = "outage_mirror", "valid-outage-mirror"
	_, o, e, fp := countedBeforeOutage(t, zone, token, 1000, 1)
	o.set(true)
	e.spend(token, 2)
	files := filepath.Join(caddy.AppDataDir(), "mcp_ratelimit-unpushed", hex.EncodeToString([]byte(zone))+".*.counts")
	harness.Eventually(t, 10*time.Second, "the unpushed counts kept on the host", func() bool {
		names, _ := filepath.Glob(files)
		if len(names) != 1 {
			return false
		}
		b, _ := os.ReadFile(names[0])
		return bytes.Contains(b, []byte("i/"+fp+" "))
	})
	o.set(false)
	recovers(t, e, zone)
	harness.Eventually(t, 10*time.Second, "the host's copy removed once pushed", func() bool {
		names, _ := filepath.Glob(files)
		return len(names) == 0
	})
}

// When Redis becomes unreachable, the in-memory quota goes on from what
// Redis last reported, not from zero: an identity that used its quota in
// Redis stays refused during the outage. One that a 403 made this
// instance forget is still charged to the quota Redis counted, before the
// outage and during it.
func TestRedisOutageKeepsTheQuotaRedisCounted(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone = "outage_redis_quota"
	rd := harness.StartRedis(t)
	e := start(t, "zone "+zone+"\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 3/day\nstore redis "+rd.URL)
	e.prove("valid-used-up")
	e.spend("valid-used-up", 3)
	e.prove("valid-forgotten")
	e.spend("valid-forgotten", 3)
	auth := []string{"Authorization", "Bearer valid-forgotten"}
	e.forget(auth...)
	before := e.backend.ToolCalls()
	refusal(t, e.call(4, auth...), http.StatusTooManyRequests, "quota") // decided in Redis
	rd.Kill()
	refusal(t, e.call(4, "Authorization", "Bearer valid-used-up"), http.StatusTooManyRequests, "quota")
	refusal(t, e.call(5, auth...), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "calls over a quota Redis counted, during a Redis outage")
	if !adminZone(t, e.caddy, zone)["store"].(map[string]any)["degraded"].(bool) {
		t.Fatal("the zone does not report the Redis store degraded")
	}
}

// A reload that removes `store redis` decides locally again, from what
// Redis last reported to this instance: a quota used up in Redis stays
// used up.
func TestRemovingTheRedisStoreKeepsTheQuotaRedisCounted(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone = "redis_removed_quota"
	rd := harness.StartRedis(t)
	block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 3/day"
	e := start(t, block+"\nstore redis "+rd.URL)
	e.prove("valid-removed")
	e.spend("valid-removed", 3)
	e = start(t, block)
	before := e.backend.ToolCalls()
	refusal(t, e.call(4, "Authorization", "Bearer valid-removed"), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over a quota Redis counted, after the store was removed")
}

// A stop after a reload removed `store redis` keeps on the host what
// Redis last reported, with the calls counted since, as a stop while on
// Redis does: a start without the store counts from those, so a quota used
// up partly in Redis stays used up.
func TestRestartAfterRemovingTheRedisStoreKeepsTheQuotaRedisCounted(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone, token = "redis_removed_restart", "valid-removed-restart"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 5/day"
	e := start(t, block, opts)
	e.prove(token)
	e.spend(token, 1)
	e = start(t, block+"\nstore redis "+rd.URL, opts)
	e.spend(token, 2)
	e = start(t, block, opts)
	e.spend(token, 1) // without the store
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	oneLeftAfterStart(t, block, opts, token, "a call over a quota counted partly in Redis, after a restart without the store")
}

// A restart with `store redis` added back, Redis answering, carries to
// Redis what it reported before the store was removed plus what was
// counted locally since, as a reload adding the store back does: whether
// a reload removed the store (the stop saves the calls counted since in
// storage) or a restart did (the start finds the host's copy of what
// Redis reported, and keeps its calls for Redis too). Another instance's
// call counted in Redis meanwhile hides none of them.
func TestRestartWithTheRedisStoreAddedBackCarriesTheCountsMadeWithoutIt(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	for _, c := range []struct {
		name    string
		removed func(t *testing.T, block string, opts harness.Options) *env
	}{
		{"removed by reload", func(t *testing.T, block string, opts harness.Options) *env {
			return start(t, block, opts)
		}},
		{"removed by restart", func(t *testing.T, block string, opts harness.Options) *env {
			if err := caddy.Stop(); err != nil {
				t.Fatal(err)
			}
			return start(t, block, opts)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			suffix := strings.ReplaceAll(c.name, " ", "_")
			zone, token := "redis_readded_"+suffix, "valid-readded-"+suffix
			skipNearReset(t, nextDay)
			rd := harness.StartRedis(t)
			opts := harness.Options{Storage: t.TempDir()}
			block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 5/day"
			// A long timeout: on a loaded host a call whose round trip
			// outlasts the default is counted locally as well as by
			// Redis, which runs it late (the README's over-count), and a
			// call the test spends would be refused.
			withRedis := block + "\nstore redis " + rd.URL + " {\ntimeout 10s\n}"
			e := start(t, withRedis, opts)
			e.prove(token)
			e.spend(token, 2)
			key := redisDayKey(zone, onlyIdentity(t, e, zone))
			e = c.removed(t, block, opts)
			e.prove(token)
			e.spend(token, 1)
			rd.Do(t, "INCRBY", key, "1") // another instance's call, in Redis
			if err := caddy.Stop(); err != nil {
				t.Fatal(err)
			}
			// In storage, for the next start with the store on any host.
			if saved, err := os.ReadDir(filepath.Join(opts.Storage, "mcp_ratelimit", zone, "redis-pending")); err != nil || len(saved) != 1 {
				t.Fatalf("counts saved in storage for redis at the stop: %v %v, want one object", saved, err)
			}
			e = start(t, withRedis, opts)
			e.prove(token)
			e.spend(token, 1)
			before := e.backend.ToolCalls()
			refusal(t, e.call(6, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
			unchanged(t, e, before, "a call over a quota counted in Redis, without it, and by another instance, after a restart with the store back")
		})
	}
}

// Adding `store redis` back by reload pushes the calls counted while it
// was removed before raising Redis to the local counts: calls another
// instance counted in Redis meanwhile, which this one was never told of,
// must not hide them (a raise alone would leave Redis at 3 here, and let
// a fifth call pass a quota of 4).
func TestReloadAddingTheRedisStoreBackPushesTheCountsMadeWithoutIt(t *testing.T) {
	const zone, token = "redis_readded_reload", "valid-readded-reload"
	skipNearReset(t, nextDay)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // no host copy of an earlier run's counts
	rd := harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 4/day"
	withRedis := block + "\nstore redis " + rd.URL
	e := start(t, withRedis, opts)
	e.prove(token)
	e.spend(token, 2)
	key := redisDayKey(zone, onlyIdentity(t, e, zone))
	e = start(t, block, opts)
	e.spend(token, 1)
	rd.Do(t, "INCRBY", key, "1") // another instance's call, in Redis
	e = start(t, withRedis, opts)
	// The zone decides locally (degraded) until its probe has pushed the
	// calls and raised Redis: the push alone shows before that ends.
	harness.Eventually(t, 10*time.Second, "the call counted without the store pushed to redis", func() bool {
		return rd.Do(t, "GET", key) == "4" && !adminZone(t, e.caddy, zone)["store"].(map[string]any)["degraded"].(bool)
	})
	if qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore; qs.Degraded {
		t.Fatalf("quota_store %+v once Redis took the counts, want not degraded", qs)
	}
	before := e.backend.ToolCalls()
	refusal(t, e.call(5, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over a quota counted in Redis, without it, and by another instance")
}

// redisDayKey is the Redis key of an identity's count of the day.
func redisDayKey(zone, fp string) string {
	return "mcprl:{" + zone + "}:q:i/" + fp + ":d:" + time.Now().UTC().Format(time.DateOnly)
}

// A restart while storage is unreadable counts on from the totals the
// zone last read, copied on the host, not from zero: an identity that had
// used up its quota stays refused, though it must prove itself again.
func TestRestartDuringStorageOutageKeepsAUsedUpQuota(t *testing.T) {
	const zone, token = "outage_used_up", "valid-outage-used-up"
	block, o, e, _ := countedBeforeOutage(t, zone, token, 3, 3)
	refusal(t, e.call(4, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	harness.Eventually(t, 10*time.Second, "the 3 calls stored", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, o.root, zone)) == 3
	})
	o.set(true)
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	e = start(t, block, o.options())
	before := e.backend.ToolCalls()
	e.prove(token)
	refusal(t, e.call(5, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over a used-up quota after a restart during the outage")
}

// A quota used up is copied to the host at the next flush, not only when
// storage starts failing or the zone stops: after a crash (no stop to
// write it), a start during an outage reads that copy, and the identity
// stays refused rather than getting its quota again.
func TestUsedUpQuotaIsCopiedToTheHostAtTheNextFlush(t *testing.T) {
	const zone, token = "used_up_copied", "valid-used-up-copied"
	_, _, e, fp := countedBeforeOutage(t, zone, token, 3, 3)
	copyPath := filepath.Join(caddy.AppDataDir(), "mcp_ratelimit-totals", hex.EncodeToString([]byte(zone))+".counts")
	harness.Eventually(t, 10*time.Second, "the used-up quota copied to the host", func() bool {
		b, err := os.ReadFile(copyPath)
		if err != nil {
			return false
		}
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "i/"+fp && f[3] == "3" {
				return true
			}
		}
		return false
	})
	refusal(t, e.call(4, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
}

// provenBesideLock starts zone on file-system storage of its own, with a
// daily quota and 1s flushes, has token proven, and returns the env, the
// storage and the file of the lock of today's quota object, whose folder
// it makes.
func provenBesideLock(t *testing.T, zone, token string) (*env, string, string) {
	t.Helper()
	skipNearReset(t, nextDay)
	storage := t.TempDir()
	e := start(t, "zone "+zone+"\nflush_interval 1s\nquota 1000/day", harness.Options{Storage: storage})
	e.prove(token)
	key := "mcp_ratelimit/" + zone + "/quota/day-" + time.Now().UTC().Format(time.DateOnly)
	lock := filepath.Join(storage, "locks", certmagic.StorageKeys.Safe(key)+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o700); err != nil {
		t.Fatal(err)
	}
	return e, storage, lock
}

// holdLock writes the file-storage lock file lock as a live holder's,
// fresh until certmagic takes it for stale (10s), and returns when.
func holdLock(t *testing.T, lock string) time.Time {
	t.Helper()
	now := time.Now()
	meta, _ := json.Marshal(map[string]time.Time{"created": now, "updated": now})
	if err := os.WriteFile(lock, meta, 0o600); err != nil {
		t.Fatal(err)
	}
	return now
}

// A storage lock left by a crashed instance holds every push until it
// goes stale (certmagic: 10s). A flush waits for it no longer than
// max(2s, flush_interval), then fails, so the stall shows as degraded
// well before the lock goes stale; the counts stay pending, and are
// pushed once it has.
func TestStaleLockShowsAsDegraded(t *testing.T) {
	const zone, token = "stale_lock", "valid-stale-lock"
	e, storage, lock := provenBesideLock(t, zone, token)
	now := holdLock(t, lock)
	e.spend(token, 2)
	harness.Eventually(t, 6*time.Second, "the zone to report degraded while the lock is fresh", func() bool {
		return adminZone(t, e.caddy, zone)["quota_store"].(map[string]any)["degraded"].(bool)
	})
	if time.Since(now) >= 10*time.Second {
		t.Skip("the machine is too slow to tell a short lock wait from the lock going stale")
	}
	harness.Eventually(t, 30*time.Second, "the counts pushed once the lock went stale", func() bool {
		return harness.StoredDayCounts(t, storage, zone)["i/"+onlyIdentity(t, e, zone)] == 2
	})
}

// A push that finds its lock held (another instance pushing) keeps the
// counts not yet pushed on the host before it waits, so that a crash
// during the wait, which can outlast a short flush interval, loses no
// more than one: the copy is there while the zone is not yet degraded,
// and goes once the counts are pushed.
func TestPushWaitingForALockKeepsItsCountsOnTheHost(t *testing.T) {
	const zone, token = "lock_wait_copy", "valid-lock-wait-copy"
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	e, storage, lock := provenBesideLock(t, zone, token)
	holdLock(t, lock)
	e.spend(token, 2)
	fp := onlyIdentity(t, e, zone)
	files := filepath.Join(caddy.AppDataDir(), "mcp_ratelimit-unpushed", hex.EncodeToString([]byte(zone))+".*.counts")
	harness.Eventually(t, 6*time.Second, "the counts kept on the host while the push waits, before the zone is degraded", func() bool {
		names, _ := filepath.Glob(files)
		if len(names) != 1 {
			return false
		}
		if b, _ := os.ReadFile(names[0]); !bytes.HasPrefix(b, []byte("i/"+fp+" ")) || !bytes.HasSuffix(b, []byte(" 2\n")) {
			return false
		}
		return !harness.GetZone(t, e.caddy.Admin, zone).QuotaStore.Degraded
	})
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the counts pushed and the host's copy removed", func() bool {
		names, _ := filepath.Glob(files)
		return len(names) == 0 && harness.StoredDayCounts(t, storage, zone)["i/"+fp] == 2
	})
}

// certmagic's file storage can keep a crashed instance's lock fresh
// forever (the goroutine refreshing a lock this process took and released
// refreshes whatever file has its name when it wakes): a lock every push
// has found held for six lock waits running is broken, and the counts are
// pushed.
func TestLockKeptFreshForeverIsBroken(t *testing.T) {
	const zone, token = "fresh_lock", "valid-fresh-lock"
	e, storage, lock := provenBesideLock(t, zone, token)
	lockfile.KeepFresh(t, lock)
	e.spend(token, 2)
	harness.Eventually(t, 10*time.Second, "the zone degraded on the held lock", func() bool {
		return harness.GetZone(t, e.caddy.Admin, zone).QuotaStore.Degraded
	})
	harness.Eventually(t, 40*time.Second, "the counts pushed once the lock was broken", func() bool {
		return harness.StoredDayCounts(t, storage, zone)["i/"+onlyIdentity(t, e, zone)] == 2
	})
	recovers(t, e, zone)
}

// A restart while Redis is unreachable counts on from what Redis last
// reported, copied on the host at the stop: an identity that used up its
// quota in Redis stays refused, instead of getting the quota afresh from
// each restart during the outage.
func TestRestartDuringRedisOutageKeepsTheQuotaRedisCounted(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone = "redis_restart_quota"
	rd := harness.StartRedis(t)
	block := "zone " + zone + "\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 3/day\nstore redis " + rd.URL
	e := start(t, block)
	e.prove("valid-restarted")
	e.spend("valid-restarted", 3)
	rd.Kill()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	e = start(t, block)
	before := e.backend.ToolCalls()
	e.prove("valid-restarted")
	refusal(t, e.call(4, "Authorization", "Bearer valid-restarted"), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, "a call over a quota Redis counted, after a restart during the Redis outage")
}

// A start on a storage that reads but cannot write (a read-only folder, a
// full disk: its key and counts load) is degraded at once, not at its
// first flush with counts to push, a flush interval later: fail_closed
// tools, whose calls must never go uncounted, are refused from the first
// call, while other tools are counted on this host.
func TestStartOnStorageThatCannotWriteIsDegradedAtOnce(t *testing.T) {
	const zone = "readonly_start"
	o := newOutage(t)
	o.putKey(zone)
	o.setReadOnly(true)
	e := start(t, "zone "+zone+"\npreauth 100/s burst 100\ntool analyze_photo {\n fail_closed\n}", o.options())
	if qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore; !qs.Degraded || !strings.Contains(qs.LastError, "read-only") {
		t.Fatalf("quota_store %+v at the start, want degraded with the storage's error", qs)
	}
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_quota_degraded{zone="`+zone+`"}`); v != 1 {
		t.Fatalf("mcp_ratelimit_quota_degraded %v at the start, want 1", v)
	}
	refusedUncounted(t, e, 1, "valid-ro-start", "a fail_closed call on a read-only storage")
	if r := e.callTool(2, "echo", "Authorization", "Bearer valid-ro-start"); r.Status != http.StatusOK {
		t.Fatalf("another tool on a read-only storage: %d %s, want it counted here", r.Status, r.Body)
	}
}

// With a Redis store, fail_closed tools follow Redis, and so does
// mcp_ratelimit_quota_degraded: calls are counted there (an unproven
// caller's with the next tick) while Caddy storage is down, so they are
// not refused as uncountable, nor the quotas said to be counted in memory;
// they are once Redis is down.
func TestFailClosedFollowsTheRedisStoreNotStorage(t *testing.T) {
	const zone = "redis_failclosed_storage"
	rd := harness.StartRedis(t)
	o := newOutage(t)
	e := start(t, "zone "+zone+"\nflush_interval 1s\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 100/day\n"+
		"tool analyze_photo {\n fail_closed\n}\nstore redis "+rd.URL, o.options())
	e.prove("valid-fc-proven")
	o.set(true)
	harness.Eventually(t, 10*time.Second, "storage degraded", func() bool {
		return harness.GetZone(t, e.caddy.Admin, zone).QuotaStore.Degraded
	})
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_quota_degraded{zone="`+zone+`"}`); v != 0 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v with Redis up and storage down, want 0", v)
	}
	for _, token := range []string{"valid-fc-proven", "valid-fc-unproven"} {
		if r := e.callTool(1, "analyze_photo", "Authorization", "Bearer "+token); r.Status != http.StatusOK {
			t.Fatalf("fail_closed tool by %s with Redis up and storage down: %d %s", token, r.Status, r.Body)
		}
	}
	rd.Kill()
	harness.Eventually(t, 10*time.Second, "Redis degraded", func() bool {
		return harness.GetStore(t, e.caddy.Admin, zone).Degraded
	})
	// Both down: quota_store names storage's error, its own.
	if qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore; !qs.Degraded || qs.LastError == harness.GetStore(t, e.caddy.Admin, zone).LastError {
		t.Fatalf("quota_store %+v with storage and Redis down, want degraded with storage's error", qs)
	}
	refusedUncounted(t, e, 2, "valid-fc-unproven-2", "a fail_closed call with Redis down")
	flushed := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore.Flushes
	o.set(false)
	harness.Eventually(t, 10*time.Second, "storage available again", func() bool {
		return harness.GetZone(t, e.caddy.Admin, zone).QuotaStore.Flushes > flushed
	})
	// The quotas are Redis's: quota_store stays degraded, as the metric
	// does, and names Redis's error now that storage answers.
	if qs := harness.GetZone(t, e.caddy.Admin, zone).QuotaStore; !qs.Degraded || qs.LastError != harness.GetStore(t, e.caddy.Admin, zone).LastError {
		t.Fatalf("quota_store %+v with Redis down, want degraded with Redis's error", qs)
	}
	if v, _ := harness.Metric(t, e.caddy.Admin, `mcp_ratelimit_quota_degraded{zone="`+zone+`"}`); v != 1 {
		t.Fatalf("mcp_ratelimit_quota_degraded = %v with Redis down, want 1", v)
	}
	refusedUncounted(t, e, 3, "valid-fc-proven", "a fail_closed call with Redis down and storage up")
}

// refusedUncounted checks that a call of the fail_closed tool
// analyze_photo by token is refused as one the store cannot count (503,
// STORE_UNAVAILABLE) and does not reach the backend.
func refusedUncounted(t *testing.T, e *env, id int, token, what string) {
	t.Helper()
	before := e.backend.ToolCalls()
	r := e.callTool(id, "analyze_photo", "Authorization", "Bearer "+token)
	if got := refusal(t, r, http.StatusServiceUnavailable, "store"); got.Error.Data.Code != "STORE_UNAVAILABLE" {
		t.Fatalf("%s: %s", what, r.Body)
	}
	unchanged(t, e, before, what)
}

// Calls another instance pushed to Redis after an outage reach storage
// after Redis reported them to this instance: once read from storage,
// they come out of what the host's copy says Redis held beyond storage,
// so a restart while Redis is unreachable counts each once (a copy
// holding them too made 6 of the 4 calls here, and refused the fifth).
func TestOthersPushedCallsReadFromStorageAreNotCountedTwiceByTheCopy(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone, token = "redis_pushed_then_stored", "valid-pushed-then-stored"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	opts := harness.Options{Storage: t.TempDir()}
	block := "zone " + zone + "\nflush_interval 10s\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 5/day\nstore redis " + rd.URL
	e := start(t, block, opts)
	e.prove(token)
	e.spend(token, 1)
	fp := onlyIdentity(t, e, zone)
	rd.Do(t, "INCRBY", redisDayKey(zone, fp), "2") // another instance's outage calls, pushed
	e.spend(token, 1)                              // Redis reports 4, storage holds none of them
	object := filepath.Join(opts.Storage, "mcp_ratelimit", zone, "quota", "day-"+time.Now().UTC().Format(time.DateOnly))
	if err := os.MkdirAll(filepath.Dir(object), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(object, []byte("i/"+fp+" 2\n"), 0o600); err != nil { // its flush
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // read between flushes (a tenth of the interval)
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	rd.Kill()
	oneLeftAfterStart(t, block, opts, token, "a call over a quota of 5 after 4 counted in Redis and 1 during the outage")
}

// oneLeftAfterStart starts block, and checks that token, proven anew, gets
// exactly one more call before its quota refuses it, and that the refused
// call does not reach the backend (why names it in the failure).
func oneLeftAfterStart(t *testing.T, block string, opts harness.Options, token, why string) {
	t.Helper()
	e := start(t, block, opts)
	e.prove(token)
	e.spend(token, 1)
	before := e.backend.ToolCalls()
	refusal(t, e.call(9, "Authorization", "Bearer "+token), http.StatusTooManyRequests, "quota")
	unchanged(t, e, before, why)
}
