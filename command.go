package mcplimit

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/certmagic"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "mcp-ratelimit",
		Usage: "fingerprint [--zone <name>] [--config <path>] [--adapter <name>]",
		Short: "Tools for the mcp_ratelimit handler",
		Long: `
The fingerprint subcommand reads an identity value on stdin exactly as the
identity placeholders produce it (e.g. the whole Authorization header value
"Bearer abc", whose scheme and whitespace may be spelled any way, as the
handler reads them; a cookie's value as it is sent, which the command makes
canonical as the handler does; with several placeholders, one value per
line), strips the trailing newline, and prints its fingerprint under the
zone's key (one per line, named on stderr, when the zone's handlers read
identity in several ways) — from
the configured storage, or from the zone's Redis store when the config gives
it one (store redis) — the same fingerprint the handler logs, shows in the
admin API and accepts in "override".`,
		CobraFunc: func(cmd *cobra.Command) {
			fp := &cobra.Command{
				Use:   "fingerprint [--zone <name>] [--config <path>] [--adapter <name>]",
				Short: "Prints the fingerprint of the identity value read on stdin",
				Args:  cobra.NoArgs,
				RunE: func(c *cobra.Command, _ []string) error {
					zoneName, _ := c.Flags().GetString("zone")
					config, _ := c.Flags().GetString("config")
					adapter, _ := c.Flags().GetString("adapter")
					return runFingerprint(zoneName, config, adapter, os.Stdin, os.Stdout, os.Stderr)
				},
			}
			fp.Flags().String("zone", defaultZone, "Zone whose key to use")
			fp.Flags().StringP("config", "c", "", "Config file whose storage holds the key (default: ./Caddyfile if there is one, as for caddy run; else Caddy's default storage)")
			fp.Flags().StringP("adapter", "a", "", "Name of config adapter")
			cmd.AddCommand(fp)
			cmd.Args = cobra.ArbitraryArgs
			cmd.RunE = func(c *cobra.Command, args []string) error {
				if len(args) == 0 {
					return c.Help()
				}
				return fmt.Errorf("unknown subcommand %q: the subcommand is fingerprint (see caddy mcp-ratelimit --help)", args[0])
			}
		},
	})
}

