package mcplimit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// Counts a zone keeps on the host, outside the store they belong to, are
// one file per zone per process:
//
//	<AppDataDir>/<kind>/<zone name in hex>.<owner>.counts
//
// where owner is "<host>-<pid>-<random>", host being 16 hex digits of the
// SHA-256 of the host name (a name of any length keeps the file name
// short). Processes sharing a data directory (several instances on one
// machine, or containers on one volume) then never overwrite each other's
// counts. The owner refreshes
// its files' modification time every hostFileBeat while it runs. A file is
// an orphan, taken over by whichever process of the zone sees it first,
// when its owner stopped gracefully (which sets the time to the Unix
// epoch), when its owner ran on this host and that process is gone, or
// when it was not refreshed for orphanAfter (an owner on another host
// that crashed). A file named without an owner (<zone in hex>.counts,
// written by earlier versions at a stop) is an orphan too.
const (
	hostFileBeat = 10 * time.Second
	orphanAfter  = 6 * hostFileBeat
)

// hostFiles names a zone's file of one kind of counts kept on the host.
type hostFiles struct {
	dir   string // <AppDataDir>/<kind>
	zone  string // the zone name in hex
	owner string
}

// thisHost is this process's host as owners spell it.
var thisHost = hostID()

func hostID() string {
	name, _ := os.Hostname()
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:8])
}

// newOwner returns a fresh owner of this process, live until endOwner.
// Each zone object has its own, so a zone that a reload removes and a
// later one adds again takes its earlier self's files over once they are
// released, or once it has ended.
func newOwner() string {
	o := thisHost + "-" + strconv.Itoa(os.Getpid()) + "-" + rand.Text()[:8]
	liveOwners.Store(o, struct{}{})
	return o
}

// liveOwners holds the owners of this process's zones that have not ended.
var liveOwners sync.Map

// endOwner marks owner, of a zone that has ended (its last files
// written), gone: its files are another process's that stopped, for the
// zones that start after it, rather than left until this one stops.
func endOwner(owner string) { liveOwners.Delete(owner) }

func newHostFiles(kind, zone, owner string) hostFiles {
	return hostFiles{dir: filepath.Join(caddy.AppDataDir(), kind), zone: hex.EncodeToString([]byte(zone)), owner: owner}
}

// path is the owner's file.
func (f hostFiles) path() string { return filepath.Join(f.dir, f.zone+"."+f.owner+".counts") }

// save replaces the owner's file with data.
func (f hostFiles) save(data []byte) error { return writeHostFile(f.path(), data) }

