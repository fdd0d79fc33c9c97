package quota

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// A push is stored under a lock, but a lock does not fence a writer that
// paused (a frozen VM, SIGSTOP, swap) past the time certmagic keeps its
// lock: another instance breaks the lock and pushes, and the paused one,
// waking, stores what it merged before the pause over that push. The
// object therefore carries its history: a lineage, and the writers of its
// last historyLen pushes, each with its generation. A writer whose push is
// no longer in the history of a later copy of the same lineage, within the
// generations it keeps, was overwritten, and pushes its deltas again.
//
// The history is the object's first lines, before the counts, and a push
// ends the object with an end line:
//
//	# lineage <hex>
//	# w <generation> <writer>
//	<key> <count>
//	# end
//
// An object with a history but without its end line was cut short (a
// truncated file): it lost its counts, and maybe its history's newest
// entries, and is damaged (see damage.go), not overwritten.
//
// Versions before it read them as malformed lines and drop them when they
// push; the next push starts a new lineage, where no earlier push can be
// found missing.

// historyLen is how many pushes an object remembers: far more than its
// instances push between two flushes of one of them.
const historyLen = 256

// history is what an object holds of its own past.
type history struct {
	lineage string
	entries []historyEntry // oldest first
}

// historyEntry is one push: the generation it stored and who pushed it.
type historyEntry struct {
	gen    int64
	writer string
}

// sentPush is one of the last pushes a Counter stored (see checkSent).
type sentPush struct {
	lineage string
	gen     int64
	writer  string
	deltas  deltas
}

// newID returns a random identifier for a lineage or a writer.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// endLine is the last line of an object a push stored.
const endLine = "# end\n"

// splitObject returns the history at the start of data and its counts,
// without the end line, and 1 for an object with a history that lacks the
// end line (cut short), else 0: a malformed line more.
func splitObject(data []byte) (history, []byte, int) {
	h, rest := splitHistory(data)
	n := len(rest) - len(endLine)
	if n >= 0 && string(rest[n:]) == endLine && (n == 0 || rest[n-1] == '\n') {
		return h, rest[:n], 0
	}
	if h.lineage != "" {
		return h, rest, 1
	}
	return h, rest, 0
}

// splitHistory returns the history at the start of data and the rest.
// Data without one (an empty object, or one a version before it stored)
// has an empty history.
func splitHistory(data []byte) (history, []byte) {
	var h history
	s := string(data)
	for strings.HasPrefix(s, "# ") && !strings.HasPrefix(s, endLine) {
		line, rest := nextLine(s)
		f := strings.Fields(line[2:])
		switch {
		case len(f) == 2 && f[0] == "lineage" && h.lineage == "":
			h.lineage = f[1]
		case len(f) == 3 && f[0] == "w" && h.lineage != "":
			gen, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return history{}, data
			}
			h.entries = append(h.entries, historyEntry{gen: gen, writer: f[2]})
		default:
			return history{}, data
		}
		s = rest
	}
	return h, data[len(data)-len(s):]
}

// next returns the history of a push by writer on top of h, and the
// generation it stores.
func (h history) next(writer string) (history, int64) {
	if h.lineage == "" {
		h = history{lineage: newID()}
	}
	var gen int64
	if n := len(h.entries); n > 0 {
		gen = h.entries[n-1].gen
	}
	gen++
	keep := h.entries
	if len(keep) >= historyLen {
		keep = keep[len(keep)-historyLen+1:]
	}
	entries := make([]historyEntry, 0, len(keep)+1)
	entries = append(append(entries, keep...), historyEntry{gen: gen, writer: writer})
	return history{lineage: h.lineage, entries: entries}, gen
}

// append appends h's lines to buf.
func (h history) append(buf []byte) []byte {
	buf = append(buf, "# lineage "...)
	buf = append(buf, h.lineage...)
	buf = append(buf, '\n')
	for _, e := range h.entries {
		buf = append(buf, "# w "...)
		buf = strconv.AppendInt(buf, e.gen, 10)
		buf = append(buf, ' ')
		buf = append(buf, e.writer...)
		buf = append(buf, '\n')
	}
	return buf
}

// tells reports whether h can tell about p, being of p's lineage and
// keeping generations as old as p's, and if so whether p's writer is among
// them: when it is not, p was overwritten.
func (h history) tells(p *sentPush) (covers, present bool) {
	if h.lineage != p.lineage || len(h.entries) == 0 || h.entries[0].gen > p.gen {
		return false, false
	}
	for _, e := range h.entries {
		if e.writer == p.writer {
			return true, true
		}
	}
	return true, false
}
