package mcplimit

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// guardFingerprint runs the fingerprint command for zone with stdin and
// returns what it prints and notes.
func guardFingerprint(t *testing.T, zone, cfgPath, adapter, stdin string) (string, string) {
	t.Helper()
	var out, notes bytes.Buffer
	if err := runFingerprint(zone, cfgPath, adapter, strings.NewReader(stdin), &out, &notes); err != nil {
		t.Fatalf("runFingerprint(zone %q): %v (notes %q)", zone, err, notes.String())
	}
	return out.String(), notes.String()
}

// redisZoneWithStoredKey writes a config whose handler keeps zone in the
// Redis store at url, on a file storage holding key as the zone's, and
// returns its path.
func redisZoneWithStoredKey(t *testing.T, zone string, key []byte, url string) string {
	t.Helper()
	store := t.TempDir()
	writeStoredKey(t, store, zone, key)
	return writeCommandConfig(t, "Caddyfile", store, fmt.Sprintf("http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone %s\n\t\tstore redis %s\n\t}\n}\n", zone, url))
}

// writeStoredKey puts key in the file storage at dir as zone's
// fingerprint key, and returns the file's path.
func writeStoredKey(t *testing.T, dir, zone string, key []byte) string {
	t.Helper()
	keyFile := filepath.Join(dir, "mcp_ratelimit", zone, "fingerprint.key")
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile
}

// With store redis and Redis holding no key (lost, flushed), the command
// offers Redis the key this host last used for the zone, as a starting
// handler does, even when storage holds another key: the fingerprint it
// prints is then the one Caddy starting on this host logs and matches in
// overrides, and Redis keeps that key for the next run.
func TestFingerprintCommandOffersRedisTheCachedKeyOverStorages(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	url, _ := localRedis(t)
	zone := "offer-redis-" + rand.Text()[:8]
	cached, stored := newFingerprintKey(), newFingerprintKey()
	if err := writeKeyCache(zone, cached); err != nil {
		t.Fatal(err)
	}
	cfgPath := redisZoneWithStoredKey(t, zone, stored, url)
	want := fingerprintHex(newFingerprinter(cached).sum("Bearer abc")) + "\n"
	first, notes := guardFingerprint(t, zone, cfgPath, "caddyfile", "Bearer abc\n")
	if first != want {
		t.Fatalf("printed %q, want %q under the key this host last used (storage's gives %q); notes %q",
			first, want, fingerprintHex(newFingerprinter(stored).sum("Bearer abc")), notes)
	}
	again, _ := guardFingerprint(t, zone, cfgPath, "caddyfile", "Bearer abc\n")
	if again != first {
		t.Fatalf("second run printed %q, first %q: Redis did not keep the key", again, first)
	}
}

// With store redis, a storage that holds no key yet (another host, a new
// storage) while the zone's Redis store already holds one is no key
// creation: the command prints the fingerprint under Redis's key, the one
// every instance uses, and says nothing of a created key, which would
// have the operator believe the zone never ran.
func TestFingerprintCommandDoesNotNoteACreatedKeyRedisAlreadyHeld(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	url, _ := localRedis(t)
	zone := "redis-held-" + rand.Text()[:8]
	site := fmt.Sprintf("http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone %s\n\t\tstore redis %s\n\t}\n}\n", zone, url)
	first, notes := guardFingerprint(t, zone, writeCommandConfig(t, "Caddyfile", t.TempDir(), site), "caddyfile", "Bearer abc\n")
	if !strings.Contains(notes, "created one") {
		t.Fatalf("first run on a new zone: notes %q, want the created key noted", notes)
	}
	second, notes := guardFingerprint(t, zone, writeCommandConfig(t, "Caddyfile", t.TempDir(), site), "caddyfile", "Bearer abc\n")
	if second != first {
		t.Fatalf("fresh storage, same Redis: printed %q, first %q; want Redis's key", second, first)
	}
	if notes != "" {
		t.Fatalf("fresh storage, Redis holding the key: notes %q, want none", notes)
	}
}