// remove removes the owner's file, if any.
func (f hostFiles) remove() error {
	if err := os.Remove(f.path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// touch tells other processes that the owner of the file, if any, still
// runs.
func (f hostFiles) touch(now time.Time) { _ = os.Chtimes(f.path(), now, now) }

// release hands the owner's file, if any, to the next process of the zone
// to look: the owner stops.
func (f hostFiles) release() {
	epoch := time.Unix(0, 0)
	_ = os.Chtimes(f.path(), epoch, epoch)
}

// takeOrphans takes the zone's orphaned files over: each is claimed by a
// rename (only one process can win it) and read. The counts returned are
// the owner's to count from now on; the files that could not be read are
// named in the error. The claimed files stay, as
// .claim.<zone in hex>.<owner>.<unix nanoseconds>-<n>.counts, until
// dropClaims removes them, which the owner does once its own file holds
// their counts. A claim is itself an orphan when its claimer ran on this
// host and is gone, or when it is older than orphanAfter (claims last
// milliseconds): a crash in between leaves the counts to another process.
func (f hostFiles) takeOrphans(now time.Time) (counts []quota.Count, claims []string, err error) {
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, e := range entries {
		if !f.orphan(e, now) {
			continue
		}
		name := filepath.Join(f.dir, e.Name())
		claim := filepath.Join(f.dir, ".claim."+f.zone+"."+f.owner+"."+strconv.FormatInt(now.UnixNano(), 10)+"-"+strconv.Itoa(len(claims)+len(errs))+".counts")
		if os.Rename(name, claim) != nil {
			continue // another process took it first
		}
		data, err := os.ReadFile(claim)
		if err != nil {
			// Handed back under its name, for the next look to try again.
			errs = append(errs, errors.Join(err, os.Rename(claim, name)))
			continue
		}
		counts = append(counts, parseCounts(data)...)
		claims = append(claims, claim)
	}
	return counts, claims, errors.Join(errs...)
}

// orphan reports whether the directory entry e is a file of the zone's
// that nobody will push: another owner's file (or an earlier version's)
// orphaned by its owner, or another claimer's claim orphaned by it.
func (f hostFiles) orphan(e fs.DirEntry, now time.Time) bool {
	mid, ok := strings.CutSuffix(e.Name(), ".counts")
	if !ok {
		return false
	}
	if rest, isClaim := strings.CutPrefix(mid, ".claim."+f.zone+"."); isClaim {
		claimer, at, ok := strings.Cut(rest, ".")
		nanos, err := strconv.ParseInt(strings.SplitN(at, "-", 2)[0], 10, 64)
		if !ok || err != nil || claimer == f.owner {
			return false
		}
		return now.Sub(time.Unix(0, nanos)) >= orphanAfter || ownerGone(claimer)
	}
	if mid == f.zone {
		return true // an earlier version's file
	}
	owner := f.ownerOf(e.Name())
	if owner == "" || owner == f.owner {
		return false
	}
	info, err := e.Info()
	return err == nil && orphaned(owner, info.ModTime(), now)
}

// readAll reads every file of the zone of f's kind on the host, whoever
// its owner, by name; claims and files being written are not among them.
func (f hostFiles) readAll() (map[string][]quota.Count, error) {
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]quota.Count{}
	var errs []error
	for _, e := range entries {
		if f.ownerOf(e.Name()) == "" {
			continue
		}
		name := filepath.Join(f.dir, e.Name())
		cs, err := readCounts(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[name] = cs
	}
	return out, errors.Join(errs...)
}

// ownerOf is the owner of the zone's file name (a path or a base name), or
// "" when it is no owner's file of the zone's (a claim, a file being
// written, an earlier version's file, another zone's).
func (f hostFiles) ownerOf(name string) string {
	mid, ok := strings.CutSuffix(filepath.Base(name), ".counts")
	if !ok {
		return ""
	}
	owner, ok := strings.CutPrefix(mid, f.zone+".")
	if !ok || strings.Contains(owner, ".") {
		return ""
	}
	return owner
}

// dropClaims removes the named files: those takeOrphans claimed, or
// others; one already gone is no error.
func dropClaims(claims []string) error {
	var errs []error
	for _, c := range claims {
		if err := os.Remove(c); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// orphaned reports whether the file of owner, last refreshed at mtime,
// has nobody left to push it.
func orphaned(owner string, mtime, now time.Time) bool {
	return now.Sub(mtime) >= orphanAfter || ownerGone(owner)
}

// ownerGone reports whether owner ran on this host and is gone: its
// process, or, in this process, its zone (see endOwner).
func ownerGone(owner string) bool {
	host, rest, _ := strings.Cut(owner, "-")
	pid, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(pid)
	if host != thisHost || err != nil {
		return false
	}
	if n == os.Getpid() {
		_, live := liveOwners.Load(owner)
		return !live
	}
	return processGone(n)
}

// processGone reports whether no process of this host has the id pid, or
// only a zombie: one that ended and waits for its parent to reap it (a
// process killed while its parent, init for a detached Caddy, is slow to
// reap it), which a signal still reaches.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	defer func() { _ = p.Release() }()
	err = p.Signal(syscall.Signal(0))
	return errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) || zombie(pid)
}

// zombie reports whether the process pid has ended and is not reaped yet,
// where /proc tells (Linux): its state, after the command name in
// parentheses, is Z (or X, dead).
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, ok := bytes.Cut(stat[bytes.LastIndexByte(stat, ')')+1:], []byte(" "))
	return ok && len(rest) > 0 && (rest[0] == 'Z' || rest[0] == 'X')
}

// keepHostFiles refreshes the zone's files on the host every hostFileBeat,
// until ctx ends. It runs apart from the zone's run loop, which a flush
// may hold longer than orphanAfter; the run loop takes other processes'
// files over (adoptHostFiles), as it writes and removes the zone's own.
func (z *zone) keepHostFiles(ctx context.Context) {
	defer close(z.beat)
	tick := time.NewTicker(hostFileBeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, u := range z.unpushedCopies() {
				u.files.touch(now)
			}
			z.redisHost.touch(now)
		}
	}
}

// adoptHostFiles takes over the files of counts other processes of the
// zone left on the host. It runs on the zone's run loop, between flushes:
// a flush removes the zone's own file once its counts are pushed, and
// must not remove it while an adoption has just written counts it did
// not push, nor be undone by an adoption's older snapshot.
func (z *zone) adoptHostFiles(now time.Time) {
	for _, u := range z.unpushedCopies() {
		z.adoptUnpushed(u, now)
	}
	if r := cmp.Or(z.redis.Load(), z.detached.Load()); r != nil {
		z.adoptRedisPending(r, now)
	}
}
