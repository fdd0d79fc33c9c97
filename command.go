package mcplimit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/certmagic"
	"github.com/spf13/cobra"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "mcp-ratelimit",
		Usage: "fingerprint --zone <name> [--config <path>] [--adapter <name>]",
		Short: "Tools for the mcp_ratelimit handler",
		Long: `
The fingerprint subcommand reads an identity value on stdin exactly as the
identity placeholders produce it (e.g. the whole Authorization header value
"Bearer abc"; with several placeholders, one value per line), strips the
trailing newline, and prints its fingerprint under the zone's key from the
configured storage — the same fingerprint the handler logs, shows in the
admin API and accepts in "override".`,
		CobraFunc: func(cmd *cobra.Command) {
			fp := &cobra.Command{
				Use:   "fingerprint --zone <name> [--config <path>] [--adapter <name>]",
				Short: "Prints the fingerprint of the identity value read on stdin",
				Args:  cobra.NoArgs,
				RunE: func(c *cobra.Command, _ []string) error {
					zoneName, _ := c.Flags().GetString("zone")
					config, _ := c.Flags().GetString("config")
					adapter, _ := c.Flags().GetString("adapter")
					return runFingerprint(zoneName, config, adapter, os.Stdin, os.Stdout)
				},
			}
			fp.Flags().String("zone", defaultZone, "Zone whose key to use")
			fp.Flags().StringP("config", "c", "", "Config file whose storage holds the key (default: Caddy's default storage)")
			fp.Flags().StringP("adapter", "a", "", "Name of config adapter")
			cmd.AddCommand(fp)
		},
	})
}

func runFingerprint(zoneName, configFile, adapter string, in io.Reader, out io.Writer) error {
	value, err := readIdentity(in)
	if err != nil {
		return err
	}
	stor, err := configuredStorage(configFile, adapter)
	if err != nil {
		return err
	}
	key, created, err := loadFingerprintKey(context.Background(), stor, zoneName)
	if err != nil {
		return err
	}
	if created {
		// Preparing overrides before the first deploy is legitimate, but
		// a mistyped zone or storage would silently print a fingerprint
		// that matches nothing: say so.
		fmt.Fprintf(os.Stderr, "note: zone %q had no fingerprint key in this storage yet; created one (Caddy will use it for this zone on this storage)\n", zoneName)
	}
	fp := newFingerprinter(key).sum(value)
	_, err = fmt.Fprintln(out, fingerprintHex(fp))
	return err
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

// configuredStorage returns the storage of the given config (its
// top-level `storage`), or Caddy's default storage.
func configuredStorage(configFile, adapter string) (certmagic.Storage, error) {
	if configFile == "" {
		return caddy.DefaultStorage, nil
	}
	cfg, _, _, err := caddycmd.LoadConfig(configFile, adapter)
	if err != nil {
		return nil, err
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
