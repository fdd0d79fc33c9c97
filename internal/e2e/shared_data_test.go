package e2e

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// Processes sharing a data directory (instances on one machine, or
// containers on one volume) keep the counts a storage outage left
// unpushed in files of their own. One crashes, the other stops, both
// during the outage; the one restarted takes over what each could not
// push (and crashes at once, then starts again: what it took over was in
// its own file already), and once storage is back every admitted call is
// stored.
func TestQuotaOutageCountsOfProcessesSharingADataDirectory(t *testing.T) {
	skipNearMidnight(t)
	const limit, token = 1000, "valid-shared-data"
	storage := harness.TempDir(t, "storage")
	a, b, data := startSharingData(t, site(limit), storage, storage)
	for _, p := range []*harness.Process{a, b} {
		prove(t, p, token)
		mustCall(t, p, token, "ok")
	}
	harness.Eventually(t, 5*flush, "the first counts to be stored", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)) == 2
	})

	repair := harness.BreakStorage(t, storage)
	for range 2 {
		mustCall(t, a, token, "ok")
	}
	for range 3 {
		mustCall(t, b, token, "ok")
	}
	kept := filepath.Join(data, "caddy", "mcp_ratelimit-unpushed", hex.EncodeToString([]byte(zone))+".*.counts")
	harness.Eventually(t, 10*flush, "each process to keep its unpushed counts on the host", func() bool {
		names, _ := filepath.Glob(kept)
		return len(names) == 2
	})
	a.Kill()
	b.Stop()
	a.Restart(t) // takes both files over
	a.Kill()     // at once: the counts taken over are in its own file
	a.Restart(t)
	repair()
	harness.Eventually(t, 45*time.Second, "every admitted call stored", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)) == 7
	})
	harness.Eventually(t, 10*flush, "the host's copies removed once pushed", func() bool {
		names, _ := filepath.Glob(kept)
		return len(names) == 0
	})
}

// A running process of the zone takes over the unpushed counts of one
// that crashed on the same data directory within about a second, not at
// its next refresh of its own files (every 10s): until then they count
// nowhere.
func TestRunningProcessTakesOverACrashedOnesCountsAtOnce(t *testing.T) {
	skipNearMidnight(t)
	const limit, token = 1000, "valid-takeover-now"
	storage := harness.TempDir(t, "storage")
	a, _, data := startSharingData(t, site(limit), storage, storage)
	started := time.Now()
	repair := harness.BreakStorage(t, storage)
	prove(t, a, token)
	mustCall(t, a, token, "ok")
	files := filepath.Join(data, "caddy", "mcp_ratelimit-unpushed", hex.EncodeToString([]byte(zone))+".*.counts")
	var aFile string
	harness.Eventually(t, 5*flush, "a's unpushed counts kept on the host", func() bool {
		names, _ := filepath.Glob(files)
		if len(names) == 1 {
			aFile = names[0]
		}
		return aFile != ""
	})
	a.Kill()
	for deadline := time.Now().Add(4 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(aFile); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			if time.Since(started) >= 10*time.Second {
				t.Skip("the machine is too slow to tell a takeover at once from one at the next refresh")
			}
			t.Fatal("the crashed process's counts were not taken over within 4s")
		}
	}
	repair()
	harness.Eventually(t, 10*flush, "the counts taken over stored", func() bool {
		return harness.SumIdentities(harness.StoredDayCounts(t, storage, zone)) == 1
	})
}

// startSharingData starts two processes of site, on storage directories
// storageA and storageB, that share one data directory (a's, returned), as
// instances on one machine or containers on one volume do.
func startSharingData(t *testing.T, site, storageA, storageB string) (a, b *harness.Process, data string) {
	t.Helper()
	bin := harness.BuildCaddy(t)
	backend := harness.StartBackend(t)
	a = harness.StartProcess(t, bin, site, backend.Addr, storageA, "")
	data = filepath.Join(a.Home, "data")
	homeB := t.TempDir()
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(data, filepath.Join(homeB, "data")); err != nil {
		t.Fatal(err)
	}
	return a, harness.StartProcess(t, bin, site, backend.Addr, storageB, homeB), data
}
