package mcplimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A host file that cannot be put in place (its name is taken by a
// directory) is an error, and leaves no temporary file behind.
func TestFailedHostFileWriteLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(name, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeHostFile(name, []byte("data")); err == nil {
		t.Fatal("writing over a directory worked")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("a failed write left %s behind", e.Name())
		}
	}
}
