package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{}`, `[]`, `0`, `-0`, `-0.5e+10`, `1E-2`, `123.456`, `true`, `false`, `null`, `""`,
		`"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, `{"a":{"b":[1,{"c":null}]},"d":[]}`,
		`[1,2,[3,[4,{}]],{"":""}]`, " [ 1 , 2 ] ", "\"\xff\"",
		// Invalid:
		``, ` `, `{`, `}`, `[`, `]`, `{]`, `[}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{1:2}`, `[1,]`, `[,1]`,
		`{"a":1,}`, `{,}`, `01`, `1.`, `.5`, `+1`, `-`, `1e`, `1e+`, `0x10`, `tru`, `nul`, `True`,
		`"abc`, `"\`, `"\u12"`, `"\u12g4"`, `"\a"`, "\"\x01\"", `[1] [2]`, `{} x`, `NaN`, `Infinity`,
		`-Infinity`, "\x00",
	} {
		want := json.Valid([]byte(body))
		if got := parse(t, body).Valid(); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", body, got, want)
		}
	}
}

func TestDepthIsScannedWithoutRecursionUpToMaxDepth(t *testing.T) {
	call := func(args string) string {
		return `{"method":"tools/call","params":{"name":"big","arguments":{"x":` + args + `}}}`
	}
	// The message, params and arguments objects take 3 levels.
	atBound := call(nest("[", "1", "]", MaxDepth-3))
	beyond := call(nest("[", "1", "]", MaxDepth-2))
	for _, c := range []struct {
		name  string
		body  string
		valid bool
		cost  int64
	}{
		{"arrays_at_MaxDepth", nest("[", "", "]", MaxDepth), true, 1},
		{"arrays_beyond_MaxDepth", nest("[", "", "]", MaxDepth+1), false, 1},
		{"objects_at_MaxDepth", nest(`{"a":`, "1", "}", MaxDepth), true, 0},
		{"objects_beyond_MaxDepth", nest(`{"a":`, "1", "}", MaxDepth+1), false, 1},
		{"deep_arguments_at_MaxDepth", atBound, true, 5},
		{"deep_arguments_beyond_MaxDepth_still_charged", beyond, false, 5},
		{"batch_of_25_deep_calls", "[" + strings.Repeat(call(nest("[", "1", "]", MaxDepth-4))+",", 24) + call("1") + "]", true, 125},
		{"batch_beyond_MaxDepth_charges_every_entry", "[" + beyond + "," + call("1") + "]", false, 10},
		{"a_million_levels", nest("[", "", "]", 1<<20), false, 1},
		{"unclosed_million_levels", strings.Repeat(`{"a":[`, 1<<18), false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := parse(t, c.body)
			if r.Valid() != c.valid {
				t.Errorf("Valid() = %v, want %v", r.Valid(), c.valid)
			}
			if c.valid != json.Valid([]byte(c.body)) {
				t.Errorf("encoding/json disagrees on validity")
			}
			if got := r.Cost(toolsCallMeter, tableCost); got != c.cost {
				t.Errorf("Cost() = %d, want %d", got, c.cost)
			}
		})
	}
}

func TestEqualFoldMatchesStringsEqualFold(t *testing.T) {
	words := []string{"", "a", "A", "method", "METHOD", "MeThOd", "k", "K", "\u212a", "s", "S", "\u017f",
		"param\u017f", "PARAMS", "\u212aey", "key", "\u00e9", "\u00c9", "\uFFFD", "\xff", "i", "\u0130", "\u0131",
		"\u03c3", "\u03c2", "\u03a3", "methodx", "metho"}
	for _, a := range words {
		for _, b := range words {
			if got, want := equalFold([]byte(a), b), strings.EqualFold(a, b); got != want {
				t.Errorf("equalFold(%q, %q) = %v, strings.EqualFold says %v", a, b, got, want)
			}
		}
	}
}

func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`plain`, `\"\\\/\b\f\n\r\t`, `\u0041\u00e9\u20AC`, `\ud83d\ude00`, `\ud83d`, `\ude00`,
		`\ud83d\u0041`, `\ud83dx`, `\ud83d\ud83d\ude00`, "a\xffb", "\xed\xa0\x80", "\xc0\xaf", "\u00e9",
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &want); err != nil {
			t.Fatalf("encoding/json rejects %q: %v", raw, err)
		}
		if got := string(appendUnquoted(nil, []byte(raw), 0)); got != want {
			t.Errorf("appendUnquoted(%q) = %q, encoding/json gives %q", raw, got, want)
		}
	}
}

// A \u without four hex digits, which cJSON and gjson read on past, reads
// as an escape JSON has not: the u itself.
func TestUnquoteReadsABadUEscapeAsU(t *testing.T) {
	for raw, want := range map[string]string{`a\u12`: "au12", `a\u`: "au", `\uZZZZ`: "uZZZZ", `\ud83d\u12`: "\ufffdu12"} {
		if got := string(appendUnquoted(nil, []byte(raw), 0)); got != want {
			t.Errorf("appendUnquoted(%q) = %q, want %q", raw, got, want)
		}
	}
}
