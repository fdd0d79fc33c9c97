package buckets

import (
	"encoding/binary"
	"testing"
	"time"
)

// t0 is an arbitrary start; every test computes its times from it.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// fp makes a distinct fingerprint for each i.
func fp(i int) [16]byte {
	var k [16]byte
	binary.LittleEndian.PutUint64(k[:], uint64(i))
	binary.LittleEndian.PutUint64(k[8:], ^uint64(i))
	return k
}

// op is what a step does.
type op int

const (
	reserve op = iota // Reserve(key, lim, n) and check the outcome
	cancel            // Cancel the reservation made by step of
	peek              // Tokens(key) and check tokens
)

// anyWait accepts any positive wait in a refusal.
const anyWait = time.Duration(-1)

// step is one call at t0+at. A refusal's wait is checked exactly unless
// wait is anyWait.
type step struct {
	at     time.Duration
	op     op
	key    int
	lim    Limit
	n      int
	ok     bool
	full   bool
	wait   time.Duration
	tokens float64
	absent bool // for peek: the key has no bucket
	of     int  // for cancel: the step whose reservation to cancel
}

// run plays steps against s.
func run(t *testing.T, s *Set[[16]byte], steps []step) {
	t.Helper()
	made := make([]Reservation, len(steps))
	for i, st := range steps {
		now := t0.Add(st.at)
		switch st.op {
		case reserve:
			res, wait, ok, full := s.Reserve(fp(st.key), st.lim, st.n, now)
			if ok != st.ok || full != st.full {
				t.Fatalf("step %d: Reserve(key %d, %+v, n=%d) at %v: ok=%v full=%v, want ok=%v full=%v",
					i, st.key, st.lim, st.n, st.at, ok, full, st.ok, st.full)
			}
			switch {
			case ok && wait != 0:
				t.Fatalf("step %d: admitted with wait %v, want 0", i, wait)
			case !ok && wait <= 0:
				t.Fatalf("step %d: refused with wait %v, want > 0", i, wait)
			case !ok && st.wait != anyWait && wait != st.wait:
				t.Fatalf("step %d: refused with wait %v, want %v", i, wait, st.wait)
			}
			made[i] = res
		case cancel:
			made[st.of].Cancel(now)
		case peek:
			tokens, ok := s.Tokens(fp(st.key), now)
			if ok == st.absent || tokens != st.tokens {
				t.Fatalf("step %d: Tokens(key %d) at %v = %v, %v; want %v, %v",
					i, st.key, st.at, tokens, ok, st.tokens, !st.absent)
			}
		}
	}
}
