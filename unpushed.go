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

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// unpushedPath is where this host keeps the quota counts a zone could not
// push to Caddy storage before it stopped (storage was unreachable):
// <AppDataDir>/mcp_ratelimit-unpushed/<zone name in hex>.counts, beside
// the key cache and outside the storage, which is what failed.
func unpushedPath(zone string) string {
	return filepath.Join(caddy.AppDataDir(), "mcp_ratelimit-unpushed", hex.EncodeToString([]byte(zone))+".counts")
}

// saveUnpushed writes us, one "<period> <start unix> <key> <n>" line each,
// replacing the file whole.
func saveUnpushed(zone string, us []quota.Unpushed) error {
	var b bytes.Buffer
	for _, u := range us {
		fmt.Fprintf(&b, "%d %d %s %d\n", u.Period, u.Start.Unix(), u.Key, u.N)
	}
	return writeHostFile(unpushedPath(zone), b.Bytes())
}

// takeUnpushed reads and removes the counts saveUnpushed kept for zone;
// none when there is no file. Malformed lines are skipped.
func takeUnpushed(zone string) ([]quota.Unpushed, error) {
	name := unpushedPath(zone)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var us []quota.Unpushed
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
		us = append(us, quota.Unpushed{Key: string(f[2]), Period: quota.Period(p), Start: time.Unix(start, 0), N: n})
	}
	return us, os.Remove(name)
}
