package mcplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The context a detached request ran under ends with the request: once
// ServeHTTP has returned, nothing is held for the call any more, even
// when its client is still connected (its connection kept alive).
func TestDetachedRequestContextEndsWithTheRequest(t *testing.T) {
	h := heldForAnHour(t, "detached-ends")
	var backend context.Context
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		backend = r.Context()
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err := h.ServeHTTP(httptest.NewRecorder(), slowCall(context.Background(), "valid-detached-ends"), next); err != nil {
		t.Fatal(err)
	}
	if backend == nil {
		t.Fatal("the call did not reach the backend")
	}
	select {
	case <-backend.Done():
	case <-time.After(time.Second):
		t.Fatal("the backend's context outlived the request")
	}
}

// A 2xx to an unproven key's request that costs nothing and is no
// JSON-RPC POST (a GET without a body: a listen stream, a health check)
// proves nothing and charges nothing: the key is not charged as a
// forgotten one from then on.
func TestFreeAnswerToAnUnprovenKeysGetChargesNothing(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "free-get", Quota: &QuotaLimit{Day: 5}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	ok := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusOK)
		return nil
	})
	req := preparedPost(context.Background(), "", "garbage-free-get")
	req.Method = http.MethodGet
	if err := h.ServeHTTP(httptest.NewRecorder(), req, ok); err != nil {
		t.Fatal(err)
	}
	fp := h.zone.fpKey.Load().sum("Bearer garbage-free-get")
	if h.zone.forgotten.Contains(fp, time.Now()) {
		t.Fatal("a 2xx to a bodiless GET of an unproven key had it charged as a forgotten identity")
	}
	if h.zone.known.Proven(fp, time.Now()) {
		t.Fatal("a 2xx to a bodiless GET proved the key")
	}
}
