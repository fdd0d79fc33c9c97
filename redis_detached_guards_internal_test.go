package mcplimit

import (
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A zone that starts without the store it had takes over the counts a
// gone process of the zone kept for that store on the host: they are
// among those it keeps for the store's return (saved in storage at its
// stop), and its own copy holds them.
func TestDetachTakesOverTheCountsAGoneProcessKeptForRedis(t *testing.T) {
	awayFromMidnight(t)
	now := time.Now()
	z := &zone{
		name:       "detach-adopt",
		redisHost:  hostFiles{dir: t.TempDir(), zone: hex.EncodeToString([]byte("detach-adopt")), owner: newOwner()},
		quota:      quota.New(quota.Config{}),
		redisBound: quota.New(quota.Config{}),
	}
	z.logger.Store(zap.NewNop())
	gone := thisHost + "-" + strconv.Itoa(goneProcess(t)) + "-GONEGONE"
	hostFile(t, z.redisHost, gone, "i/crashed", 4, now)
	z.detach()
	dt := z.detached.Load()
	if n := dt.pending[deltaKey{key: "i/crashed", period: quota.Day, start: quota.Day.Start(now).Unix()}]; n != 4 {
		t.Fatalf("counts kept for the store after a start without it: i/crashed %d, want the gone process's 4 (%v)", n, dt.pending)
	}
}

// refusingStorage refuses every write.
type refusingStorage struct{ certmagic.Storage }

func (refusingStorage) Store(context.Context, string, []byte) error {
	return errors.New("storage refuses writes")
}

// detachedZone is a zone without its store, keeping 3 calls of i/kept for
// it, copied to the host as a flush copies them, on storage st; owner
// owns its host files.
func detachedZone(t *testing.T, st certmagic.Storage, owner string) (*zone, string) {
	t.Helper()
	dir := t.TempDir()
	z := &zone{name: "detached-stop", storage: &swapStorage{}, redisHost: hostFiles{dir: dir, zone: hex.EncodeToString([]byte("detached-stop")), owner: owner}}
	z.storage.set(st)
	z.logger.Store(zap.NewNop())
	dt := &zoneRedis{pending: map[deltaKey]int64{{key: "i/kept", period: quota.Day, start: quota.Day.Start(time.Now()).Unix()}: 3}}
	z.detached.Store(dt)
	z.mirrorRedisPending(dt)
	if _, err := os.Stat(z.redisHost.path()); err != nil {
		t.Fatalf("no host copy of the counts kept for the store: %v", err)
	}
	return z, dir
}

// A stop that saves in storage the counts kept for a store the zone has
// not removes the host's copy of them: the next start would take them
// from both, and push them twice.
func TestStopThatSavedTheDetachedCountsRemovesTheHostsCopy(t *testing.T) {
	awayFromMidnight(t)
	stored := t.TempDir()
	z, _ := detachedZone(t, &certmagic.FileStorage{Path: stored}, newOwner())
	z.closeDetached(t.Context())
	if _, err := os.Stat(z.redisHost.path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("host copy after the counts were saved in storage: %v, want it gone", err)
	}
	if saved, err := os.ReadDir(stored + "/mcp_ratelimit/detached-stop/redis-pending"); err != nil || len(saved) != 1 {
		t.Fatalf("counts saved in storage at the stop: %v %v, want one object", saved, err)
	}
}

// A stop whose storage refuses the counts kept for a store the zone has
// not leaves them on the host, handed over at once: a process of the
// zone on another host sharing the data directory takes them at its next
// look.
func TestStopThatCouldNotSaveTheDetachedCountsHandsTheHostsCopyOver(t *testing.T) {
	awayFromMidnight(t)
	z, dir := detachedZone(t, refusingStorage{}, "00112233aabbccdd-9-STOPPING")
	z.closeDetached(t.Context())
	cs, _, err := hostFiles{dir: dir, zone: z.redisHost.zone, owner: newOwner()}.takeOrphans(time.Now())
	if err != nil || len(cs) != 1 || cs[0].Key != "i/kept" || cs[0].N != 3 {
		t.Fatalf("the next process took %v (%v), want the stopped zone's i/kept 3", cs, err)
	}
}
