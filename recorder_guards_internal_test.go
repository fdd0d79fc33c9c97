package mcplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// A next handler that writes its answer without WriteHeader (an implicit
// 200, as net/http gives one) proves the credential it answered, as an
// explicit 200 does.
func TestImplicit200ProvesTheCredential(t *testing.T) {
	proven := provenByAnswer(t, "implicit-200", func(w http.ResponseWriter, r *http.Request) error {
		_, err := w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		return err
	})
	if !proven {
		t.Fatal("a credential answered by an implicit 200 is not proven")
	}
}

// provenByAnswer has a fresh zone's handler pass an unproven credential's
// tools/call to next, which must answer 200, and reports whether the
// credential is proven after it.
func provenByAnswer(t *testing.T, zone string, next caddyhttp.HandlerFunc) bool {
	t.Helper()
	h := provisionForTest(t, &Handler{
		Zone: zone, Quota: &QuotaLimit{Off: true}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, slowCall(context.Background(), "valid-"+zone), next); err != nil || w.Code != http.StatusOK {
		t.Fatalf("ServeHTTP: %d, %v", w.Code, err)
	}
	return h.zone.known.Contains(h.zone.fpKey.Load().sum("Bearer valid-"+zone), time.Now())
}

// The backend's status that reverse_proxy leaves behind a written 2xx is
// the verdict for an unproven identity only: an error status written over
// a backend's 2xx is no acceptance, and a proven identity's 2xx is not
// looked behind.
func TestVerdictLooksBehindOnlyAnUnprovenIdentitysTwoHundred(t *testing.T) {
	rec := func(proven bool, upstream int) *statusRecorder {
		r := preparedPost(context.Background(), `{}`, "valid-verdict")
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.reverse_proxy.status_code", upstream)
		return &statusRecorder{d: &decision{hasID: true, proven: proven}, r: r}
	}
	for _, c := range []struct {
		rule           string
		proven         bool
		upstream, code int
		want           int
	}{
		{"an unproven identity's rewritten 401", false, 401, 200, 401},
		{"an error written over the backend's 2xx", false, 200, 500, 500},
		{"a 403 written over the backend's 2xx", false, 200, 403, 403},
		{"a proven identity's rewritten 401", true, 401, 200, 200},
		{"an upstream status below 100", false, 0, 200, 200},
	} {
		if got := rec(c.proven, c.upstream).verdict(c.code); got != c.want {
			t.Errorf("%s: verdict(%d) = %d, want %d", c.rule, c.code, got, c.want)
		}
	}
	anon := preparedPost(context.Background(), `{}`, "")
	anon.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("http.reverse_proxy.status_code", 401)
	if got := (&statusRecorder{d: &decision{}, r: anon}).verdict(200); got != 200 {
		t.Errorf("a request without an identity: verdict(200) = %d, want 200", got)
	}
}

// The status that starts the answer is the verdict: a later WriteHeader,
// which net/http ignores (the client got the first), neither forgets
// nor proves anything.
func TestSuperfluousWriteHeaderIsNoVerdict(t *testing.T) {
	proven := provenByAnswer(t, "superfluous", func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusOK)
		w.WriteHeader(http.StatusUnauthorized)
		_, err := w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		return err
	})
	if !proven {
		t.Fatal("a credential answered 200 was forgotten by a superfluous 401 written after it")
	}
}
