package mcplimit

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCommandConfig writes a Caddyfile with file storage dir and the given
// site blocks to a file named name in a new directory, and returns its path.
func writeCommandConfig(t *testing.T, name, dir, sites string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	cfg := fmt.Sprintf("{\n\tstorage file_system %s\n}\n%s", dir, sites)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loggedFingerprint runs Caddy in process with file storage dir and a
// handler whose identity is the placeholder identity ("" for the default),
// makes a pre-auth refusal of requests carrying value in the request header
// named header, and returns the fingerprint the refusal log carries and
// the Caddyfile path. secret is what of value the log must never show.
func loggedFingerprint(t *testing.T, dir, zone, identity, header, value, secret string) (string, string) {
	t.Helper()
	if identity != "" {
		identity = "identity " + identity
	}
	tmp := t.TempDir()
	logPath := filepath.Join(tmp, "caddy.log")
	port, adminPort := freePort(t), freePort(t)
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	auto_https off
	storage file_system %s
	log {
		output file %s
		format json
		level INFO
	}
}

http://127.0.0.1:%d {
	bind 127.0.0.1
	route {
		mcp_ratelimit {
			zone %s
			%s
			preauth 1/m burst 1
		}
		# Rejecting the credential keeps the identity unproven.
		respond "no" 401
	}
}
`, adminPort, dir, logPath, port, zone, identity)
	cfgPath := filepath.Join(tmp, "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	js, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), map[string]any{"filename": cfgPath})
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	if err := caddy.Load(js, true); err != nil {
		t.Fatalf("loading: %v", err)
	}
	defer func() { _ = caddy.Stop() }()
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	status := 0
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
		req.Header.Set(header, value)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		status = resp.StatusCode
	}
	if status != http.StatusTooManyRequests {
		t.Fatalf("third unproven call: %d, want a pre-auth refusal", status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var ev struct {
				Msg, Zone, Layer, Fingerprint string
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Msg == "refused" && ev.Zone == zone && ev.Layer == "preauth" && ev.Fingerprint != "" {
				if strings.Contains(string(b), secret) {
					t.Fatalf("the log carries the raw credential:\n%s", b)
				}
				return ev.Fingerprint, cfgPath
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pre-auth refusal with a fingerprint logged:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFingerprintCommandPrintsWhatTheHandlerLogs(t *testing.T) {
	dir := t.TempDir()
	logged, cfgPath := loggedFingerprint(t, dir, "z", "", "Authorization", "Bearer abc-LOGGED", "abc-LOGGED")
	if len(logged) != 32 {
		t.Fatalf("logged fingerprint %q is not 32 hex characters", logged)
	}

	var notes bytes.Buffer
	fp := func(zone, stdin string) (string, error) {
		var out bytes.Buffer
		notes.Reset()
		err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader(stdin), &out, &notes)
		return out.String(), err
	}
	tests := []struct {
		name, zone, stdin string
		same              bool
	}{
		{"trailing newline stripped", "z", "Bearer abc-LOGGED\n", true},
		{"no trailing newline", "z", "Bearer abc-LOGGED", true},
		{"CRLF stripped", "z", "Bearer abc-LOGGED\r\n", true},
		{"a credential holds no line breaks", "z", "Bearer abc-LOGGED\n\n", true},
		{"scheme case and whitespace read as the handler reads them", "z", "bearer  abc-LOGGED\n", true},
		{"the token's case kept", "z", "Bearer ABC-LOGGED\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fp(tc.zone, tc.stdin)
			if err != nil {
				t.Fatalf("runFingerprint: %v", err)
			}
			if !strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != 1 {
				t.Fatalf("output %q is not one line", got)
			}
			got = strings.TrimSuffix(got, "\n")
			if _, err := parseFingerprint(got); err != nil {
				t.Fatalf("output %q: %v", got, err)
			}
			if (got == logged) != tc.same {
				t.Fatalf("printed %s, logged %s, want same=%v", got, logged, tc.same)
			}
			if notes.Len() != 0 {
				t.Errorf("notes for a zone the config uses: %s", notes.String())
			}
		})
	}

	for _, stdin := range []string{"", "\n"} {
		if out, err := fp("z", stdin); err == nil {
			t.Errorf("stdin %q: no error (printed %q)", stdin, out)
		}
	}
	// A zone that never ran on this storage gets its key created now, so
	// overrides can be prepared before the first deploy: another key,
	// another fingerprint.
	other, err := fp("not-yet-deployed", "Bearer abc-LOGGED\n")
	if err != nil || strings.TrimSpace(other) == logged {
		t.Errorf("new zone: printed %q (err %v); want a fingerprint under a new key", other, err)
	}
	// The config given uses no such zone (a typo, say): the caller is told.
	if !strings.Contains(notes.String(), `no mcp_ratelimit handler in this config uses zone "not-yet-deployed" (its zones: z)`) {
		t.Errorf("no note that the config does not use the zone: %q", notes.String())
	}
	again, _ := fp("not-yet-deployed", "Bearer abc-LOGGED\n")
	if again != other {
		t.Errorf("the created key was not kept: %q then %q", other, again)
	}
	// A config file that cannot be read is an error, not a fingerprint
	// under some other key.
	var out bytes.Buffer
	if err := runFingerprint("z", filepath.Join(dir, "missing.Caddyfile"), "caddyfile", strings.NewReader("Bearer abc-LOGGED\n"), &out, &notes); err == nil {
		t.Errorf("missing config file: no error (printed %q)", out.String())
	}
}

// The command reads a cookie identity as the cookie placeholder produces
// it or as it is sent (quoted), and fingerprints it as the handler does:
// quotes stripped, trimmed, cut at a space, %-decoded, with '+' a space.
func TestFingerprintCommandReadsCookiesAsTheHandler(t *testing.T) {
	const raw = "ab+cd%2Fef=="
	logged, cfgPath := loggedFingerprint(t, t.TempDir(), "ck", "{http.request.cookie.token}", "Cookie", "token="+raw, raw)
	for stdin, same := range map[string]bool{raw + "\n": true, `"` + raw + `"` + "\n": true, "ab cd/ef==\n": false} {
		var out, notes bytes.Buffer
		if err := runFingerprint("ck", cfgPath, "caddyfile", strings.NewReader(stdin), &out, &notes); err != nil {
			t.Fatalf("runFingerprint: %v", err)
		}
		if got := strings.TrimSpace(out.String()); (got == logged) != same {
			t.Errorf("stdin %q: printed %s, logged %s, want same=%v", stdin, got, logged, same)
		}
	}
}

// The command trims the spaces and tabs around a header identity, as the
// handler does (over HTTP/2 they reach it; HTTP/1 parsers drop them).
func TestFingerprintCommandTrimsHeaderIdentities(t *testing.T) {
	logged, cfgPath := loggedFingerprint(t, t.TempDir(), "hk", "{http.request.header.X-Api-Key}", "X-Api-Key", "k-LOGGED", "k-LOGGED")
	var out, notes bytes.Buffer
	for _, stdin := range []string{" k-LOGGED\t\n", "\u00a0k-LOGGED\u3000\n"} {
		out.Reset()
		if err := runFingerprint("hk", cfgPath, "caddyfile", strings.NewReader(stdin), &out, &notes); err != nil {
			t.Fatalf("runFingerprint: %v", err)
		}
		if got := strings.TrimSpace(out.String()); got != logged {
			t.Fatalf("stdin %q: printed %s, logged %s", stdin, got, logged)
		}
	}
}

// The command trims a query-parameter identity as the handler does.
func TestFingerprintCommandTrimsQueryIdentities(t *testing.T) {
	if got := asPlaceholdersProduce("\u00a0q ", []string{"{http.request.uri.query.key}"}); got != "q" {
		t.Fatalf("query identity read as %q, want q", got)
	}
}

// The command says when it created the zone's fingerprint key, in
// storage or, with store redis, in Redis: a mistyped zone or store would
// otherwise print a fingerprint that matches nothing. A key already there
// is used without a note.
func TestFingerprintCommandNotesACreatedKey(t *testing.T) {
	url, _ := localRedis(t)
	for _, tc := range []struct{ name, store, where string }{
		{"storage", "", "in this storage"},
		{"redis", "store redis " + url, "in its Redis store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zone := "notes-" + tc.name + "-" + rand.Text()[:8]
			cfgPath := writeCommandConfig(t, "Caddyfile", t.TempDir(), fmt.Sprintf("http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone %s\n\t\t%s\n\t}\n}\n", zone, tc.store))
			var out, notes bytes.Buffer
			if err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("note: zone %q had no fingerprint key %s yet; created one", zone, tc.where); !strings.Contains(notes.String(), want) {
				t.Fatalf("notes %q, want %q", notes.String(), want)
			}
			first := out.String()
			out.Reset()
			notes.Reset()
			if err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes); err != nil {
				t.Fatal(err)
			}
			if notes.Len() != 0 || out.String() != first {
				t.Fatalf("second run: printed %q (first %q), notes %q; want the same fingerprint and no note", out.String(), first, notes.String())
			}
		})
	}
}

// A store URL that its variable leaves empty is named as such, as
// `caddy validate` names it, not as a URL without a scheme.
func TestFingerprintCommandNamesAnEmptyStoreURL(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	storage := t.TempDir()
	cfgPath := writeCommandConfig(t, "Caddyfile", storage, "http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone unset-url\n\t\tstore redis {env.MCPRL_TEST_UNSET_REDIS_URL}\n\t}\n}\n")
	var out, notes bytes.Buffer
	err := runFingerprint("unset-url", cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes)
	if err == nil || !strings.Contains(err.Error(), "empty once expanded") {
		t.Fatalf("err = %v, want the URL named empty once expanded", err)
	}
	// A run that tells no fingerprint leaves storage as it found it: a
	// key of its own there would be one Redis never held.
	if _, err := os.Stat(filepath.Join(storage, "mcp_ratelimit", "unset-url", "fingerprint.key")); !os.IsNotExist(err) {
		t.Fatalf("a failed run left a key in storage: %v", err)
	}
}

// The command refuses a zone name the handler refuses, and writes
// nothing: such a name would put a key file outside the zone's own
// directory of the storage, or outside the storage. An empty name is the
// default zone, as in the handler's JSON.
func TestFingerprintCommandRefusesZonesTheHandlerRefuses(t *testing.T) {
	root := t.TempDir()
	stor := filepath.Join(root, "st")
	cfgPath := writeCommandConfig(t, "Caddyfile", stor, "http://127.0.0.1:1 {\n\tmcp_ratelimit\n}\n")
	for _, zone := range []string{"../../outside", "../x", "a b", "..", ".", strings.Repeat("z", 65)} {
		var out, notes bytes.Buffer
		err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes)
		if err == nil || !strings.Contains(err.Error(), "zone ") || out.Len() != 0 {
			t.Errorf("zone %q: printed %q, err %v; want the handler's zone error", zone, out.String(), err)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("refused zones wrote %d entries under the storage's parent", len(entries))
	}
	fingerprint := func(zone string) string {
		var out, notes bytes.Buffer
		if err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes); err != nil {
			t.Fatalf("zone %q: %v", zone, err)
		}
		return out.String()
	}
	if empty, def := fingerprint(""), fingerprint("default"); empty != def {
		t.Fatalf("zone \"\" printed %q, the default zone %q", empty, def)
	}
}

// Stdin holds one line for each identity placeholder, as the handler
// joins them: fewer or more lines are a mistake, not an identity (the
// handler refuses a value holding a line break).
func TestFingerprintCommandWantsALinePerPlaceholder(t *testing.T) {
	cfgPath := writeCommandConfig(t, "Caddyfile", t.TempDir(), "http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tidentity {http.request.header.X-A} {http.request.header.X-B}\n\t}\n}\n")
	var out, notes bytes.Buffer
	for _, stdin := range []string{"v1\n", "v1\nv2\nv3", "v1\nv2\n\n"} {
		if err := runFingerprint("default", cfgPath, "caddyfile", strings.NewReader(stdin), &out, &notes); err == nil || !strings.Contains(err.Error(), "one line per placeholder") {
			t.Fatalf("stdin %q for two placeholders: printed %q, err %v", stdin, out.String(), err)
		}
	}
	if err := runFingerprint("default", cfgPath, "caddyfile", strings.NewReader("v1\n\n"), &out, &notes); err != nil || out.Len() == 0 {
		t.Fatalf("two lines, the second empty: printed %q, err %v", out.String(), err)
	}
	// One placeholder: a header value is trimmed as the handler trims it,
	// but one holding a line break is no request's.
	out.Reset()
	one := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(one, []byte(fmt.Sprintf("{\n\tstorage file_system %s\n}\nhttp://127.0.0.1:1 {\n\tmcp_ratelimit\n}\n", t.TempDir())), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, stdin := range []string{"Bearer a\nBearer b", "\nBearer a", " \nBearer a\n"} {
		if err := runFingerprint("default", one, "caddyfile", strings.NewReader(stdin), &out, &notes); err == nil || !strings.Contains(err.Error(), "line break") {
			t.Fatalf("stdin %q for one placeholder: printed %q, err %v", stdin, out.String(), err)
		}
	}
	// A placeholder the handler does not trim keeps a leading or a second
	// trailing line break: no request's identity holds one.
	user := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(user, []byte(fmt.Sprintf("{\n\tstorage file_system %s\n}\nhttp://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tidentity {http.auth.user.id}\n\t\ttrust_identity\n\t}\n}\n", t.TempDir())), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, stdin := range []string{"\nbob", "bob\n\n", "bob\nx"} {
		out.Reset()
		if err := runFingerprint("default", user, "caddyfile", strings.NewReader(stdin), &out, &notes); err == nil || !strings.Contains(err.Error(), "line break") {
			t.Fatalf("user id %q: printed %q, err %v", stdin, out.String(), err)
		}
	}
	out.Reset()
	if err := runFingerprint("default", user, "caddyfile", strings.NewReader("bob\n"), &out, &notes); err != nil || out.Len() == 0 {
		t.Fatalf("user id on one line: printed %q, err %v", out.String(), err)
	}
}

// A zone whose handlers read identity in several ways (a header on one
// site, a cookie on another, two headers on a third) gets the value's
// fingerprint for each way it fits, one per line, each the one the
// command prints for a config with that handler alone; a note names the
// rule of each line, and the rules the value does not fit. A value every
// fitting rule reads alike gets one line.
func TestFingerprintCommandPrintsOneFingerprintPerWayTheZoneReadsIdentity(t *testing.T) {
	storage := t.TempDir()
	const (
		header  = "{http.request.header.Authorization}"
		cookie  = "{http.request.cookie.sid}"
		twoKeys = "{http.request.header.X-A} {http.request.header.X-B}"
	)
	write := func(identities ...string) string {
		cfg := fmt.Sprintf("{\n\tstorage file_system %s\n}\n", storage)
		for i, id := range identities {
			cfg += fmt.Sprintf("http://127.0.0.1:%d {\n\tmcp_ratelimit {\n\t\tzone two\n\t\tidentity %s\n\t}\n}\n", i+1, id)
		}
		path := filepath.Join(t.TempDir(), "Caddyfile")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	all := write(header, cookie, twoKeys)
	alone := map[string]string{header: write(header), cookie: write(cookie), twoKeys: write(twoKeys)}
	run := func(cfgPath, stdin string) ([]string, string) {
		t.Helper()
		var out, notes bytes.Buffer
		if err := runFingerprint("two", cfgPath, "caddyfile", strings.NewReader(stdin), &out, &notes); err != nil {
			t.Fatalf("stdin %q: %v", stdin, err)
		}
		return strings.Fields(out.String()), notes.String()
	}
	for _, tc := range []struct {
		stdin   string
		fits    []string // the rules the value fits, in the zone's order
		misfits string
		lines   int
	}{
		{"Bearer  tokA\n", []string{header, cookie}, twoKeys, 2},
		{"tokA\n", []string{header, cookie}, twoKeys, 1},
		{"a\nb\n", []string{twoKeys}, header + "; " + cookie, 1},
	} {
		fps, notes := run(all, tc.stdin)
		if len(fps) != tc.lines {
			t.Fatalf("stdin %q: printed %q, want %d lines (notes %q)", tc.stdin, fps, tc.lines, notes)
		}
		want := map[string]string{} // fingerprint → rule
		for _, rule := range tc.fits {
			got, _ := run(alone[rule], tc.stdin)
			want[got[0]] = rule
		}
		if len(want) != tc.lines {
			t.Fatalf("stdin %q: the handlers alone give %d fingerprints, want %d", tc.stdin, len(want), tc.lines)
		}
		for _, fp := range fps {
			if _, ok := want[fp]; !ok {
				t.Fatalf("stdin %q: printed %s, which no handler of the zone alone gives (%v)", tc.stdin, fp, want)
			}
		}
		if !strings.Contains(notes, "with identity "+tc.misfits+" (") {
			t.Errorf("stdin %q: notes %q do not name the rules the value does not fit (%s)", tc.stdin, notes, tc.misfits)
		}
		_, order, ways := strings.Cut(strings.TrimSpace(notes), "in order: ")
		if ways != (tc.lines > 1) {
			t.Fatalf("stdin %q: notes %q, want the rule of each line named: %v", tc.stdin, notes, tc.lines > 1)
		}
		if ways {
			named := strings.Split(order, "; ")
			for i, fp := range fps {
				if i >= len(named) || named[i] != want[fp] {
					t.Errorf("stdin %q: line %d (%s) is %s's, the note names %q", tc.stdin, i+1, fp, want[fp], named)
				}
			}
		}
	}
}

// A value the handler reads as no identity (spaces alone in a header, or
// every placeholder empty) gets the command's "no identity" error, not a
// fingerprint that no request ever has.
func TestFingerprintCommandRefusesWhatIsNoIdentity(t *testing.T) {
	for _, tc := range []struct{ placeholders, stdin string }{
		{"", "   \n"},
		{"", "\t"},
		{"", "\u00a0"},
		{"{http.request.header.X-Org} {http.request.header.X-Key}", " \n\t\n"},
	} {
		cfgPath := filepath.Join(t.TempDir(), "Caddyfile")
		identity := ""
		if tc.placeholders != "" {
			identity = "identity " + tc.placeholders
		}
		cfg := fmt.Sprintf("{\n\tstorage file_system %s\n}\nhttp://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone ws\n\t\t%s\n\t}\n}\n", t.TempDir(), identity)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, notes bytes.Buffer
		err := runFingerprint("ws", cfgPath, "caddyfile", strings.NewReader(tc.stdin), &out, &notes)
		if err == nil || !strings.Contains(err.Error(), "no identity value") {
			t.Errorf("identity %q, stdin %q: printed %q, err %v; want the no-identity error", tc.placeholders, tc.stdin, out.String(), err)
		}
	}
}

// Should storage hold no key, the command stores the key this host last
// used for the zone, as a starting handler does, instead of creating one
// that would change every fingerprint at the next start.
func TestFingerprintCommandOffersTheCachedKey(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	zone := "offer-" + rand.Text()[:8]
	cached := newFingerprintKey()
	if err := writeKeyCache(zone, cached); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	cfgPath := writeCommandConfig(t, "Caddyfile", store, fmt.Sprintf("http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone %s\n\t}\n}\n", zone))
	var out, notes bytes.Buffer
	if err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes); err != nil {
		t.Fatal(err)
	}
	if want := fingerprintHex(newFingerprinter(cached).sum("Bearer abc")) + "\n"; out.String() != want {
		t.Fatalf("fingerprint %q, want %q under the cached key", out.String(), want)
	}
	stored, err := os.ReadFile(filepath.Join(store, "mcp_ratelimit", zone, "fingerprint.key"))
	if err != nil || !bytes.Equal(stored, cached) {
		t.Fatalf("stored key %x (%v), want the cached one", stored, err)
	}
	if !strings.Contains(notes.String(), "stored the key this host last used") {
		t.Fatalf("notes %q, want them to say the cached key was stored", notes.String())
	}
}

// With storage unreachable, the command prints the fingerprint under the
// key this host last used for the zone, as a handler starting then would,
// and says so; with no such key it fails.
func TestFingerprintCommandUsesTheCachedKeyDuringAnOutage(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	zone := "outage-" + rand.Text()[:8]
	store := filepath.Join(t.TempDir(), "storage")
	if err := os.WriteFile(store, []byte("a file, not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeCommandConfig(t, "Caddyfile", store, fmt.Sprintf("http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone %s\n\t}\n}\n", zone))
	var out, notes bytes.Buffer
	if err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes); err == nil {
		t.Fatalf("printed %q with storage unreachable and no key on this host", out.String())
	}
	cached := newFingerprintKey()
	if err := writeKeyCache(zone, cached); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runFingerprint(zone, cfgPath, "caddyfile", strings.NewReader("Bearer abc\n"), &out, &notes); err != nil {
		t.Fatal(err)
	}
	if want := fingerprintHex(newFingerprinter(cached).sum("Bearer abc")) + "\n"; out.String() != want {
		t.Fatalf("fingerprint %q, want %q under the cached key", out.String(), want)
	}
	if !strings.Contains(notes.String(), "storage unreachable") {
		t.Fatalf("notes %q, want them to say storage was unreachable", notes.String())
	}
}

// Without --config the command reads the Caddyfile in the working
// directory, as `caddy run` does: the key is the one in that config's
// storage, so the fingerprint is the one Caddy run there logs, even on a
// host holding no copy of the key. (Without one it reads Caddy's default
// storage, which a test must not write to.)
func TestFingerprintCommandReadsTheAdjacentCaddyfile(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cfgPath := writeCommandConfig(t, "Caddyfile", t.TempDir(), "http://127.0.0.1:1 {\n\tmcp_ratelimit {\n\t\tzone adjacent\n\t}\n}\n")
	want, _ := guardFingerprint(t, "adjacent", cfgPath, "", "Bearer abc\n")
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // no host copy of the key, an empty default storage
	t.Chdir(filepath.Dir(cfgPath))
	if got, notes := guardFingerprint(t, "adjacent", "", "", "Bearer abc\n"); got != want || notes != "" {
		t.Fatalf("without --config beside the Caddyfile: printed %q (notes %q), want %q under its storage's key", got, notes, want)
	}
}
