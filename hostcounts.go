package mcplimit

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// Counts kept outside the store they belong to (on the host, or in
// storage for Redis) are written one "<key> <period> <start unix> <n>"
// line each, with " <kept>" after it when the count has a Kept part.

// maxCountLine is the most a line takes beyond its key: four int64s
// (with sign), four spaces and the newline.
const maxCountLine = 4*20 + 5

// appendCountLine appends c as one line.
func appendCountLine(b []byte, c quota.Count) []byte {
	b = append(b, c.Key...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(c.Period), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, c.Start.Unix(), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, c.N, 10)
	if c.Kept != 0 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, c.Kept, 10)
	}
	return append(b, '\n')
}

// parseCounts reads the lines appendCountLine wrote; malformed lines are
// skipped. Fields are split at single spaces, as they were written: a key
// holds every byte but space and newline (appendKeyTool escapes only
// those and '%'), so a tool named with a tab or a no-break space keeps
// its counts.
func parseCounts(data []byte) []quota.Count {
	var out []quota.Count
	for line := range strings.Lines(string(data)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), " ")
		if len(f) != 4 && len(f) != 5 {
			continue
		}
		p, err1 := strconv.Atoi(f[1])
		start, err2 := strconv.ParseInt(f[2], 10, 64)
		n, err3 := strconv.ParseInt(f[3], 10, 64)
		var kept int64
		var err4 error
		if len(f) == 5 {
			kept, err4 = strconv.ParseInt(f[4], 10, 64)
		}
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !quota.Period(p).Valid() {
			continue
		}
		out = append(out, quota.Count{Key: f[0], Period: quota.Period(p), Start: time.Unix(start, 0).UTC(), N: n, Kept: kept})
	}
	return out
}

// countsCopyPath is a zone's copy of counts of one kind kept on the host,
// one per zone: <AppDataDir>/<kind>/<zone name in hex>.counts.
func countsCopyPath(kind, zone string) string {
	return filepath.Join(caddy.AppDataDir(), kind, hex.EncodeToString([]byte(zone))+".counts")
}

// writeCounts replaces the host file name with cs.
func writeCounts(name string, cs []quota.Count) error {
	size := 0
	for _, c := range cs {
		size += len(c.Key) + maxCountLine
	}
	b := make([]byte, 0, size)
	for _, c := range cs {
		b = appendCountLine(b, c)
	}
	return writeHostFile(name, b)
}

// readCounts reads the host file name; no counts when there is none.
func readCounts(name string) ([]quota.Count, error) {
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseCounts(data), nil
}
