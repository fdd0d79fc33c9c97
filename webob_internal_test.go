package mcplimit

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// webobPairs finds what WebOb's own pattern finds (Python's re over the
// header's bytes, Debian's python3-webob 1.8.6; the expected lists were
// printed by it), and each name's end.
func TestWebobPairsReadAsWebObDoes(t *testing.T) {
	for line, want := range map[string][]string{
		`token=JUNK; x=a"token=REAL`:                 {"token@5", "x@13", "token@21"},
		`x=a\;token=junk1; y=b"token=c1`:             {"x@1", "y@19", "token@27"},
		`x="; token=junk2; y="; z=a"token=c1`:        {"x@1", "z@24", "token@32"},
		"token=junk3; path=a\\\xc3\xa9token=c1":      {"token@5", "path@17", "token@27"},
		"exp=Wed, 21-Oct-2015 07:28:00 GMT; token=v": {"exp@3", "token@40"},
		`a="x\"y"; token=v`:                          {"a@1", "token@15"},
		`a="x\"y; token=v`:                           {"a@1", "token@14"},
		"tabs=home,token,settings":                   {"tabs@4"},
		"token =v":                                   {"token@5"},
		"==v":                                        {"=@1"},
		"x=1 token =c1":                              {"x@1", "token@9"},
		`a="token=v\"`:                               {"a@1"},
		"exp=Wed, 21-Oct-2015 07:28:00 GMTtoken=v":   {"exp@3", "token@38"},
		strings.Repeat("a", 5000):                    nil,
	} {
		var got []string
		webobPairs(line, func(name string, end int) { got = append(got, fmt.Sprintf("%s@%d", name, end)) })
		if !slices.Equal(got, want) {
			t.Errorf("webobPairs(%.40q) = %q, want %q", line, got, want)
		}
	}
}
