// Package lockfile fakes, for tests, a certmagic file-storage lock that
// is never released.
package lockfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// KeepFresh leaves the certmagic file-storage lock file lock behind as
// a crashed holder would, and keeps it fresh every second, as certmagic's
// refresher of an earlier lock of that name does once it finds the file:
// for as long as the file exists, until the test ends.
func KeepFresh(t testing.TB, lock string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(lock), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	refresh := func() bool {
		f, err := os.OpenFile(lock, os.O_RDWR|os.O_TRUNC, 0)
		if err != nil {
			return false
		}
		defer f.Close()
		meta, _ := json.Marshal(map[string]time.Time{"created": created, "updated": time.Now()})
		_, _ = f.Write(meta)
		return true
	}
	refresh()
	stop := make(chan struct{})
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		for refresh() {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-refreshed })
}
