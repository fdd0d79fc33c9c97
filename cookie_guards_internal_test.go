package mcplimit

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
)

// A Cookie header hiding a second token where only one backend's reading
// finds it (WebOb after a tab, after `x= `, after an escaped quote or a
// short date; Rack 2 after a ',') is refused as repeated, while a lone
// token beside a date too long to be one to WebOb is accepted. A missed
// second token lets a client spend a throwaway identity while the backend
// authenticates the real one; a false refusal locks out a real client.
func TestReadCookieCountsTokensEachBackendReads(t *testing.T) {
	for _, c := range []struct {
		cookie  string
		refused bool
	}{
		{"token=junk; x=a\"token\t=real", true},
		{`token=junk; x= b="token=real"`, true},
		{"token=junk; exp=Wed, 21-Oct-15 07:28:00 GMTtoken=real", true},
		{`token=junk; x="\"b="token=real"`, true},
		{`x=a\,token=real; token=junk`, true},
		{"token=c1; exp=Wed, 21-Oct-20150 07:28:00 GMTtoken=v", false},
	} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header.Set("Cookie", c.cookie)
		_, why := readCookie(r, "token")
		if (why != "") != c.refused {
			t.Errorf("readCookie(%q): unreadable %q, want refused %v", c.cookie, why, c.refused)
		}
	}
}

// splitPairs splits a cookie part at ',' as Rack 2 and SimpleCookie do,
// so `x=a\,token=real` holds a token cookie: a Rack backend reads it
// (the first of two), and the limiter must count it.
func TestSplitPairsSplitsAtCommas(t *testing.T) {
	var got []string
	splitPairs(`x=a\,token=c1; token=junk`, func(name string, end int) {
		got = append(got, fmt.Sprintf("%s@%d", name, end))
	})
	if want := []string{"x@1", "token@10", "token@20"}; !slices.Equal(got, want) {
		t.Errorf("splitPairs = %q, want %q", got, want)
	}
}

// A query whose second token hides behind ';' (`token=junk&x=1;token=real`)
// is refused: Rack 2 and older parse_qs split pairs at ';' and read the
// real token, while Go drops the pair and the limiter would see junk.
func TestReadQueryCountsTokensAfterSemicolons(t *testing.T) {
	for _, q := range []string{"token=junk&x=1;token=real", "x=1;token=real&token=junk"} {
		r := httptest.NewRequest("POST", "/mcp?"+q, nil)
		if _, why := readQuery(r, "token"); why == "" {
			t.Errorf("readQuery(?%s) accepted, want it refused as repeated", q)
		}
	}
}

// A lone cookie under the ASCII spelling of a non-ASCII identity cookie's
// name (`sid` for `ſid`, whose case fold is shorter in bytes) is refused:
// Caddy's placeholder does not read it, while backends that fold case
// authenticate it, so served it would have no identity (see
// TestEverySpellingABackendReadsCounts for the spellings counted).
func TestLoneCookieUnderTheASCIISpellingOfANonASCIINameIsRefused(t *testing.T) {
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Set("Cookie", "sid=b")
	if _, why := readCookie(r, "ſid"); why == "" {
		t.Errorf("readCookie(sid=b) for the cookie ſid accepted, want it refused")
	}
}
