package mcplimit

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// unpushedPath is where this host keeps the quota counts a zone could not
// push to Caddy storage before it stopped (storage was unreachable):
// <AppDataDir>/mcp_ratelimit-unpushed/<zone name in hex>.counts, beside
// the key cache and outside the storage, which is what failed.
func unpushedPath(zone string) string { return hostCountsPath("mcp_ratelimit-unpushed", zone) }

// hostCountsPath is the file of zone's counts in dir of the host's data
// directory: <AppDataDir>/<dir>/<zone name in hex>.counts.
func hostCountsPath(dir, zone string) string {
	return filepath.Join(caddy.AppDataDir(), dir, hex.EncodeToString([]byte(zone))+".counts")
}

// saveUnpushed writes us, one "<period> <start unix> <key> <n>" line each,
// replacing the file whole.
func saveUnpushed(zone string, us []quota.Count) error {
	var b bytes.Buffer
	for _, u := range us {
		fmt.Fprintf(&b, "%d %d %s %d\n", u.Period, u.Start.Unix(), u.Key, u.N)
	}
	return writeHostFile(unpushedPath(zone), b.Bytes())
}

// takeUnpushed reads and removes the counts saveUnpushed kept for zone;
// none when there is no file. Malformed lines are skipped.
func takeUnpushed(zone string) ([]quota.Count, error) {
	name := unpushedPath(zone)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var us []quota.Count
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 4 {
			continue
		}
		p, err1 := strconv.Atoi(string(f[0]))
		start, err2 := strconv.ParseInt(string(f[1]), 10, 64)
		n, err3 := strconv.ParseInt(string(f[3]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		us = append(us, quota.Count{Key: string(f[2]), Period: quota.Period(p), Start: time.Unix(start, 0), N: n})
	}
	return us, os.Remove(name)
}

// mirrorUnpushed keeps the host's copy of the counts not yet pushed to
// storage up to date after each flush: written while storage fails, so a
// crash during an outage loses no more than one flush interval, and
// removed once they are pushed.
func (z *zone) mirrorUnpushed(pushed bool) {
	if pushed {
		if err := os.Remove(unpushedPath(z.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			z.logger.Load().Error("counts pushed to storage are still kept on this host: the next start would count them again",
				zap.String("zone", z.name), zap.String("file", unpushedPath(z.name)), zap.Error(err))
		}
		return
	}
	if us := z.quota.Unpushed(); len(us) > 0 {
		if err := saveUnpushed(z.name, us); err != nil {
			z.logger.Load().Error("counts not pushed to storage could not be kept on this host either: a crash now would lose them",
				zap.String("zone", z.name), zap.Int("keys", len(us)), zap.Error(err))
		}
	}
}