func runFingerprint(zoneName, configFile, adapter string, in io.Reader, out, notes io.Writer) error {
	if zoneName == "" {
		zoneName = defaultZone // as the handler reads an empty zone
	}
	// A name no handler accepts would name files outside the zone's own
	// directory of the storage.
	if err := checkZone(zoneName); err != nil {
		return err
	}
	value, err := readIdentity(in)
	if err != nil {
		return err
	}
	cfg, configFile, err := loadConfigJSON(configFile, adapter)
	if err != nil {
		return err
	}
	hs, zones, err := zoneHandlers(cfg, zoneName)
	if err != nil {
		return err
	}
	// The zone's handlers may read identity in several ways (a cookie on
	// one route, a header on another): the value gets the fingerprint of
	// each way it fits.
	var readings []reading
	var misfits []string
	var misfit error
	for _, rule := range identityRules(hs) {
		v, err := identityAsRead(value, rule)
		if err != nil {
			misfit = cmp.Or(misfit, err)
			misfits = append(misfits, strings.Join(rule, " "))
			continue
		}
		readings = append(readings, reading{rule: strings.Join(rule, " "), value: v})
	}
	if len(readings) == 0 {
		return misfit
	}
	h := &Handler{}
	if len(hs) > 0 {
		h = hs[len(hs)-1] // the store is the zone's: its handlers agree on it
	}
	stor, err := configuredStorage(cfg, configFile)
	if err != nil {
		return err
	}
	// As a starting handler does: should storage hold no key, the key
	// this host last used goes there, else a new one.
	cached := readKeyCache(zoneName)
	key, created, err := loadFingerprintKey(context.Background(), stor, zoneName, offeredKey(cached))
	stored := key // storage's key, nil when unreadable
	// storedNew says storage held no key and this run made the one it
	// now holds; one it put back from the host's copy is the zone's own.
	storedNew := created && err == nil && cached == nil
	told := false
	defer func() {
		if storedNew && !told {
			// A run that tells no fingerprint leaves no key behind.
			_ = stor.Delete(context.Background(), fingerprintKeyName(zoneName))
		}
	}()
	if err != nil {
		if cached == nil {
			return err
		}
		// As a handler starting during a storage outage does, use the
		// key this host last used for the zone.
		fmt.Fprintf(notes, "note: storage unreachable (%v); used the key this host last used for zone %q, as Caddy starting now would\n", err, zoneName)
		key, created = cached, false
	}
	if cfg != nil && !slices.Contains(zones, zoneName) {
		// A mistyped zone would print a fingerprint that no override in
		// this config can use.
		fmt.Fprintf(notes, "note: no mcp_ratelimit handler in this config uses zone %q (its zones: %s); the fingerprint matches only in a zone of that name\n",
			zoneName, strings.Join(zones, ", "))
	}
	where := "this storage"
	if h.Store != nil && h.Store.Redis != nil {
		// The handler uses the key in Redis. Should Redis hold none, the
		// command offers what a starting handler offers: the key this host
		// last used, else storage's; it is new when storage had none.
		if cached != nil {
			key, created = cached, false
		}
		offered := key
		var unreached error
		if key, unreached, err = redisFingerprintKey(h.Store.Redis, zoneName, key); err != nil {
			return err
		}
		switch {
		case unreached == nil:
			created = created && bytes.Equal(key, offered)
			where = "its Redis store"
			keep := true // this host keeps Redis's key
			switch {
			case bytes.Equal(key, stored) || stored == nil:
			case storedNew:
				// The key this run put in storage goes for Redis's, as an
				// instance puts it there on reaching Redis: a host
				// starting without the store fingerprints alike.
				if err := replaceFingerprintKey(context.Background(), stor, zoneName, key); err != nil {
					fmt.Fprintf(notes, "note: could not put zone %q's key from Redis in storage: %v\n", zoneName, err)
				}
			default:
				// A zone serving from this storage without the store
				// fingerprints with storage's key: replacing it, or the
				// copy this host keeps of it, would reset every
				// identity's budgets and quotas there.
				keep = false
				fmt.Fprintf(notes, "note: this storage holds another fingerprint key for zone %q than its Redis store; instances on it without store redis fingerprint with that one (Caddy with store redis replaces it with Redis's as it starts)\n", zoneName)
			}
			if keep && !bytes.Equal(key, cached) {
				// Kept as a starting handler keeps it: the command run
				// during an outage then uses Redis's key, not this
				// host's own.
				if err := writeKeyCache(zoneName, key); err != nil {
					fmt.Fprintf(notes, "note: could not keep zone %q's key from Redis on this host: %v\n", zoneName, err)
				}
			}
		case cached == nil:
			// This host never used the zone's key: the one in its
			// storage may not be the one in Redis, which every instance
			// fingerprints with, and an override under a fingerprint of
			// another key matches nobody.
			return fmt.Errorf("zone %q's Redis store is unreachable (%v), and this host has never used the zone's key from it: the fingerprint cannot be told; run the command again once Redis answers", zoneName, unreached)
		default:
			fmt.Fprintf(notes, "note: zone %q's Redis store unreachable (%v); used the key this host last used for it, as Caddy starting now would: it is the key in Redis, which every instance uses, only if this host last used the zone with its Redis store answering; print the fingerprint again once Redis answers before an override relies on it\n", zoneName, unreached)
		}
	}
	switch {
	case created && cached != nil && bytes.Equal(key, cached):
		fmt.Fprintf(notes, "note: zone %q had no fingerprint key in %s; stored the key this host last used for it\n", zoneName, where)
	case created:
		// Preparing overrides before the first deploy is legitimate, but
		// a mistyped zone or storage would silently print a fingerprint
		// that matches nothing: say so.
		fmt.Fprintf(notes, "note: zone %q had no fingerprint key in %s yet; created one (Caddy will use it for this zone there)\n", zoneName, where)
	}
	told = true
	fps, rules := fingerprintReadings(newFingerprinter(key), readings)
	if len(misfits) > 0 {
		fmt.Fprintf(notes, "note: the value does not fit the zone's handlers with identity %s (%v); no fingerprint is printed for them\n",
			strings.Join(misfits, "; "), misfit)
	}
	if len(fps) > 1 {
		fmt.Fprintf(notes, "note: zone %q's handlers read this value in %d ways, so %d fingerprints are printed, one per line, for the handlers with identity, in order: %s\n",
			zoneName, len(fps), len(fps), strings.Join(rules, "; "))
	}
	for _, fp := range fps {
		if _, err := fmt.Fprintln(out, fp); err != nil {
			return err
		}
	}
	return nil
}

