package mcplimit

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// hostFile writes a file of n counts of key for owner in f's directory,
// last refreshed at mtime, and returns its name.
func hostFile(t *testing.T, f hostFiles, owner, key string, n int64, mtime time.Time) string {
	t.Helper()
	name := filepath.Join(f.dir, f.zone+"."+owner+".counts")
	if owner == "" {
		name = filepath.Join(f.dir, f.zone+".counts")
	}
	start := quota.Day.Start(time.Now())
	if err := os.WriteFile(name, appendCountLine(nil, quota.Count{Key: key, Period: quota.Day, Start: start, N: n}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return name
}

// goneProcess returns the id of a process of this host that has ended.
func goneProcess(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to end: %v", err)
	}
	return cmd.Process.Pid
}

// A zone takes over the files of processes that stopped gracefully, that
// ran on this host and are gone, or that went silent for orphanAfter, and
// those of zones of this process that ended; a running owner's file, its
// own and other zones' stay.
func TestTakeOrphansTakesOnlyFilesNobodyWillPush(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	mine := hostFiles{dir: dir, zone: hex.EncodeToString([]byte("a")), owner: newOwner()}
	alive := newOwner() // another zone object of this process, running
	ended := newOwner() // one that ended
	endOwner(ended)
	gone := thisHost + "-" + strconv.Itoa(goneProcess(t)) + "-GONEGONE"
	elsewhere := "00112233aabbccdd-1-REMOTE00" // another host
	remoteCrashed := "00112233aabbccdd-2-REMOTE00"
	other := hostFiles{dir: dir, zone: hex.EncodeToString([]byte("ab")), owner: gone}

	stays := []string{
		hostFile(t, mine, mine.owner, "i/own", 1, now),
		hostFile(t, mine, alive, "i/alive", 2, now.Add(-orphanAfter/2)),
		hostFile(t, mine, elsewhere, "i/elsewhere", 4, now.Add(-orphanAfter+time.Second)),
		hostFile(t, other, gone, "i/other-zone", 8, time.Unix(0, 0)),
	}
	hostFile(t, mine, alive+"X", "i/released", 16, time.Unix(0, 0))
	hostFile(t, mine, gone, "i/gone", 32, now)
	hostFile(t, mine, ended, "i/ended", 256, now)
	hostFile(t, mine, remoteCrashed, "i/silent", 64, now.Add(-orphanAfter))
	hostFile(t, mine, "", "i/legacy", 128, now)

	cs, claims, err := mine.takeOrphans(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := dropClaims(claims); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range cs {
		got[c.Key] += c.N
	}
	want := map[string]int64{"i/released": 16, "i/gone": 32, "i/silent": 64, "i/legacy": 128, "i/ended": 256}
	if len(got) != len(want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("took %v, want %v", got, want)
		}
	}
	for _, name := range stays {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("%s: %v, want it left to its owner", filepath.Base(name), err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != len(stays) {
		t.Fatalf("files left %v, want only %d (taken files and claims removed)", left, len(stays))
	}
}

// Processes looking at once take each orphan exactly once: the claim is a
// rename only one of them can win.
func TestTakeOrphansClaimsEachFileOnce(t *testing.T) {
	dir := t.TempDir()
	zone := hex.EncodeToString([]byte("z"))
	const files = 50
	for i := range files {
		hostFile(t, hostFiles{dir: dir, zone: zone}, "released-"+strconv.Itoa(i), "i/k", 1, time.Unix(0, 0))
	}
	var mu sync.Mutex
	var total int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			cs, claims, err := hostFiles{dir: dir, zone: zone, owner: newOwner()}.takeOrphans(time.Now())
			if err == nil {
				err = dropClaims(claims)
			}
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, c := range cs {
				total += c.N
			}
		})
	}
	wg.Wait()
	if total != files {
		t.Fatalf("took %d counts from %d files of 1", total, files)
	}
}

