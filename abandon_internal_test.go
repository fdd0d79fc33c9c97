package mcplimit

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A call whose client left stays in flight while the backend still runs
// it, but no longer than abandonedCallHold: a backend that never answers
// must not keep a slot for ever.
func TestAbandonedCallKeepsItsSlotForABoundedTime(t *testing.T) {
	defer func(d time.Duration) { abandonedCallHold = d }(abandonedCallHold)
	abandonedCallHold = 300 * time.Millisecond
	h := provisionForTest(t, &Handler{
		Zone: "abandon", Concurrency: &Concurrency{Max: 1, PerIdentity: 1},
		Quota: &QuotaLimit{Off: true}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	hung, backendCtx := hungBackend()
	clientCtx, leave := context.WithCancel(context.Background())
	req := slowCall(clientCtx, "valid-abandon")
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = h.ServeHTTP(httptest.NewRecorder(), req, hung)
	}()
	ctx := <-backendCtx
	leave()
	time.Sleep(100 * time.Millisecond)
	if ctx.Err() != nil || h.zone.metrics.inflightN.Load() != 1 {
		t.Fatalf("the client's leaving ended the call at once (backend context %v, in flight %d); the backend may still run it",
			ctx.Err(), h.zone.metrics.inflightN.Load())
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("an abandoned call that the backend never answers kept its slot past the bound")
	}
	if n := h.zone.metrics.inflightN.Load(); n != 0 {
		t.Fatalf("%d calls in flight after the abandoned call ended", n)
	}
}

// An unproven key's call that has no verdict when the hold runs out, its
// client gone, is charged all the same (the backend may run it still): it
// is counted in the key's quota, and the key is charged as a forgotten one
// from then on. A call that ends without a verdict before that (the
// backend failed) is not.
func TestAnUnheardCallOfAnUnprovenKeyIsChargedWhenTheHoldRunsOut(t *testing.T) {
	defer func(d time.Duration) { abandonedCallHold = d }(abandonedCallHold)
	abandonedCallHold = 300 * time.Millisecond
	h := provisionForTest(t, &Handler{
		Zone: "unheard", Quota: &QuotaLimit{Day: 5}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	charged := func(token string) (forgotten bool, used int64) {
		fp := h.zone.fpKey.Load().sum("Bearer " + token)
		return h.zone.forgotten.Contains(fp, time.Now()), h.zone.quota.Used([]byte("i/"+fingerprintHex(fp)), quota.Day, time.Now())
	}

	hung, backendCtx := hungBackend()
	clientCtx, leave := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = h.ServeHTTP(httptest.NewRecorder(), slowCall(clientCtx, "valid-unheard"), hung)
	}()
	<-backendCtx
	leave()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the hold never ran out")
	}
	if forgotten, used := charged("valid-unheard"); !forgotten || used != 1 {
		t.Fatalf("a call unheard when the hold ran out: charged as forgotten %v, counted %d; want true, 1", forgotten, used)
	}

	failed := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return caddyhttp.Error(http.StatusBadGateway, errors.New("connection refused"))
	})
	_ = h.ServeHTTP(httptest.NewRecorder(), slowCall(context.Background(), "valid-failed"), failed)
	if forgotten, used := charged("valid-failed"); forgotten || used != 0 {
		t.Fatalf("a call the backend failed: charged as forgotten %v, counted %d; want neither", forgotten, used)
	}
}

// hungBackend is a next handler that never answers, as reverse_proxy
// waits for a backend that never does, until its request's context ends,
// and then writes a 499 (client closed request), as reverse_proxy does;
// it sends that context on the channel as the request comes.
func hungBackend() (caddyhttp.Handler, <-chan context.Context) {
	backendCtx := make(chan context.Context, 1)
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		backendCtx <- r.Context()
		<-r.Context().Done()
		w.WriteHeader(499)
		return nil
	}), backendCtx
}

// failingWriter fails every write once its client has left, as a
// connection to a client that hung up does.
type failingWriter struct {
	*httptest.ResponseRecorder
	client context.Context
}

func (f failingWriter) Write(b []byte) (int, error) {
	if f.client.Err() != nil {
		return 0, context.Canceled
	}
	return f.ResponseRecorder.Write(b)
}

// Messages the backend sends after the client left (progress, say) are
// dropped, not failed: reverse_proxy gives a call up on a failed write,
// which would free its slot while the backend still runs it.
func TestAbandonedCallKeepsItsSlotWhileTheBackendStillWrites(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "abandon-writes", Concurrency: &Concurrency{Max: 1, PerIdentity: 1},
		Quota: &QuotaLimit{Off: true}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	clientCtx, leave := context.WithCancel(context.Background())
	left := make(chan struct{})
	var writeErr error
	streaming := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		<-left
		for range 5 { // progress, as a running tool sends it
			if _, err := w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n")); err != nil {
				writeErr = err
				return err // as reverse_proxy gives up
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	req := slowCall(clientCtx, "valid-abandon-writes")
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = h.ServeHTTP(failingWriter{httptest.NewRecorder(), clientCtx}, req, streaming)
	}()
	leave()
	close(left)
	time.Sleep(40 * time.Millisecond)
	if n := h.zone.metrics.inflightN.Load(); n != 1 {
		t.Fatalf("%d calls in flight while the backend still writes for a call whose client left, want 1", n)
	}
	<-served
	if writeErr != nil {
		t.Fatalf("a write for a client that left failed (%v): reverse_proxy would give the call up", writeErr)
	}
	if n := h.zone.metrics.inflightN.Load(); n != 0 {
		t.Fatalf("%d calls in flight after the backend finished", n)
	}
}

