package mcplimit

import (
	"strconv"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// Lines other than the four or five fields appendCountLine writes, of a
// period other than a day or a month, or with a field that is no
// integer, are skipped; the others are read as written.
func TestParseCountsSkipsMalformedLines(t *testing.T) {
	start := strconv.FormatInt(quota.Day.Start(time.Now()).Unix(), 10)
	data := "ok 1 " + start + " 3\n" +
		"kept 1 " + start + " 3 2\n" +
		"six 1 " + start + " 3 2 9\n" +
		"three 1 " + start + "\n" +
		"period0 0 " + start + " 3\n" +
		"period3 3 " + start + " 3\n" +
		"badperiod x " + start + " 3\n" +
		"badstart 1 x 3\n" +
		"badn 1 " + start + " x\n" +
		"badkept 1 " + start + " 3 x\n"
	cs := parseCounts([]byte(data))
	if len(cs) != 2 || cs[0].Key != "ok" || cs[0].N != 3 || cs[0].Kept != 0 || cs[1].Key != "kept" || cs[1].N != 3 || cs[1].Kept != 2 {
		t.Fatalf("parseCounts read %+v, want only ok 3 and kept 3 (2 kept)", cs)
	}
	if cs[0].Period != quota.Day || !cs[0].Start.Equal(quota.Day.Start(time.Now())) {
		t.Fatalf("parseCounts read %+v, want a day starting %v", cs[0], quota.Day.Start(time.Now()))
	}
	// What appendCountLine writes reads back, its kept part included.
	c := quota.Count{Key: "i/x", Period: quota.Month, Start: quota.Month.Start(time.Now()), N: 7, Kept: 4}
	if back := parseCounts(appendCountLine(nil, c)); len(back) != 1 || back[0].Key != c.Key || back[0].Period != c.Period || !back[0].Start.Equal(c.Start) || back[0].N != c.N || back[0].Kept != c.Kept {
		t.Fatalf("a written count reads back as %+v, want %+v", back, c)
	}
}

// A tool's quota count reads back from the host whatever the tool's name
// holds besides the space and newline appendKeyTool escapes: a tab, a
// carriage return or a Unicode space is part of the key, not a separator,
// or the count would be lost from the host copies at a restart.
func TestCountLinesKeepToolNamesWithOtherWhitespace(t *testing.T) {
	start := quota.Day.Start(time.Now())
	var data []byte
	var want []string
	for _, tool := range []string{"a\tb", "a\rb", "a\vb", "a\fb", "a\u00a0b", "a\u2003b", "a\u0085b", "a b"} {
		key := string(appendKeyTool([]byte("t/"), []byte(tool))) + "/00ff"
		want = append(want, key)
		data = appendCountLine(data, quota.Count{Key: key, Period: quota.Day, Start: start, N: 3})
	}
	cs := parseCounts(data)
	if len(cs) != len(want) {
		t.Fatalf("read %d counts back, want %d: %+v", len(cs), len(want), cs)
	}
	for i, c := range cs {
		if c.Key != want[i] || c.N != 3 || toolOfKey([]byte(c.Key)) == "" {
			t.Errorf("count %d read back as %+v, want key %q with 3", i, c, want[i])
		}
	}
}
