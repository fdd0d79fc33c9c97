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
// when that request leaves, not before; one cleaned up idle lets go at
// once; each lets go once.
func TestHandlerLetsGoOfItsZoneOnceItsRequestsHaveLeft(t *testing.T) {
	var let atomic.Int32
	gone := make(chan struct{}, 2)
	letGo := func() { let.Add(1); gone <- struct{}{} }
	u := &handlerUse{letGo: letGo}
	u.enter()
	u.enter()
	u.cleanup()
	u.leave(true)
	select {
	case <-gone:
		t.Fatal("let go with a request running")
	case <-time.After(50 * time.Millisecond):
	}
	u.leave(true)
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("did not let go once the last request left")
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
	ok := func() float64 {
		var m dto.Metric
		if err := h.zone.metrics.flushes.WithLabelValues("ok").Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
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