// slowCall is a prepared tools/call of the slow tool by token's bearer,
// whose client context is ctx.
func slowCall(ctx context.Context, token string) *http.Request {
	return preparedPost(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`, token)
}

// preparedPost is a prepared POST of body by token's bearer, whose client
// context is ctx.
func preparedPost(ctx context.Context, body, token string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://test/mcp", bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	return caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
}

// heldForAnHour provisions a handler on zone with one zone-wide slot,
// whose abandoned calls keep it for an hour (for the test's length): a
// request that ends sooner ended with its client.
func heldForAnHour(t *testing.T, zone string) *Handler {
	t.Helper()
	hold := abandonedCallHold
	t.Cleanup(func() { abandonedCallHold = hold })
	abandonedCallHold = time.Hour
	return provisionForTest(t, &Handler{
		Zone: zone, Concurrency: &Concurrency{Max: 1},
		Quota: &QuotaLimit{Off: true}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
}

// Once a request's slots are freed (a GET's as its answer starts), its
// client's leaving ends it at once: nothing is held any more, so a
// listen stream is not kept open at the backend after its client left.
func TestFreedRequestEndsWithItsClient(t *testing.T) {
	h := heldForAnHour(t, "abandon-freed")
	backendCtx := make(chan context.Context, 1)
	stream := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		backendCtx <- r.Context()
		<-r.Context().Done() // a listen stream, open until its request ends
		return r.Context().Err()
	})
	clientCtx, leave := context.WithCancel(context.Background())
	req := slowCall(clientCtx, "valid-freed")
	req.Method = http.MethodGet // charged for its body, answered by a listen stream
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = h.ServeHTTP(httptest.NewRecorder(), req, stream)
	}()
	ctx := <-backendCtx
	if n := h.zone.metrics.inflightN.Load(); n != 0 {
		t.Fatalf("%d calls in flight once the GET's answer started, want none", n)
	}
	leave()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatalf("the request went on without its client (backend context %v): its slots were already freed", ctx.Err())
	}
}

// A call whose client left while it ran ends as soon as its answer frees
// its slots: the backend answered, so nothing is held for it any more.
func TestAbandonedCallEndsOnceAnswered(t *testing.T) {
	h := heldForAnHour(t, "abandon-answered")
	clientCtx, leave := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	answering := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		leave() // the client hangs up while the call runs
		time.Sleep(50 * time.Millisecond)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"))
		select { // the backend holds its stream open after the answer
		case <-r.Context().Done():
			ended <- nil
		case <-time.After(10 * time.Second):
			ended <- context.DeadlineExceeded
		}
		return nil
	})
	req := slowCall(clientCtx, "valid-answered")
	req.Header.Set("Accept", "application/json, text/event-stream")
	_ = h.ServeHTTP(httptest.NewRecorder(), req, answering)
	if err := <-ended; err != nil {
		t.Fatal("an answered call whose client had left went on at the backend")
	}
}

// An unproven key's free request (tools/list) is not held for the
// backend's verdict: nothing is charged by it, so its client's leaving
// ends it at once, as it would without the limiter, and it is never
// charged as an unheard call.
func TestFreeRequestOfAnUnprovenKeyEndsWithItsClient(t *testing.T) {
	hold := abandonedCallHold
	t.Cleanup(func() { abandonedCallHold = hold })
	abandonedCallHold = time.Hour
	h := provisionForTest(t, &Handler{
		Zone: "abandon-free", Quota: &QuotaLimit{Day: 5}, Preauth: &RateLimit{Rate: "100/s", Burst: 100},
	})
	hung, backendCtx := hungBackend()
	clientCtx, leave := context.WithCancel(context.Background())
	req := preparedPost(clientCtx, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "valid-free-list")
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = h.ServeHTTP(httptest.NewRecorder(), req, hung)
	}()
	<-backendCtx
	leave()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("a free request of an unproven key went on at the backend after its client left")
	}
	fp := h.zone.fpKey.Load().sum("Bearer valid-free-list")
	if h.zone.forgotten.Contains(fp, time.Now()) || h.zone.quota.Used([]byte("i/"+fingerprintHex(fp)), quota.Day, time.Now()) != 0 {
		t.Fatal("a free request whose client left was charged")
	}
}