// reading is an identity value as one identity rule of a zone reads it.
type reading struct {
	rule  string // the rule's placeholders, joined by spaces
	value string
}

// fingerprintReadings returns the distinct fingerprints of readings, in
// order, and for each the rules (joined by " and ") that give it.
func fingerprintReadings(f *fingerprinter, readings []reading) (fps, rules []string) {
	for _, r := range readings {
		fp := fingerprintHex(f.sum(r.value))
		if i := slices.Index(fps, fp); i >= 0 {
			rules[i] += " and " + r.rule
			continue
		}
		fps = append(fps, fp)
		rules = append(rules, r.rule)
	}
	return fps, rules
}

// identityRules returns the distinct identity placeholder lists of the
// zone's handlers, the default filled in, in config order: the default
// alone when the zone has no handler.
func identityRules(hs []*Handler) [][]string {
	var rules [][]string
	for _, h := range hs {
		rule := h.Identity
		if len(rule) == 0 {
			rule = []string{defaultIdentity}
		}
		if !slices.ContainsFunc(rules, func(r []string) bool { return slices.Equal(r, rule) }) {
			rules = append(rules, rule)
		}
	}
	if len(rules) == 0 {
		rules = [][]string{{defaultIdentity}}
	}
	return rules
}

// identityAsRead returns the identity value read on stdin as the handler
// with identity placeholders reads it, or why no request of that handler
// has it.
func identityAsRead(value string, placeholders []string) (string, error) {
	// The handler joins every placeholder's value, empty ones too, and
	// refuses a value holding a line break.
	n := len(placeholders)
	if n > 1 && strings.Count(value, "\n")+1 != n {
		return "", fmt.Errorf("the zone's identity has %d placeholders: give one line per placeholder on stdin, an empty line for an empty value, and no more", n)
	}
	produced := asPlaceholdersProduce(value, placeholders)
	if n <= 1 && (strings.Contains(strings.TrimRightFunc(value, unicode.IsSpace), "\n") || strings.Contains(produced, "\n")) {
		// Within the value or before it, or after it where the handler
		// does not trim it (a header's or query parameter's trailing
		// space it does, and a second trailing newline is read as such).
		return "", errors.New("the identity value on stdin holds a line break, which no request's identity does: give it on one line")
	}
	if strings.Trim(produced, "\n") == "" {
		// The handler reads such a value (spaces alone, or every
		// placeholder empty) as no identity: no override can match it.
		return "", errors.New("no identity value on stdin (the handler reads this value as no identity)")
	}
	return produced, nil
}

