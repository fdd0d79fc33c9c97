package mcplimit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A cached key file that does not hold a 32-byte key (cut short by a full
// disk, or written by hand) is no key: the zone then waits for storage
// rather than fingerprinting under a key no other instance uses.
func TestKeyCacheReadsOnlyAWholeKey(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	const zone = "keycache"
	if err := os.MkdirAll(filepath.Dir(keyCachePath(zone)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyCachePath(zone), bytes.Repeat([]byte{7}, 16), 0o600); err != nil {
		t.Fatal(err)
	}
	if key := readKeyCache(zone); key != nil {
		t.Fatalf("a 16-byte cached key was read: %x", key)
	}
	want := bytes.Repeat([]byte{9}, 32)
	if err := writeKeyCache(zone, want); err != nil {
		t.Fatal(err)
	}
	if key := readKeyCache(zone); !bytes.Equal(key, want) {
		t.Fatalf("cached key %x, want %x", key, want)
	}
}
