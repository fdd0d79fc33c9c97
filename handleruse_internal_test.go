package mcplimit

import (
	"sync/atomic"
	"testing"
	"time"
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
	u.leave()
	select {
	case <-gone:
		t.Fatal("let go with a request running")
	case <-time.After(50 * time.Millisecond):
	}
	u.leave()
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
		_ = releaseZone(z, h.pol)
	}
}
