package mcplimit_test

import (
	"net/http"
	"strings"
	"testing"
)

// A second token hidden where only some backend's parser finds it is
// refused with a 400 naming the input, before any tool call reaches the
// backend: in a cookie after a tab, after `x= `, after an escaped quote
// or a short expiry date (WebOb), or after a ',' (Rack 2); in the query
// after a ';' (Rack 2, older parse_qs). Otherwise the limiter charges the
// junk token while the backend authenticates the real one, so every
// throwaway value gets a fresh budget. A lone real token beside a date
// too long for WebOb to read as one is still served: a false refusal
// would lock a real client out.
func TestTokensHiddenFromOneParserAreRefused(t *testing.T) {
	e := start(t, "identity {http.request.uri.query.token} {http.request.cookie.token}\n"+
		"tenant 10/s burst 100\nquota off\npreauth 100/s burst 1000")
	if r := e.queryCookieCall("token=valid-q", "token=c1; exp=Wed, 21-Oct-20150 07:28:00 GMTtoken=v"); r.Status != http.StatusOK {
		t.Fatalf("lone token beside a 12-character date: %d %s, want 200", r.Status, r.Body)
	}
	before := e.backend.ToolCalls()
	for _, c := range []struct{ query, cookie, named string }{
		{"token=valid-q", "token=junk; x=a\"token\t=real", "token cookie"},
		{"token=valid-q", `token=junk; x= b="token=real"`, "token cookie"},
		{"token=valid-q", "token=junk; exp=Wed, 21-Oct-15 07:28:00 GMTtoken=real", "token cookie"},
		{"token=valid-q", `token=junk; x="\"b="token=real"`, "token cookie"},
		{"token=valid-q", `x=a\,token=real; token=junk`, "token cookie"},
		{"token=valid-q&x=1;token=x28", "token=c1", "token query parameter"},
	} {
		r := e.queryCookieCall(c.query, c.cookie)
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || !strings.Contains(got.Error.Message, c.named) {
			t.Fatalf("?%s Cookie %q: %d %s, want 400 naming the %s", c.query, c.cookie, r.Status, r.Body, c.named)
		}
	}
	unchanged(t, e, before, "tokens hidden from one parser")
}