// readIdentity reads stdin with only the trailing newline stripped.
func readIdentity(in io.Reader) (string, error) {
	b, err := io.ReadAll(bufio.NewReader(in))
	if err != nil {
		return "", fmt.Errorf("reading identity from stdin: %w", err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return "", errors.New("no identity value on stdin")
	}
	return s, nil
}

// loadConfigJSON returns the JSON of the config and its file's name: the
// file given, else a Caddyfile in the working directory, as `caddy run`
// takes one, else none (nil).
func loadConfigJSON(configFile, adapter string) ([]byte, string, error) {
	cfg, file, _, err := caddycmd.LoadConfig(configFile, adapter)
	return cfg, file, err
}

// configuredStorage returns the storage of the config (its top-level
// `storage`), or Caddy's default storage.
func configuredStorage(cfg []byte, configFile string) (certmagic.Storage, error) {
	if cfg == nil {
		return caddy.DefaultStorage, nil
	}
	var holder struct {
		StorageRaw json.RawMessage `json:"storage,omitempty" caddy:"namespace=caddy.storage inline_key=module"`
	}
	if err := json.Unmarshal(cfg, &holder); err != nil {
		return nil, fmt.Errorf("reading storage from %s: %w", configFile, err)
	}
	if holder.StorageRaw == nil {
		return caddy.DefaultStorage, nil
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	val, err := ctx.LoadModule(&holder, "StorageRaw")
	if err != nil {
		return nil, fmt.Errorf("loading storage module: %w", err)
	}
	return val.(caddy.StorageConverter).CertMagicStorage()
}

// asPlaceholdersProduce returns the identity value read on stdin, one line
// per placeholder as the identity placeholders produce it, as the handler
// reads it: headers and query parameters trimmed as trimSpaces trims, credentials headers
// (Authorization by default) spelled canonically (canonicalCredentials),
// cookies read as readCookie reads them (cookieAsRead). Only a line whose
// placeholder is one header or cookie placeholder and nothing else is
// rewritten.
func asPlaceholdersProduce(value string, placeholders []string) string {
	if len(placeholders) == 0 {
		placeholders = []string{defaultIdentity}
	}
	lines := []string{value}
	if len(placeholders) > 1 {
		lines = strings.Split(value, "\n")
	}
	if len(lines) != len(placeholders) {
		return value
	}
	for i, ph := range placeholders {
		if name, ok := headerPlaceholder(ph); ok {
			lines[i] = trimSpaces(lines[i])
			if isCredentialsHeader(name) {
				lines[i], _ = canonicalCredentials(lines[i])
			}
		}
		if _, ok := lonePlaceholder(ph, queryPrefix); ok {
			lines[i] = trimSpaces(lines[i])
		}
		if name, ok := lonePlaceholder(ph, cookiePrefix); ok {
			lines[i] = cookieAsRead(name, lines[i])
		}
	}
	return strings.Join(lines, "\n")
}

// cookieAsRead is the identity the handler reads from a request whose
// cookie name carries value: through the same parser (quotes stripped as
// Go strips them) and readCookie (canonicalCookieValue). A value Go's
// parser drops is made canonical as it is.
func cookieAsRead(name, value string) string {
	r := &http.Request{Header: http.Header{"Cookie": {name + "=" + value}}}
	if v, _ := readCookie(r, name); v != "" {
		return v
	}
	return canonicalCookieValue(value)
}

// zoneHandlers returns the configurations of the zone's handlers in the
// config, in the order Caddy loads them, and the zones the config's
// handlers use, sorted. Handlers may sit at any depth (routes, subroutes,
// handle blocks), so the whole config is walked.
func zoneHandlers(cfg []byte, zone string) ([]*Handler, []string, error) {
	var found []*Handler
	var zones []string
	if cfg == nil {
		return nil, nil, nil
	}
	var tree any
	if err := json.Unmarshal(cfg, &tree); err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case map[string]any:
			if v["handler"] == "mcp_ratelimit" {
				fields := maps.Clone(v)
				delete(fields, "handler") // Caddy's module name, no field of the handler's
				raw, _ := json.Marshal(fields)
				var h Handler
				if err := json.Unmarshal(raw, &h); err != nil {
					return fmt.Errorf("reading an mcp_ratelimit handler: %w", err)
				}
				name := cmp.Or(h.Zone, defaultZone)
				if name == zone {
					found = append(found, &h)
				}
				if !slices.Contains(zones, name) {
					zones = append(zones, name)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(v)) { // servers in a stable order
				if err := walk(v[k]); err != nil {
					return err
				}
			}
		case []any:
			for _, c := range v {
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(tree)
	slices.Sort(zones)
	return found, zones, err
}

// redisFingerprintKey returns the zone's fingerprint key from its Redis
// store, as the handler does at start with candidate (the key this host
// last used, else storage's). As a handler starting then does, it returns
// candidate when Redis cannot be reached, with why as unreached.
func redisFingerprintKey(rs *RedisStore, zone string, candidate []byte) (key []byte, unreached, err error) {
	cfg, err := rs.storeConfig(zone, 0)
	if err != nil {
		return nil, nil, err
	}
	goRedisLog.use(zap.NewNop()) // its failed dials: the note names the outage
	s, err := redisstore.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("store redis: %w", err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if key, _, err = s.FingerprintKey(ctx, candidate); err != nil {
		return candidate, err, nil
	}
	return key, nil, nil
}
