package mcplimit

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A zone never takes its own files over, however stale: its own copy
// (whose refresh a suspended process missed) and its own claim (left when
// dropClaims failed) hold counts it already counts, so taking them would
// count them twice. Nor does it take the fresh file of an owner on another
// host whose pid is free here: that process runs elsewhere.
func TestTakeOrphansLeavesOwnStaleFilesAndRemoteOwners(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	mine := hostFiles{dir: dir, zone: hex.EncodeToString([]byte("own")), owner: newOwner()}
	ownFile := hostFile(t, mine, mine.owner, "i/own", 1, now.Add(-2*orphanAfter))
	ownClaim := filepath.Join(dir, ".claim."+mine.zone+"."+mine.owner+"."+strconv.FormatInt(now.Add(-2*orphanAfter).UnixNano(), 10)+"-0.counts")
	line := appendCountLine(nil, quota.Count{Key: "i/own-claim", Period: quota.Day, Start: quota.Day.Start(now), N: 2})
	if err := os.WriteFile(ownClaim, line, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := hostFile(t, mine, "00112233aabbccdd-"+strconv.Itoa(goneProcess(t))+"-REMOTE00", "i/remote", 4, now)
	cs, claims, err := mine.takeOrphans(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 || len(claims) != 0 {
		t.Fatalf("took %v (claims %v), want nothing", cs, claims)
	}
	for _, name := range []string{ownFile, ownClaim, remote} {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("%s: %v, want it left", filepath.Base(name), err)
		}
	}
}

// A zone whose host directory does not exist yet (a first start) finds
// nothing to take over and no error; removing an own file that is not
// there is no error either (each flush that pushed everything removes it).
func TestMissingHostFilesAreNoError(t *testing.T) {
	f := hostFiles{dir: filepath.Join(t.TempDir(), "absent"), zone: hex.EncodeToString([]byte("absent")), owner: newOwner()}
	if cs, claims, err := f.takeOrphans(time.Now()); err != nil || cs != nil || claims != nil {
		t.Fatalf("takeOrphans in a missing directory: %v %v %v, want nothing and no error", cs, claims, err)
	}
	if err := f.remove(); err != nil {
		t.Fatalf("removing a file that is not there: %v", err)
	}
}

// An orphan that cannot be read is handed back under its name, for the
// next look to try again, rather than left as this process's claim.
func TestUnreadableOrphanIsHandedBack(t *testing.T) {
	dir := t.TempDir()
	f := hostFiles{dir: dir, zone: hex.EncodeToString([]byte("unreadable")), owner: newOwner()}
	legacy := filepath.Join(dir, f.zone+".counts")  // an earlier version's file: an orphan
	if err := os.Mkdir(legacy, 0o700); err != nil { // a directory: renamed, but not read
		t.Fatal(err)
	}
	_, claims, err := f.takeOrphans(time.Now())
	if err == nil || len(claims) != 0 {
		t.Fatalf("took an unreadable file: claims %v, error %v", claims, err)
	}
	if _, err := os.Stat(legacy); err != nil {
		t.Fatalf("the unreadable file is not back under its name: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("files left %v, want the unreadable file alone", left)
	}
}

// unpushedZone is a zone whose quota counts' host copy is in a directory
// of its own, logging warnings and errors into the returned log.
func unpushedZone(t *testing.T, name, dir string) (*zone, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	z := &zone{name: name}
	z.logger.Store(zap.New(core))
	z.unpushed = unpushedCopy{
		files:   hostFiles{dir: dir, zone: hex.EncodeToString([]byte(name)), owner: newOwner()},
		counter: quota.New(quota.Config{Storage: &certmagic.FileStorage{Path: t.TempDir()}}),
		what:    "quota",
	}
	return z, logs
}

// An adoption that finds nothing to take over writes no copy and says
// nothing; a stop with nothing unpushed leaves no copy and warns of none.
func TestNothingToKeepWritesNoCopy(t *testing.T) {
	z, logs := unpushedZone(t, "nothing", t.TempDir())
	z.adoptUnpushed(&z.unpushed, time.Now())
	if _, err := os.Stat(z.unpushed.files.path()); !os.IsNotExist(err) {
		t.Fatalf("own copy after adopting nothing: %v, want none", err)
	}
	z.keepUnpushed(&z.unpushed)
	if left, _ := os.ReadDir(z.unpushed.files.dir); len(left) != 0 {
		t.Fatalf("files left after a stop with nothing unpushed: %v, want none", left)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged %v, want nothing", logs.All())
	}
}

// A stop whose counts could not be saved on the host says they are lost,
// and not that they are kept.
func TestStopThatCouldNotSaveSaysNothingIsKept(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	z, logs := unpushedZone(t, "lost", filepath.Join(file, "dir")) // no directory can be made there
	z.unpushed.counter.Add([]quota.Item{{Key: []byte("i/lost"), Period: quota.Day, Limit: 100, N: 1}}, time.Now())
	z.keepUnpushed(&z.unpushed)
	if logs.FilterMessageSnippet("are lost").Len() != 1 || logs.FilterMessageSnippet("kept on this host").Len() != 0 {
		t.Fatalf("logged %v, want the loss alone", logs.All())
	}
}

// The end of a wait for a storage lock returns once the copy is no longer
// being written: the flush's own mirrorUnpushed that follows removes the
// copy of counts it pushed, and a write still running would put it back,
// to be counted again by whichever process takes it over. (A race: each
// round gives a write still running a chance to land after the removal.)
func TestCopyIsNotWrittenAfterTheWaitEnds(t *testing.T) {
	z, _ := unpushedZone(t, "waitend", t.TempDir())
	z.pol.Store(&policy{flush: time.Microsecond})
	z.unpushed.counter.Add([]quota.Item{{Key: []byte("i/waiting"), Period: quota.Day, Limit: 100, N: 1}}, time.Now())
	for range 200 {
		waited := z.keepWhileWaiting(&z.unpushed)
		time.Sleep(200 * time.Microsecond)
		waited()
		if err := z.unpushed.files.remove(); err != nil { // as the flush's mirrorUnpushed after its pushes
			t.Fatal(err)
		}
		time.Sleep(500 * time.Microsecond)
		if _, err := os.Stat(z.unpushed.files.path()); !os.IsNotExist(err) {
			t.Fatalf("the copy was written again after the wait ended: %v", err)
		}
	}
}
