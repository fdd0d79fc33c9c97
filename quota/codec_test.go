package quota

import (
	"maps"
	"slices"
	"testing"
)

func TestParseCounts(t *testing.T) {
	tests := []struct {
		rule          string
		in            string
		want          map[string]int64
		wantMalformed int
	}{
		{"empty object", "", map[string]int64{}, 0},
		{"plain lines", "a 1\nb 22\n", map[string]int64{"a": 1, "b": 22}, 0},
		{"no trailing newline", "a 1\nb 2", map[string]int64{"a": 1, "b": 2}, 0},
		{"negative counts", "a -3\n", map[string]int64{"a": -3}, 0},
		{"duplicates are summed", "a 1\na 2\n", map[string]int64{"a": 3}, 0},
		{"blank lines are ignored", "\n\na 1\n\n", map[string]int64{"a": 1}, 0},
		{"malformed lines are skipped", "a 1\nnospace\n 5\nb x\nc 1 2\nd 99999999999999999999\ne 5\n",
			map[string]int64{"a": 1, "e": 5}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			got, malformed := parseCounts([]byte(tt.in), 0)
			if !maps.Equal(got, tt.want) || malformed != tt.wantMalformed {
				t.Errorf("parseCounts = %v, %d; want %v, %d", got, malformed, tt.want, tt.wantMalformed)
			}
		})
	}
}

func TestAppendLineRoundTrip(t *testing.T) {
	in := map[string]int64{"i/0123456789abcdef0123456789abcdef": 5000, "t/tool/x": -2, "g/y": 1}
	var buf []byte
	for k, v := range in {
		buf = appendLine(buf, k, v)
	}
	got, malformed := parseCounts(buf, 0)
	if !maps.Equal(got, in) || malformed != 0 {
		t.Errorf("round trip = %v, %d", got, malformed)
	}
}

func TestLatestByKeyKeepsMaxSorted(t *testing.T) {
	got := latestByKey(parseKnown([]byte("b 1\na 5\nbad\na 3\nc x\n")))
	want := []KnownEntry{{"a", 5000}, {"b", 1000}}
	if !slices.Equal(got, want) {
		t.Errorf("latestByKey = %v, want %v", got, want)
	}
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		rule string
		key  string
		want bool
	}{
		{"hex identity", "i/0123456789abcdef0123456789abcdef", true},
		{"tool key", "t/search/abc", true},
		{"empty", "", false},
		{"space", "a b", false},
		{"newline", "a\nb", false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := validKey([]byte(tt.key)); got != tt.want {
				t.Errorf("validKey(%q) = %v", tt.key, got)
			}
			if got := validKeyString(tt.key); got != tt.want {
				t.Errorf("validKeyString(%q) = %v", tt.key, got)
			}
		})
	}
}

// deltasOf returns m as deltas.
func deltasOf(m map[string]int64) deltas {
	d := deltas{}
	for k, v := range m {
		d[k] = &v
	}
	return d
}

func TestMergeCounts(t *testing.T) {
	tests := []struct {
		rule          string
		stored        string
		deltas        map[string]int64
		want          map[string]int64 // stored after the merge
		wantMalformed int
	}{
		{"empty object takes the deltas", "", map[string]int64{"a": 1, "b": 2}, map[string]int64{"a": 1, "b": 2}, 0},
		{"deltas add to stored totals", "a 5\nb 1\n", map[string]int64{"a": 2}, map[string]int64{"a": 7, "b": 1}, 0},
		{"new and existing keys", "a 5\n", map[string]int64{"a": 1, "c": 3}, map[string]int64{"a": 6, "c": 3}, 0},
		{"negative delta", "a 5\n", map[string]int64{"a": -2}, map[string]int64{"a": 3}, 0},
		{"a zero total is not written", "a 5\nb 1\n", map[string]int64{"a": -5}, map[string]int64{"b": 1}, 0},
		{"a zero delta for a new key is not written", "", map[string]int64{"a": 0}, map[string]int64{}, 0},
		{"duplicate stored keys are summed once", "a 1\nb 1\na 2\n", map[string]int64{"a": 10, "n": 1}, map[string]int64{"a": 13, "b": 1, "n": 1}, 0},
		{"malformed lines are dropped", "a 1\njunk\nb\n", map[string]int64{"b": 1}, map[string]int64{"a": 1, "b": 1}, 2},
		{"no deltas rewrites the object", "a 1\n", nil, map[string]int64{"a": 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			totals, out, malformed := mergeCounts(nil, []byte(tt.stored), deltasOf(tt.deltas))
			written, bad := parseCounts(out, 0)
			if !maps.Equal(written, tt.want) || bad != 0 {
				t.Errorf("written = %v (%d bad), want %v", written, bad, tt.want)
			}
			for k, v := range totals {
				if v != tt.want[k] {
					t.Errorf("totals[%s] = %d, want %d", k, v, tt.want[k])
				}
			}
			for k, v := range tt.want {
				if totals[k] != v {
					t.Errorf("totals[%s] = %d, want %d", k, totals[k], v)
				}
			}
			if malformed != tt.wantMalformed {
				t.Errorf("malformed = %d, want %d", malformed, tt.wantMalformed)
			}
		})
	}
}
