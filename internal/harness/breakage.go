package harness

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BreakStorage makes the file-system storage at dir unusable (the
// directory becomes a regular file) until the returned func repairs it;
// a test that ends first is repaired on cleanup. The file and the
// directory trade places in one atomic exchange each way, so a process
// writing at that moment cannot recreate the directory in between and
// find its earlier writes set aside.
func BreakStorage(t testing.TB, dir string) (repair func()) {
	t.Helper()
	away := dir + ".away"
	if err := os.WriteFile(away, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	exchange := func() error {
		return unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, away, unix.RENAME_EXCHANGE)
	}
	if err := exchange(); err != nil {
		t.Fatalf("breaking storage %s: %v", dir, err)
	}
	broken := true
	repair = func() {
		t.Helper()
		if !broken {
			return
		}
		broken = false
		if err := exchange(); err != nil {
			t.Fatalf("repairing storage %s: %v", dir, err)
		}
	}
	t.Cleanup(repair)
	return repair
}
