package jsonrpc

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// A number of more than 800 digits reads as JavaScript's JSON.parse and
// Python's json read it, where strconv.ParseFloat alone misreads it.
func TestLongNumberReadsAsJavaScriptReadsIt(t *testing.T) {
	zeros := func(n int) string { return strings.Repeat("0", n) }
	for _, c := range []struct {
		raw  string
		want float64
	}{
		{"1000000" + zeros(800) + "e-800", 1e6},
		{"1" + zeros(900) + "e-894", 1e6},
		{"2049" + zeros(797) + "e-797", 2049},
		{"-1500" + zeros(5000) + "e-5000", -1500},
		{"1500" + zeros(5000) + "E-5000", 1500},
		{"1500" + zeros(5000) + "E-" + zeros(30) + "5000", 1500},
		{"15" + zeros(900) + "e+" + zeros(30) + "0", math.Inf(1)},
		{"0." + zeros(900) + "1e901", 1},
		{"15" + zeros(801) + ".5e-802", 1.5},
		{strings.Repeat("9", 1000) + "e-1000", 1},
		{"1" + zeros(900), math.Inf(1)},
		{"-1" + zeros(900), math.Inf(-1)},
		{"1" + zeros(900) + "e+99999999999999999999", math.Inf(1)},
		{"1" + zeros(900) + "e-99999999999999999999", 0},
		{"0." + zeros(1000), 0},
		{"0" + "." + zeros(400) + "25" + zeros(600) + "e402", 25},
		// Rounded as the whole number is: a digit past the 800th that
		// is not zero rounds up an exact halfway point.
		{"9007199254740993" + zeros(790) + "1e-791", 9007199254740994},
		{"9007199254740993" + zeros(790) + "e-790", 9007199254740992},
	} {
		if got := numberValue([]byte(c.raw)); got != c.want {
			t.Errorf("%.40s… (%d bytes): %v, want %v", c.raw, len(c.raw), got, c.want)
		}
	}
}

// A number of at most 800 bytes is read by strconv.ParseFloat, and the
// longer path gives the same value as the number written short.
func TestNumberValueMatchesShortForms(t *testing.T) {
	for _, s := range []string{"0", "-0", "51", "50.5", "1e2", "-3.25E-4", "123456789012345678901234567890", "1.7976931348623157e308", "5e-324"} {
		want, _ := strconv.ParseFloat(s, 64)
		if got := numberValue([]byte(s)); got != want {
			t.Errorf("%s: %v, want %v", s, got, want)
		}
		mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
		e, _ := strconv.Atoi(cmpOr(exp, "0"))
		padded := mant + strings.Repeat("0", 900) + "e" + strconv.Itoa(e-900)
		if !strings.Contains(mant, ".") {
			if got := numberValue([]byte(padded)); got != want {
				t.Errorf("%s padded to %d bytes: %v, want %v", s, len(padded), got, want)
			}
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// An integer literal is read as the integer readers see it: one above
// the double nearest it reads above that double.
func TestIntegerCeilingReadsIntegersExactly(t *testing.T) {
	const two53 = 9007199254740992.0
	for _, c := range []struct {
		raw  string
		want float64
	}{
		{"9007199254740992", two53},
		{"9007199254740993", math.Nextafter(two53, math.Inf(1))},
		{"9007199254740994", 9007199254740994},
		{"100000000000000008191", math.Nextafter(1e20, math.Inf(1))},
		{"100000000000000000000", 1e20},
		{"-9007199254740993", -two53},
		{"9007199254740993.0", two53},
		{"9007199254740993e0", two53},
		{"51", 51},
	} {
		if got := integerCeiling([]byte(c.raw), numberValue([]byte(c.raw))); got != c.want {
			t.Errorf("%s: %v, want %v", c.raw, got, c.want)
		}
	}
}
