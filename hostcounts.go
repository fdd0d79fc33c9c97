package mcplimit

import (
	"strconv"
	"strings"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// Counts kept outside the store they belong to (on the host, or in
// storage for Redis) are written one "<key> <period> <start unix> <n>"
// line each.

// appendCountLine appends c as one line.
func appendCountLine(b []byte, c quota.Count) []byte {
	b = append(b, c.Key...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(c.Period), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, c.Start.Unix(), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, c.N, 10)
	return append(b, '\n')
}

// parseCounts reads the lines appendCountLine wrote; malformed lines are
// skipped.
func parseCounts(data []byte) []quota.Count {
	var out []quota.Count
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		p, err1 := strconv.Atoi(f[1])
		start, err2 := strconv.ParseInt(f[2], 10, 64)
		n, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || !quota.Period(p).Valid() {
			continue
		}
		out = append(out, quota.Count{Key: f[0], Period: quota.Period(p), Start: time.Unix(start, 0).UTC(), N: n})
	}
	return out
}
