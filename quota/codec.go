package quota

import (
	"bytes"
	"strconv"
	"strings"
)

// The stored format is one "<key> <int>\n" line per key: compact and fast to
// parse for 100k keys. Readers skip malformed lines instead of failing.

// validKey reports whether key can be stored: not empty, no space, no newline.
func validKey(key []byte) bool {
	return len(key) > 0 && bytes.IndexByte(key, ' ') < 0 && bytes.IndexByte(key, '\n') < 0
}

// validKeyString is validKey for a key held as a string.
func validKeyString(key string) bool {
	return len(key) > 0 && strings.IndexByte(key, ' ') < 0 && strings.IndexByte(key, '\n') < 0
}

// nextLine splits s at its first newline.
func nextLine(s string) (line, rest string) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// splitLine parses one "<key> <int>" line.
func splitLine(line string) (key string, v int64, ok bool) {
	sp := strings.IndexByte(line, ' ')
	if sp <= 0 {
		return "", 0, false
	}
	v, err := strconv.ParseInt(line[sp+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return line[:sp], v, true
}

// parseCounts parses stored totals into a new map sized for extra more keys.
// Duplicate keys are summed. It returns the number of malformed lines. The
// keys share one copy of data, so the map costs one allocation for all key
// bytes.
func parseCounts(data []byte, extra int) (map[string]int64, int) {
	m := make(map[string]int64, bytes.Count(data, []byte{'\n'})+1+extra)
	malformed := 0
	for s := string(data); s != ""; {
		var line string
		line, s = nextLine(s)
		if line == "" {
			continue
		}
		k, v, ok := splitLine(line)
		if !ok {
			malformed++
			continue
		}
		m[k] += v
	}
	return m, malformed
}

// mergeCounts parses the stored totals in data, adds deltas and returns the
// new totals with their encoding, after head. The common case takes one
// pass: every line is looked up in deltas and written out at once, so each
// key costs one lookup and one insert. Keys whose total becomes 0 stay in
// totals but are not written. A stored object with duplicate keys falls back
// to the plain path.
func mergeCounts(head, data []byte, deltas deltas) (totals map[string]int64, out []byte, malformed int) {
	lines := bytes.Count(data, []byte{'\n'}) + 1
	totals = make(map[string]int64, lines+lines/4+len(deltas)/4) // slack: avoid table splits
	out = append(make([]byte, 0, len(head)+len(data)+len(deltas)*8), head...)
	matched := 0
	for s := string(data); s != ""; {
		var line string
		line, s = nextLine(s)
		if line == "" {
			continue
		}
		k, v, ok := splitLine(line)
		if !ok {
			malformed++
			continue
		}
		if d, ok := deltas[k]; ok {
			v += *d
			matched++
		}
		n := len(totals)
		totals[k] = v
		if len(totals) == n {
			return mergeCountsSlow(head, data, deltas)
		}
		if v != 0 {
			out = appendLine(out, k, v)
		}
	}
	if matched < len(deltas) {
		for k, d := range deltas {
			if _, ok := totals[k]; !ok {
				totals[k] = *d
				if *d != 0 {
					out = appendLine(out, k, *d)
				}
			}
		}
	}
	return totals, out, malformed
}

// mergeCountsSlow is mergeCounts for objects with duplicate keys: it sums
// the duplicates first.
func mergeCountsSlow(head, data []byte, deltas deltas) (map[string]int64, []byte, int) {
	totals, malformed := parseCounts(data, len(deltas))
	for k, d := range deltas {
		totals[k] += *d
	}
	out := append(make([]byte, 0, len(head)+len(data)+len(deltas)*8), head...)
	for k, v := range totals {
		if v != 0 {
			out = appendLine(out, k, v)
		}
	}
	return totals, out, malformed
}

// appendLine appends the line "<key> <value>\n".
func appendLine(buf []byte, k string, v int64) []byte {
	buf = append(buf, k...)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, v, 10)
	return append(buf, '\n')
}