// A claim left by a claimer that crashed before its own file held the
// counts is an orphan too; one a live claimer is working on is not.
func TestClaimsOfGoneClaimersAreTakenOver(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	mine := hostFiles{dir: dir, zone: hex.EncodeToString([]byte("c")), owner: newOwner()}
	claim := func(claimer string, at time.Time, key string, n int64) {
		t.Helper()
		name := filepath.Join(dir, ".claim."+mine.zone+"."+claimer+"."+strconv.FormatInt(at.UnixNano(), 10)+"-0.counts")
		line := appendCountLine(nil, quota.Count{Key: key, Period: quota.Day, Start: quota.Day.Start(now), N: n})
		if err := os.WriteFile(name, line, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	alive := newOwner() // a running zone of this process
	claim(alive, now, "i/working", 1)
	claim(thisHost+"-"+strconv.Itoa(goneProcess(t))+"-GONECLAI", now, "i/crashed", 2)
	claim("00112233aabbccdd-7-REMOTECL", now.Add(-orphanAfter), "i/old", 4)
	cs, claims, err := mine.takeOrphans(now)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	for _, c := range cs {
		got += c.N
	}
	if got != 6 || len(claims) != 2 {
		t.Fatalf("took %v (%d claims), want the crashed claimer's 2 and the old claim's 4", cs, len(claims))
	}
}

// Counts taken over from a gone process are in this process's own file
// by the time the taken file goes: a crash right after the adoption loses
// none of them.
func TestAdoptedCountsAreKeptBeforeTheirFilesGo(t *testing.T) {
	now := time.Now()
	gone := thisHost + "-" + strconv.Itoa(goneProcess(t)) + "-GONEGONE"
	kept := func(t *testing.T, f hostFiles, key string, n int64) {
		t.Helper()
		data, err := os.ReadFile(f.path())
		if cs := parseCounts(data); err != nil || len(cs) != 1 || cs[0].Key != key || cs[0].N != n {
			t.Fatalf("own file holds %v (%v), want %s %d", cs, err, key, n)
		}
		if left, _ := os.ReadDir(f.dir); len(left) != 1 {
			t.Fatalf("files left %v, want only the own file (the taken file and its claim gone)", left)
		}
	}
	t.Run("storage", func(t *testing.T) {
		z := &zone{name: "adopt"}
		z.logger.Store(zap.NewNop())
		z.unpushed = unpushedCopy{
			files:   hostFiles{dir: t.TempDir(), zone: hex.EncodeToString([]byte("adopt")), owner: newOwner()},
			counter: quota.New(quota.Config{Storage: &certmagic.FileStorage{Path: t.TempDir()}}),
		}
		hostFile(t, z.unpushed.files, gone, "i/crashed", 3, now)
		z.adoptUnpushed(&z.unpushed, now)
		kept(t, z.unpushed.files, "i/crashed", 3)
	})
	t.Run("redis", func(t *testing.T) {
		z := &zone{name: "adopt", redisHost: hostFiles{dir: t.TempDir(), zone: hex.EncodeToString([]byte("adopt")), owner: newOwner()}}
		z.logger.Store(zap.NewNop())
		hostFile(t, z.redisHost, gone, "i/crashed", 4, now)
		z.adoptRedisPending(&zoneRedis{pending: map[deltaKey]int64{}}, now)
		kept(t, z.redisHost, "i/crashed", 4)
	})
}

// A zone stopping while storage refuses its counts keeps them on the host
// and hands its file over at once: a process of the zone on another host
// sharing the data directory (containers on one volume), which cannot
// tell whether the owner still runs, takes it at its next look rather
// than orphanAfter later.
func TestCountsKeptAtAStopAreHandedOverAtOnce(t *testing.T) {
	dir, zoneHex := t.TempDir(), hex.EncodeToString([]byte("handover"))
	z := &zone{name: "handover"}
	z.logger.Store(zap.NewNop())
	z.unpushed = unpushedCopy{
		files:   hostFiles{dir: dir, zone: zoneHex, owner: "00112233aabbccdd-9-STOPPING"},
		counter: quota.New(quota.Config{Storage: &certmagic.FileStorage{Path: t.TempDir()}}),
	}
	now := time.Now()
	z.unpushed.counter.Add([]quota.Item{{Key: []byte("i/stopping"), Period: quota.Day, Limit: 100, N: 5}}, now)
	z.keepUnpushed(&z.unpushed)
	cs, _, err := hostFiles{dir: dir, zone: zoneHex, owner: newOwner()}.takeOrphans(time.Now())
	if err != nil || len(cs) != 1 || cs[0].Key != "i/stopping" || cs[0].N != 5 {
		t.Fatalf("the next process took %v (%v), want the stopped zone's i/stopping 5", cs, err)
	}
}

// After a flush whose pushes went through, the host's copy goes, though
// counts made during that flush are pending again: they were never
// refused by storage, and a copy of them, taken over after a crash, would
// be counted a second time once the next flush had pushed them.
func TestCopyGoesAfterAFlushThatPushedThoughCountsArePending(t *testing.T) {
	z := &zone{name: "pushed"}
	z.logger.Store(zap.NewNop())
	z.unpushed = unpushedCopy{
		files:   hostFiles{dir: t.TempDir(), zone: hex.EncodeToString([]byte("pushed")), owner: newOwner()},
		counter: quota.New(quota.Config{Storage: &certmagic.FileStorage{Path: t.TempDir()}}),
	}
	z.unpushed.counter.Add([]quota.Item{{Key: []byte("i/during"), Period: quota.Day, Limit: 100, N: 1}}, time.Now())
	z.mirrorUnpushed(&z.unpushed, false) // an earlier failed flush kept a copy
	if _, err := os.Stat(z.unpushed.files.path()); err != nil {
		t.Fatalf("no copy after a failed flush: %v", err)
	}
	z.mirrorUnpushed(&z.unpushed, true)
	if _, err := os.Stat(z.unpushed.files.path()); !os.IsNotExist(err) {
		t.Fatalf("the copy after a flush that pushed: %v, want it gone", err)
	}
}

// A process that ended but is not reaped yet (a zombie: its parent has
// not waited for it) is gone: its files are taken over at once, not once
// they go stale.
func TestZombieProcessIsGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("no process to start: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Skipf("no /proc to tell a zombie by: %v", err)
		}
		if strings.Contains(string(stat), ") Z") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process did not end: %s", stat)
		}
	}
	if !processGone(pid) {
		t.Fatal("a zombie process is taken as running")
	}
	if processGone(os.Getpid()) {
		t.Fatal("this process is taken as gone")
	}
}