// The adapter given to the command is used to read the config: a
// Caddyfile under another name (site.conf) is read with the caddyfile
// adapter, as `caddy run --adapter caddyfile` reads it, rather than
// refused as JSON.
func TestFingerprintCommandUsesTheGivenAdapter(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cfgPath := writeCommandConfig(t, "site.conf", t.TempDir(), "http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone conf\n\t}\n}\n")
	out, notes := guardFingerprint(t, "conf", cfgPath, "caddyfile", "Bearer abc\n")
	if _, err := parseFingerprint(strings.TrimSuffix(out, "\n")); err != nil {
		t.Fatalf("printed %q (notes %q): %v", out, notes, err)
	}
	if strings.Contains(notes, "no mcp_ratelimit handler") {
		t.Fatalf("notes %q: the config's zone was not read", notes)
	}
}

// `caddy mcp-ratelimit fingerprint --adapter caddyfile` passes the
// adapter on: a Caddyfile under another name is read as one, and the
// command prints the fingerprint the direct call prints.
func TestFingerprintSubcommandPassesTheAdapterFlagOn(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cfgPath := writeCommandConfig(t, "site.conf", t.TempDir(), "http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone z\n\t}\n}\n")
	want, _ := guardFingerprint(t, "z", cfgPath, "caddyfile", "Bearer abc\n")

	command, ok := caddycmd.Commands()["mcp-ratelimit"]
	if !ok {
		t.Fatal("no mcp-ratelimit command registered")
	}
	root := &cobra.Command{Use: command.Name}
	command.CobraFunc(root)
	root.SetArgs([]string{"fingerprint", "--config", cfgPath, "--adapter", "caddyfile", "--zone", "z"})
	root.SilenceUsage = true

	dir := t.TempDir()
	stdin, err := os.Create(filepath.Join(dir, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.WriteString("Bearer abc\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	oldIn, oldOut := os.Stdin, os.Stdout
	os.Stdin, os.Stdout = stdin, stdout
	err = root.Execute()
	os.Stdin, os.Stdout = oldIn, oldOut
	_ = stdin.Close()
	_ = stdout.Close()
	if err != nil {
		t.Fatalf("fingerprint --adapter caddyfile: %v", err)
	}
	got, err := os.ReadFile(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("subcommand printed %q, want %q", got, want)
	}
}

// `--zone b` fingerprints the value only as zone b's handlers read it:
// a handler of another zone, with another identity rule, adds no line,
// no note of several ways and no misfit note, which would have the
// operator paste a fingerprint that no handler of the zone ever logs.
func TestFingerprintCommandIgnoresOtherZonesHandlers(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	store := t.TempDir()
	cfgPath := writeCommandConfig(t, "Caddyfile", store,
		"http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone a\n\t\tidentity {http.request.cookie.sid}\n\t}\n}\n"+
			"http://127.0.0.1:2 {\n\tmcp_ratelimit {\n\t\tzone b\n\t}\n}\n")
	out, notes := guardFingerprint(t, "b", cfgPath, "caddyfile", "Bearer tokA\n")
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("printed %q, want one line (notes %q)", out, notes)
	}
	if strings.Contains(notes, "read this value in") || strings.Contains(notes, "does not fit") {
		t.Fatalf("notes %q, want no other way of reading: zone b's only handler reads the Authorization header", notes)
	}
	alone, _ := guardFingerprint(t, "b", writeCommandConfig(t, "Caddyfile", store, "http://127.0.0.1:2 {\n\tmcp_ratelimit {\n\t\tzone b\n\t}\n}\n"), "caddyfile", "Bearer tokA\n")
	if alone != out {
		t.Fatalf("printed %q, a config with zone b alone %q", out, alone)
	}
}

// A handler without an identity reads the Authorization header, and the
// command's notes name it so: the rule of each printed line, and the rules
// the value does not fit, are {http.request.header.Authorization}, never
// an empty name the operator cannot match to a handler.
func TestFingerprintCommandNamesTheDefaultIdentity(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cfgPath := writeCommandConfig(t, "Caddyfile", t.TempDir(),
		"http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone d\n\t}\n}\n"+
			"http://127.0.0.1:2 {\n\tmcp_ratelimit {\n\t\tzone d\n\t\tidentity {http.request.cookie.sid}\n\t}\n}\n"+
			"http://127.0.0.1:3 {\n\tmcp_ratelimit {\n\t\tzone d\n\t\tidentity {http.request.header.X-A} {http.request.header.X-B}\n\t}\n}\n")
	out, notes := guardFingerprint(t, "d", cfgPath, "caddyfile", "Bearer  tokA\n")
	if strings.Count(out, "\n") != 2 {
		t.Fatalf("printed %q, want two lines (notes %q)", out, notes)
	}
	if want := "in order: " + defaultIdentity + "; {http.request.cookie.sid}\n"; !strings.HasSuffix(notes, want) {
		t.Fatalf("notes %q, want them to end %q", notes, want)
	}
	out, notes = guardFingerprint(t, "d", cfgPath, "caddyfile", "a\nb\n")
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("two lines on stdin: printed %q, want one line (notes %q)", out, notes)
	}
	if want := "with identity " + defaultIdentity + "; {http.request.cookie.sid} ("; !strings.Contains(notes, want) {
		t.Fatalf("notes %q, want them to name the rules the value does not fit: %q", notes, want)
	}
}

// With store redis and Redis unreachable, the command uses the key this
// host last used for the zone, as a handler starting then does, and says
// so. On a host that never used the zone's key it prints nothing and
// fails: its storage's key need not be Redis's, which every instance
// fingerprints with, and an override under a fingerprint of another key
// matches nobody.
func TestFingerprintCommandWithRedisDownUsesTheKeyAStartingHandlerWould(t *testing.T) {
	for _, c := range []struct {
		rule   string
		cached bool
	}{
		{"the key this host last used", true},
		{"none: a host that never used the zone's key", false},
	} {
		t.Run(c.rule, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", t.TempDir())
			zone := "redis-down-" + rand.Text()[:8]
			cached, stored := newFingerprintKey(), newFingerprintKey()
			if c.cached {
				if err := writeKeyCache(zone, cached); err != nil {
					t.Fatal(err)
				}
			}
			cfgPath := redisZoneWithStoredKey(t, zone, stored, fmt.Sprintf("redis://127.0.0.1:%d", freePort(t)))
			if !c.cached {
				var out, notes bytes.Buffer
				err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes)
				if err == nil || !strings.Contains(err.Error(), "cannot be told") || out.Len() != 0 {
					t.Fatalf("printed %q, error %v, with Redis down on a host that never used the zone's key; want no fingerprint and an error saying why", out.String(), err)
				}
				return
			}
			got, notes := guardFingerprint(t, zone, cfgPath, "caddyfile", "Bearer abc\n")
			if got != fingerprintHex(newFingerprinter(cached).sum("Bearer abc"))+"\n" {
				t.Fatalf("printed %q with Redis down, want the fingerprint under %s; notes %q", got, c.rule, notes)
			}
			if !strings.Contains(notes, "Redis store unreachable") || strings.Contains(notes, "created") {
				t.Fatalf("notes %q, want Redis's outage named and no key said to be created", notes)
			}
		})
	}
}

