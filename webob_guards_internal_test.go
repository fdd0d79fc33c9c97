package mcplimit

import (
	"fmt"
	"slices"
	"testing"
)

// A header that ends inside a value (an empty value, a lone backslash,
// a date cut short before GMT) is read to its end, not past it.
func TestWebobPairsStopAtTheHeadersEnd(t *testing.T) {
	for line, want := range map[string][]string{
		"x=":                                {"x@1"},
		"token=c1; x=":                      {"token@5", "x@11"},
		`x=a\`:                              {"x@1"},
		"exp=Wed, 21-Oct-2015 07:28:00 GM":  {"exp@3"},
		"exp=Wed, 21-Oct-2015 07:28:00 G":   {"exp@3"},
		"exp=Wed, 21-Oct-2015 07:28:00 GMT": {"exp@3"},
	} {
		var got []string
		webobPairs(line, func(name string, end int) { got = append(got, fmt.Sprintf("%s@%d", name, end)) })
		if !slices.Equal(got, want) {
			t.Errorf("webobPairs(%q) = %q, want %q", line, got, want)
		}
	}
}
