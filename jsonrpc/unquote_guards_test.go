package jsonrpc

import "testing"

// JSON5 continues a string across U+2029 as across U+2028.
func TestCostJSON5ParagraphSeparatorContinuation(t *testing.T) {
	runCostCases(t, []costCase{
		{"line_continuation_u2029", "{\"method\":\"tools/\\\u2029call\",\"params\":{\"name\":\"big\"}}", 5, false},
	})
}

// A maximal subpart is only the start of a well-formed sequence: after
// E0, F0, ED and F4 the second byte's range is narrower.
func TestSubpartLenNarrowSecondBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"\xe0\x80y", 1}, {"\xe0\xa0y", 2},
		{"\xf0\x80y", 1}, {"\xf0\x90y", 2}, {"\xf0\x90\x80y", 3},
		{"\xed\xa0y", 1}, {"\xed\x9fy", 2},
		{"\xf4\x90y", 1}, {"\xf4\x8fy", 2},
		{"\xc1\x80", 1}, {"\xf5\x80", 1},
	} {
		if got := subpartLen([]byte(c.in)); got != c.want {
			t.Errorf("subpartLen(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	// "\xf0\x80y" is two U+FFFD then y to every decoder: not the "\uFFFDy"
	// tableCost charges 6.
	r := parse(t, "{\"method\":\"tools/call\",\"params\":{\"name\":\"\xf0\x80y\"}}")
	if got := r.Cost(toolsCallMeter, tableCost); got != 1 {
		t.Errorf("Cost() = %d, want 1", got)
	}
}