// Run with Redis answering, the command keeps Redis's key on this host,
// as a starting handler does: run again during an outage, it prints the
// fingerprint under that key, the one every instance uses, not under the
// key in this host's storage.
func TestFingerprintCommandKeepsRedisKeyForAnOutage(t *testing.T) {
	url, redis := localRedis(t)
	zone := "outage-key-" + rand.Text()[:8]
	inRedis, stored := newFingerprintKey(), newFingerprintKey()
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // another host puts its key in Redis
	guardFingerprint(t, zone, redisZoneWithStoredKey(t, zone, inRedis, url), "caddyfile", "Bearer abc\n")
	want := fingerprintHex(newFingerprinter(inRedis).sum("Bearer abc")) + "\n"
	site := fmt.Sprintf("http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone %s\n\t\tstore redis %s\n\t}\n}\n", zone, url)

	// A host whose storage holds no key: it gets Redis's there, as an
	// instance reaching Redis puts it, not one of its own, and keeps it.
	hostE, emptied := t.TempDir(), t.TempDir()
	t.Setenv("XDG_DATA_HOME", hostE)
	cfgE := writeCommandConfig(t, "Caddyfile", emptied, site)
	if got, notes := guardFingerprint(t, zone, cfgE, "caddyfile", "Bearer abc\n"); got != want {
		t.Fatalf("printed %q with Redis up on empty storage, want %q; notes %q", got, want, notes)
	}
	if inStorage, err := os.ReadFile(filepath.Join(emptied, "mcp_ratelimit", zone, "fingerprint.key")); err != nil || !bytes.Equal(inStorage, inRedis) {
		t.Fatalf("storage holds key %x (%v), want Redis's %x", inStorage, err, inRedis)
	}

	// A host whose storage holds another key, which a zone serving there
	// without the store uses: the command leaves it, and the copy this
	// host keeps of it (a start of that zone, its storage's key lost,
	// puts the copy back), and says so.
	hostS, st := t.TempDir(), t.TempDir()
	t.Setenv("XDG_DATA_HOME", hostS)
	if err := writeKeyCache(zone, stored); err != nil {
		t.Fatal(err)
	}
	keyFile := writeStoredKey(t, st, zone, stored)
	cfgS := writeCommandConfig(t, "Caddyfile", st, site)
	got, notes := guardFingerprint(t, zone, cfgS, "caddyfile", "Bearer abc\n")
	if got != want || !strings.Contains(notes, "holds another fingerprint key") {
		t.Fatalf("printed %q with Redis up, want %q under Redis's key and a note of storage's other key; notes %q", got, want, notes)
	}
	if inStorage, err := os.ReadFile(keyFile); err != nil || !bytes.Equal(inStorage, stored) {
		t.Fatalf("storage holds key %x (%v), want its own %x left in place", inStorage, err, stored)
	}
	if c := readKeyCache(zone); !bytes.Equal(c, stored) {
		t.Fatalf("this host's copy of the zone's key is %x, want storage's %x left in place", c, stored)
	}

	// The same host, its storage's key lost: the command puts the host's
	// copy back, the zone's own, as the zone starting would, and keeps it.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	got, notes = guardFingerprint(t, zone, cfgS, "caddyfile", "Bearer abc\n")
	if got != want || !strings.Contains(notes, "holds another fingerprint key") {
		t.Fatalf("printed %q with storage's key lost, want %q and a note of storage's other key; notes %q", got, want, notes)
	}
	if inStorage, err := os.ReadFile(keyFile); err != nil || !bytes.Equal(inStorage, stored) {
		t.Fatalf("storage holds key %x (%v) after the command, want the host's copy %x put back", inStorage, err, stored)
	}
	if c := readKeyCache(zone); !bytes.Equal(c, stored) {
		t.Fatalf("this host's copy of the zone's key is %x, want %x left in place", c, stored)
	}

	_ = redis.Kill()
	_, _ = redis.Wait()
	t.Setenv("XDG_DATA_HOME", hostE)
	got, notes = guardFingerprint(t, zone, cfgE, "caddyfile", "Bearer abc\n")
	if got != want || !strings.Contains(notes, "Redis store unreachable") {
		t.Fatalf("printed %q with Redis down, want %q under the key Redis gave this host (storage's gives %q); notes %q",
			got, want, fingerprintHex(newFingerprinter(stored).sum("Bearer abc")), notes)
	}

	// A host that never used the zone's key, on an empty storage: no
	// fingerprint, and no key left behind.
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	empty := t.TempDir()
	var out bytes.Buffer
	err := runFingerprint(zone, writeCommandConfig(t, "Caddyfile", empty, site), "caddyfile", strings.NewReader("Bearer abc\n"), &out, io.Discard)
	if err == nil || out.Len() != 0 {
		t.Fatalf("printed %q, error %v, with Redis down on a new host; want no fingerprint and an error", out.String(), err)
	}
	if _, err := os.Stat(filepath.Join(empty, "mcp_ratelimit", zone, "fingerprint.key")); !os.IsNotExist(err) {
		t.Fatalf("a key was left in storage by a run that told no fingerprint: %v", err)
	}
}
