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
		// After a tab or other ASCII whitespace, after spaces following
		// '=', after an escaped quote in a quoted value, after the shortest
		// date; a date one byte too long is none (a lone token beside it is
		// no second one).
		"x=a\"token\t=c1":                        {"x@1", "token@9"},
		"x=a\"token\v=c1":                        {"x@1", "token@9"},
		`x= b="token=c1"`:                        {"x@1", "token@11"},
		"x=\tb=\"token=c1\"":                     {"x@1", "token@11"},
		"exp=Wed, 21-Oct-15 07:28:00 GMTtoken=v": {"exp@3", "token@36"},
		`x="\"b="token=c1"`:                      {"x@1", "token@13"},
		"token=c1; exp=Wed, 21-Oct-20150 07:28:00 GMTtoken=v": {"token@5", "exp@13", "GMTtoken@49"},
		"exp=Wed, 21-Oct-2015 07:28:00 GMT; token=c1":         {"exp@3", "token@40"},
		"exp=Wed, 21-Oct-201 07:28:00 GMT; token=c1":          {"exp@3", "token@39"},
		"token=c1; exp=Wed, 21-Oct-1 07:28:00 GMTtoken=v":     {"token@5", "exp@13", "GMTtoken@45"},
	} {
		var got []string
		webobPairs(line, func(name string, end int) { got = append(got, fmt.Sprintf("%s@%d", name, end)) })
		if !slices.Equal(got, want) {
			t.Errorf("webobPairs(%.40q) = %q, want %q", line, got, want)
		}
	}
}
