package jsonrpc

import (
	"strings"
	"testing"
)

// Parse starts the arena afresh: a Request reused with Parse keeps no
// decoded strings of earlier bodies.
func TestParseReusesTheArena(t *testing.T) {
	r := new(Request)
	body := []byte(`{"method":"tools/call","params":{"name":"b\u0069g"}}`)
	r.Parse(body)
	n := len(r.arena)
	for range 3 {
		r.Parse(body)
	}
	if len(r.arena) != n {
		t.Errorf("arena holds %d bytes after four parses, %d after one", len(r.arena), n)
	}
}

// Trim drops what a large invalid body grew in the copies the further
// readings scan and in the other parsers' readings.
func TestTrimDropsWhatFurtherReadingsGrew(t *testing.T) {
	body := "[\n" + strings.Repeat("{method: tools/call\n}\n", 3200) + "]\n// c"
	r := new(Request)
	r.Parse([]byte(body))
	if r.alt[0] == nil || cap(r.alt[0].entries) <= keepEntries || cap(r.copies[0]) <= keepBytes {
		t.Fatal("the body grew no buffer of a further reading beyond what is kept")
	}
	r.Trim()
	for i, c := range r.copies {
		if cap(c) > keepBytes {
			t.Errorf("Trim kept copy %d of %d bytes", i, cap(c))
		}
	}
	for i, h := range r.alt {
		if h != nil && (cap(h.entries) > keepEntries || cap(h.methods) > keepEntries) {
			t.Errorf("Trim kept the grown buffers of reading %d", i)
		}
	}
}