// While a push waits for a held storage lock, the host's copy of the
// counts not yet pushed is written again every flush interval, with the
// counts made during the wait: a wait longer than an interval then loses
// no more than one interval to a crash.
func TestCopyIsKeptAgainWhileAPushWaits(t *testing.T) {
	z := &zone{name: "wait"}
	z.logger.Store(zap.NewNop())
	z.pol.Store(&policy{flush: 20 * time.Millisecond})
	z.unpushed = unpushedCopy{
		files:   hostFiles{dir: t.TempDir(), zone: hex.EncodeToString([]byte("wait")), owner: newOwner()},
		counter: quota.New(quota.Config{Storage: &certmagic.FileStorage{Path: t.TempDir()}}),
	}
	now := time.Now()
	count := func(n int64) {
		z.unpushed.counter.Add([]quota.Item{{Key: []byte("i/waiting"), Period: quota.Day, Limit: 100, N: n}}, now)
	}
	kept := func() int64 {
		cs, err := readCounts(z.unpushed.files.path())
		if err != nil || len(cs) != 1 {
			return -1
		}
		return cs[0].N
	}
	count(2)
	waited := z.keepWhileWaiting(&z.unpushed)
	if got := kept(); got != 2 {
		t.Fatalf("copy holds %d before the wait, want 2", got)
	}
	count(3)
	deadline := time.Now().Add(5 * time.Second)
	for kept() != 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	waited()
	if got := kept(); got != 5 {
		t.Fatalf("copy holds %d during the wait, want the 5 counted by then", got)
	}
	count(1)
	time.Sleep(100 * time.Millisecond)
	if got := kept(); got != 5 {
		t.Fatalf("copy holds %d after the wait ended, want it left to the flush (5)", got)
	}
}
