package mcplimit

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
)

// keyCachePath is where this host keeps a copy of zone's fingerprint key,
// so that a start while storage is unreachable fingerprints as before:
// <AppDataDir>/mcp_ratelimit-keycache/<zone name in hex>.key. The
// directory is beside, never inside, the file-system storage's
// mcp_ratelimit/ tree (whose default root is AppDataDir), and hex keeps
// any zone name a safe file name that no other zone's differs from only
// by case.
func keyCachePath(zone string) string {
	return filepath.Join(caddy.AppDataDir(), "mcp_ratelimit-keycache", hex.EncodeToString([]byte(zone))+".key")
}

// readKeyCache returns the cached fingerprint key of zone, or nil when
// there is none that can be read.
func readKeyCache(zone string) []byte {
	key, err := os.ReadFile(keyCachePath(zone))
	if err != nil || len(key) != 32 {
		return nil
	}
	return key
}

// writeKeyCache makes key the cached fingerprint key of zone, unless it
// already is. The file is readable by its owner only and is replaced
// whole, so a crash never leaves half a key.
func writeKeyCache(zone string, key []byte) error {
	if bytes.Equal(readKeyCache(zone), key) {
		return nil
	}
	name := keyCachePath(zone)
	if err := writeHostFile(name, key); err != nil {
		return fmt.Errorf("caching fingerprint key in %s: %w", name, err)
	}
	return nil
}

// writeHostFile replaces the file name on this host with data, whole (a
// crash never leaves half of it), readable by its owner only, creating its
// directory (0700) if needed.
func writeHostFile(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*") // mode 0600
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
