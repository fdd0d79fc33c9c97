package mcplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	dto "github.com/prometheus/client_model/go"
)

// A handler cleaned up while one of its requests runs lets go of its zone
// when that request leaves, not before, and says when one of them ends
// before the last; one cleaned up idle lets go at once; each lets go once.
func TestHandlerLetsGoOfItsZoneOnceItsRequestsHaveLeft(t *testing.T) {
	var let, ended atomic.Int32
	gone := make(chan struct{}, 2)
	letGo := func() { let.Add(1); gone <- struct{}{} }
	u := &handlerUse{letGo: letGo, ended: func() { ended.Add(1) }}
	u.enter()
	u.enter()
	u.enter()
	u.leave(true)
	if n := ended.Load(); n != 0 {
		t.Fatalf("ended called %d times before the cleanup", n)
	}
	u.cleanup()
	u.leave(true)
	select {
	case <-gone:
		t.Fatal("let go with a request running")
	case <-time.After(50 * time.Millisecond):
	}
	if n := ended.Load(); n != 1 {
		t.Fatalf("ended called %d times for a request leaving the cleaned-up handler, want 1", n)
	}
	u.leave(true)
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("did not let go once the last request left")
	}
	if n := ended.Load(); n != 1 {
		t.Fatalf("ended called %d times, want none for the last request (the zone's going flushes)", n)
	}
	u.cleanup()
	idle := &handlerUse{letGo: letGo}
	idle.cleanup()
	if n := let.Load(); n != 2 {
		t.Fatalf("let go %d times, want once per handler", n)
	}
}

// A zone started while one of its name is ending waits for that end: the
// final flush writes what the new zone reads, and the parked buckets are
// there to take up.
func TestZoneStartWaitsForTheEndOfTheZoneOfItsName(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "ends-first"}) // its zone is not in the pool
	zoneEnds.Lock()
	started := make(chan *zone)
	go func() {
		z, err := acquireZone(h.zone.storage.get(), nil, h.pol, h.logger)
		if err != nil {
			t.Error(err)
		}
		started <- z
	}()
	select {
	case <-started:
		t.Fatal("a zone started while one of its name was ending")
	case <-time.After(200 * time.Millisecond):
	}
	zoneEnds.Unlock()
	z := <-started
	if z != nil {
		z.unhold(h.pol)
		_ = dropZone(z)
	}
}

// A listen stream (a GET) does not hold its handler's zone back once the
// handler is cleaned up: it stays open for as long as its client does and
// learns nothing at its end, and a stop whose zone could not end would
// not flush. A call (a POST) does.
func TestAListenStreamDoesNotHoldItsZoneBack(t *testing.T) {
	for _, c := range []struct {
		method string
		holds  bool
	}{{http.MethodGet, false}, {http.MethodPost, true}} {
		t.Run(c.method, func(t *testing.T) {
			h := provisionForTest(t, &Handler{Zone: "listen-" + c.method, Preauth: &RateLimit{Rate: "100/s", Burst: 100}})
			gone := make(chan struct{})
			h.use = &handlerUse{letGo: func() { close(gone) }}
			inside, release, served := make(chan struct{}), make(chan struct{}), make(chan struct{})
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
				close(inside)
				<-release
				return nil
			})
			req := slowCall(context.Background(), "listen")
			req.Method = c.method
			go func() {
				_ = h.ServeHTTP(httptest.NewRecorder(), req, next)
				close(served)
			}()
			<-inside
			h.use.cleanup()
			select {
			case <-gone:
				if c.holds {
					t.Fatal("let go of the zone with a call running")
				}
			case <-time.After(100 * time.Millisecond):
				if !c.holds {
					t.Fatal("a listen stream held the zone back")
				}
			}
			close(release)
			<-served
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("did not let go of the zone once the request ended")
			}
		})
	}
}

// A handler cleaned up while a call runs flushes its zone then: the zone
// ends only once the call has, and a stop whose grace period runs out
// first would exit before that end's flush, losing what the zone counted
// and proved since its last flush (the stop's own flush, before).
func TestCleanupWithACallRunningFlushesTheZone(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "cleanup-flush", FlushInterval: caddy.Duration(time.Hour)})
	h.use = &handlerUse{letGo: func() {}}
	ok := func() float64 { return flushesOK(t, h.zone) }
	before := ok()
	h.use.enter()
	if err := h.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if n := ok() - before; n != 1 {
		t.Fatalf("%v flushes at the cleanup with a call running, want 1", n)
	}
	h.use.leave(true)
}

// flushesOK reads z's count of flushes that worked.
func flushesOK(t *testing.T, z *zone) float64 {
	t.Helper()
	var m dto.Metric
	if err := z.metrics.flushes.WithLabelValues("ok").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A handler cleaned up with no call of its own running, while a call of
// one cleaned up before it (a reload's) still runs, flushes the zone too:
// that call holds the zone's end back, and a process that stops before it
// ends would exit before the zone's final flush, losing what the running
// config counted and proved since the last one.
func TestCleanupWhileAnEarlierHandlersCallRunsFlushesTheZone(t *testing.T) {
	old := provisionForTest(t, &Handler{Zone: "cleanup-flush-earlier", FlushInterval: caddy.Duration(time.Hour)})
	cur := &Handler{pol: old.pol, zone: old.zone, logger: old.logger}
	cur.use = &handlerUse{letGo: cur.letGo, ended: cur.zone.hintFlush}
	old.use.enter()
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	before := flushesOK(t, old.zone)
	if err := cur.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if n := flushesOK(t, old.zone) - before; n != 1 {
		t.Fatalf("%v flushes at the cleanup with an earlier handler's call running, want 1", n)
	}
	old.use.leave(true)
}

// A call of a handler cleaned up ending while others still run has the
// zone flush soon: what it taught must not wait for the zone's end, which
// the process may not reach, nor for the flush interval.
func TestACallEndingAfterItsHandlersCleanupHasTheZoneFlush(t *testing.T) {
	h := provisionForTest(t, &Handler{Zone: "cleanup-call-ends", FlushInterval: caddy.Duration(time.Hour)})
	h.use.enter()
	h.use.enter()
	if err := h.Cleanup(); err != nil {
		t.Fatal(err)
	}
	before := flushesOK(t, h.zone)
	h.use.leave(true)
	deadline := time.Now().Add(10 * time.Second)
	for flushesOK(t, h.zone) == before {
		if time.Now().After(deadline) {
			t.Fatal("no flush after a call of the cleaned-up handler ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.use.leave(true)
}
