package mcplimit_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// admitted sends n calls at once-ish and counts those admitted.
func (e *env) admitted(n int, hdr ...string) int {
	e.t.Helper()
	ok := 0
	for i := range n {
		if r := e.call(100+i, hdr...); r.Status == http.StatusOK {
			ok++
		}
	}
	return ok
}

// drain spends a bucket of burst 10 with ten calls.
func (e *env) drain(hdr ...string) {
	e.t.Helper()
	for i := range 10 {
		if r := e.call(i, hdr...); r.Status != http.StatusOK {
			e.t.Fatalf("draining call %d: %d %s", i, r.Status, r.Body)
		}
	}
}

// Every reload that changes which limit a key gets banks the refill its
// bucket earned at its old limit: 3s idle at 0.1/s is a fraction of a
// token, whatever the reload moves the key to (2/s here) and however the
// change is made. Crediting the new rate for the time before the reload
// would admit six calls at once.
func TestReloadsBankTheOldLimitBeforeTheChange(t *testing.T) {
	const slow, fast = "6/m burst 10", "2/s burst 10"
	const base = "preauth 100/s burst 100\nquota off\nglobal off\n"
	auth := []string{"Authorization", "Bearer valid-moved"}
	check := func(t *testing.T, e *env, moveTo string, hdr []string) {
		t.Helper()
		time.Sleep(3 * time.Second)
		e.reloadWith(t, moveTo)
		settleAfterReload(t, e, auth[1])
		if n := e.admitted(6, hdr...); n > 3 {
			t.Fatalf("%d of 6 calls admitted right after the change, want at most 3: the new rate was credited for the time before it", n)
		}
	}
	t.Run("revert", func(t *testing.T) {
		e := start(t, "zone revert\n"+base+"tenant "+fast)
		e.reloadWith(t, "zone revert\n"+base+"tenant "+slow)
		e.prove("valid-moved")
		e.drain(auth...)
		check(t, e, "zone revert\n"+base+"tenant "+fast, auth)
	})
	t.Run("override removed", func(t *testing.T) {
		e := start(t, "zone unoverride\n"+base+"tenant "+fast)
		fp := fingerprintOf(t, e.caddy.Storage, "unoverride", auth[1])
		e.reloadWith(t, "zone unoverride\n"+base+"tenant "+fast+"\noverride "+fp+" {\ntenant "+slow+"\n}")
		e.prove("valid-moved")
		e.drain(auth...)
		check(t, e, "zone unoverride\n"+base+"tenant "+fast, auth)
	})
	t.Run("tier match changed", func(t *testing.T) {
		tier := func(plan string) string {
			return fmt.Sprintf("\ntier slow {\nmatch {http.request.header.X-Plan} %s\ntenant %s\n}", plan, slow)
		}
		hdr := append([]string{"X-Plan", "silver"}, auth...)
		e := start(t, "zone rematch\n"+base+"tenant "+fast+tier("silver"))
		e.prove("valid-moved")
		e.drain(hdr...)
		check(t, e, "zone rematch\n"+base+"tenant "+fast+tier("gold"), hdr)
	})
	t.Run("one of two routes", func(t *testing.T) {
		site := func(mcp string) string {
			return "handle /mcp* {\nmcp_ratelimit {\nzone routes\n" + base + "tenant " + mcp + "\n}\nreverse_proxy $BACKEND\n}\n" +
				"handle /legacy* {\nmcp_ratelimit {\nzone routes\n" + base + "tenant " + slow + "\n}\nrespond \"ok\" 200\n}\n" +
				"handle /v1* {\nmcp_ratelimit {\nzone routes\n" + base + "tenant " + fast + "\nmeter *\n}\nrespond \"ok\" 200\n}"
		}
		e := startSite(t, site(slow))
		e.prove("valid-moved")
		e.drain(auth...)
		time.Sleep(3 * time.Second)
		// The /mcp route takes the limit the /v1 route already has, while
		// /legacy keeps the old one: the set of limits in the zone stays
		// the same.
		e.caddy.Load(t, harness.Config(site(fast), e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
		settleAfterReload(t, e, auth[1])
		if n := e.admitted(6, auth...); n > 3 {
			t.Fatalf("%d of 6 calls admitted right after the route's change, want at most 3", n)
		}
	})
	t.Run("override moved between routes", func(t *testing.T) {
		e := start(t, "zone ovroutes\n"+base+"tenant "+fast)
		fp := fingerprintOf(t, e.caddy.Storage, "ovroutes", auth[1])
		site := func(slowRoute string) string {
			route := func(path string) string {
				ov := ""
				if path == slowRoute {
					ov = "override " + fp + " {\ntenant " + slow + "\n}\n"
				}
				return "handle " + path + "* {\nmcp_ratelimit {\nzone ovroutes\n" + base + "tenant " + fast + "\n" + ov + "}\nrewrite * /mcp\nreverse_proxy $BACKEND\n}\n"
			}
			return route("/mcp") + route("/legacy")
		}
		e.caddy.Load(t, harness.Config(site("/mcp"), e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
		e.prove("valid-moved")
		e.drain(auth...)
		time.Sleep(3 * time.Second)
		// The override moves to the other route: every limit in the zone
		// stays the same, but this identity's limit on /mcp changed.
		e.caddy.Load(t, harness.Config(site("/legacy"), e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
		settleAfterReload(t, e, auth[1])
		if n := e.admitted(6, auth...); n > 3 {
			t.Fatalf("%d of 6 calls admitted right after the override left the route, want at most 3", n)
		}
	})
	t.Run("gateway moved", func(t *testing.T) {
		e := start(t, "zone regateway\nquota off\nglobal off\npreauth "+slow+"\ngateway 10.0.0.0/8 "+fast)
		e.drain()
		time.Sleep(3 * time.Second)
		e.reloadWith(t, "zone regateway\nquota off\nglobal off\npreauth "+slow+"\ngateway 127.0.0.1/32 "+fast)
		if n := e.admitted(6); n > 3 {
			t.Fatalf("%d of 6 unproven calls admitted right after a gateway moved onto the caller, want at most 3", n)
		}
	})
}

// Raising an override's burst does not hand its identity a fresh, larger
// burst: its drained bucket is not dropped as full at the old burst while
// it waits for its next use, and refills at its rate.
func TestRaisedOverrideBurstIsNoFreshBurst(t *testing.T) {
	const base = "zone reburst\npreauth 100/s burst 100\nquota off\nglobal off\n"
	auth := []string{"Authorization", "Bearer valid-reburst"}
	e := start(t, base)
	fp := fingerprintOf(t, e.caddy.Storage, "reburst", auth[1])
	override := func(burst int) string {
		return fmt.Sprintf("override %s {\ntenant 2/s burst %d\n}", fp, burst)
	}
	e.reloadWith(t, base+override(2))
	e.prove("valid-reburst")
	for i := range 2 {
		if r := e.call(i, auth...); r.Status != http.StatusOK {
			t.Fatalf("draining call %d: %d %s", i, r.Status, r.Body)
		}
	}
	e.reloadWith(t, base+override(50))
	time.Sleep(2500 * time.Millisecond) // full at the old burst after 1s; the sweep runs every second
	if n := e.admitted(20, auth...); n > 10 {
		t.Fatalf("%d of 20 calls admitted 2.5s after the burst was raised at 2/s, want at most 10", n)
	}
}

// A layer turned off and on again hands no one a fresh burst: while it is
// off, its buckets stay as they were (earning their rate), and are not
// dropped as idle and made anew, full, when it comes back. The global and
// anonymous buckets are sets of their own: with anonymous on, global
// turned off and on again finds its bucket where its own rate has brought
// it, not refilled at the anonymous bucket's rate meanwhile.
func TestLayerTurnedOffAndOnAgainKeepsItsBuckets(t *testing.T) {
	for _, tt := range []struct {
		layer, base string
		idle        time.Duration
	}{
		// The sweep runs every second.
		{"tenant", "preauth 100/s burst 100\nquota off\nglobal off\n", 2500 * time.Millisecond},
		// The anonymous rate would fill any bucket in 1s.
		{"global", "preauth 100/s burst 100\ntenant 100/s burst 100\nquota off\nanonymous 100/s burst 100\n", 1500 * time.Millisecond},
	} {
		t.Run(tt.layer, func(t *testing.T) {
			base := "zone offon-" + tt.layer + "\n" + tt.base
			auth := []string{"Authorization", "Bearer valid-offon-" + tt.layer}
			e := start(t, base+tt.layer+" 1/h burst 10")
			e.prove("valid-offon-" + tt.layer)
			e.drain(auth...)
			refusal(t, e.call(50, auth...), http.StatusTooManyRequests, tt.layer)
			e.reloadWith(t, base+tt.layer+" off")
			settleAfterReload(t, e, auth[1])
			if n := e.admitted(3, auth...); n != 3 {
				t.Fatalf("%d of 3 calls admitted with the %s layer off", n, tt.layer)
			}
			time.Sleep(tt.idle)
			e.reloadWith(t, base+tt.layer+" 1/h burst 10")
			settleAfterReload(t, e, auth[1])
			refusal(t, e.call(51, auth...), http.StatusTooManyRequests, tt.layer)
		})
	}
}

// An override that turns the tenant layer off for one identity leaves its
// bucket earning the rate it had, as the layer turned off for everyone
// does: when the override goes, the bucket is where that rate brought it
// (full after 3s at 1/s), not where the override found it.
func TestOverrideTurningTheTenantLayerOffKeepsItsBucketEarning(t *testing.T) {
	const base = "zone override-off\npreauth 100/s burst 100\nquota off\nglobal off\ntenant 1/s burst 3"
	auth := []string{"Authorization", "Bearer valid-override-off"}
	e := start(t, base)
	fp := fingerprintOf(t, e.caddy.Storage, "override-off", auth[1])
	e.prove("valid-override-off")
	e.spend("valid-override-off", 3)
	e.reloadWith(t, base+"\noverride "+fp+" {\ntenant off\n}")
	settleAfterReload(t, e, auth[1])
	if n := e.admitted(5, auth...); n != 5 {
		t.Fatalf("%d of 5 calls admitted with the tenant layer off for the identity", n)
	}
	time.Sleep(3 * time.Second)
	e.reloadWith(t, base)
	settleAfterReload(t, e, auth[1])
	if n := e.admitted(4, auth...); n != 3 {
		t.Fatalf("%d of 4 calls admitted after the override went, want the burst of 3 the bucket earned meanwhile", n)
	}
}

// An identity idle under an override of its tenant rate is credited the
// time until the override goes at the slowest rate in force, not left
// where the override found it: 3s at 1/s, 3 tokens.
func TestOverrideRemovedBeforeTheNextCallCreditsTheTimeBetween(t *testing.T) {
	const base = "zone override-idle\npreauth 100/s burst 100\nquota off\nglobal off\ntenant 1/s burst 4"
	auth := []string{"Authorization", "Bearer valid-override-idle"}
	e := start(t, base)
	fp := fingerprintOf(t, e.caddy.Storage, "override-idle", auth[1])
	e.prove("valid-override-idle")
	e.spend("valid-override-idle", 4)
	e.reloadWith(t, base+"\noverride "+fp+" {\ntenant 1/s burst 5\n}")
	time.Sleep(3 * time.Second)
	e.reloadWith(t, base)
	settleAfterReload(t, e, auth[1])
	if n := e.admitted(5, auth...); n < 3 || n > 4 {
		t.Fatalf("%d of 5 calls admitted after 3s idle at 1/s under the override, want 3 (4 if the reload took a second)", n)
	}
}

// Time between two changes is credited at the slowest rate in force
// then: with the routes of one zone holding different rates, a bucket
// idle across two reloads earns the slow route's rate, not the fast one's
// (3s at 6/m is a fraction of a token; at 3/s, nine).
func TestIdleTimeBetweenChangesEarnsTheSlowestRate(t *testing.T) {
	const base = "preauth 100/s burst 100\nquota off\nglobal off\n"
	site := func(v1 string) string {
		return "handle /mcp* {\nmcp_ratelimit {\nzone slowest\n" + base + "tenant 6/m burst 10\n}\nreverse_proxy $BACKEND\n}\n" +
			"handle /v1* {\nmcp_ratelimit {\nzone slowest\n" + base + "tenant " + v1 + "\nmeter *\n}\nrespond \"ok\" 200\n}"
	}
	load := func(e *env, v1 string) {
		e.caddy.Load(t, harness.Config(site(v1), e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
	}
	e := startSite(t, site("2/s burst 10"))
	if n := admittedAfterIdleBetweenChanges(t, e, "valid-slowest", func(fast string) { load(e, fast) }); n > 3 {
		t.Fatalf("%d of 6 calls admitted after 3s idle between two changes, want at most 3: the idle time earned the fast route's rate", n)
	}
}

// admittedAfterIdleBetweenChanges proves token and drains its bucket, has
// change set the faster limits to 3/s and, 3s later, to 4/s (burst 10),
// and returns how many of 6 calls are then admitted.
func admittedAfterIdleBetweenChanges(t *testing.T, e *env, token string, change func(fast string)) int {
	t.Helper()
	auth := []string{"Authorization", "Bearer " + token}
	e.prove(token)
	e.drain(auth...)
	change("3/s burst 10")
	time.Sleep(3 * time.Second)
	change("4/s burst 10")
	settleAfterReload(t, e, auth[1])
	return e.admitted(6, auth...)
}

// A bucket that refilled past the burst it was last used with, after a
// change raised it, is neither cut back nor dropped as full by a second
// change: drained at burst 5, it earns about 10 tokens in 1s at 10/s
// burst 50, and after a change to 1/m burst 50 it holds those, not a
// fresh 50 (nor 5).
func TestSecondChangeAfterARaisedBurstIsNoFreshBurst(t *testing.T) {
	const base = "preauth 100/s burst 100\nquota off\nglobal off\n"
	auth := []string{"Authorization", "Bearer valid-raised"}
	e := start(t, "zone raised\n"+base+"tenant 1/m burst 5")
	e.prove("valid-raised")
	for i := range 5 {
		if r := e.call(i, auth...); r.Status != http.StatusOK {
			t.Fatalf("draining call %d: %d %s", i, r.Status, r.Body)
		}
	}
	e.reloadWith(t, "zone raised\n"+base+"tenant 10/s burst 50")
	time.Sleep(time.Second)
	e.reloadWith(t, "zone raised\n"+base+"tenant 1/m burst 50")
	time.Sleep(2 * time.Second) // past the run loop's drop of full buckets
	settleAfterReload(t, e, auth[1])
	// 10/s from the first reload's end to the second's: 1s and what the
	// second reload takes, well short of a fresh 50 on a loaded machine.
	if n := e.admitted(50, auth...); n < 8 || n >= 45 {
		t.Fatalf("%d of 50 calls admitted after two changes, want the 10 or so earned between them", n)
	}
}

// A quota period that a live change takes out of every identity quota
// stops being counted, and put back it goes on from the count it had: 5
// calls under 10/day, 3 under 100/month alone, and 10/day again leaves 5
// for today, neither 10 (a fresh period) nor 2 (counting the calls made
// while no limit used it).
func TestQuotaPeriodTakenOutAndPutBackGoesOnFromItsCount(t *testing.T) {
	const base = "zone periodback\npreauth 100/s burst 100\ntenant 100/s burst 100\nglobal off\n"
	auth := []string{"Authorization", "Bearer valid-periodback"}
	e := start(t, base+"quota 10/day")
	e.prove("valid-periodback")
	if n := e.admitted(5, auth...); n != 5 {
		t.Fatalf("%d of 5 calls admitted under 10/day", n)
	}
	e.reloadWith(t, base+"quota 100/month")
	settleAfterReload(t, e, auth[1])
	if n := e.admitted(3, auth...); n != 3 {
		t.Fatalf("%d of 3 calls admitted under 100/month", n)
	}
	e.reloadWith(t, base+"quota 10/day")
	settleAfterReload(t, e, auth[1])
	r := e.call(60, auth...)
	if r.Status != http.StatusOK {
		t.Fatalf("call under 10/day again: %d %s", r.Status, r.Body)
	}
	if got := rateLimit(t, r)["quota-day"][0]; got != 4 {
		t.Fatalf("quota-day r=%d after one more call, want 4 (5 used before, the 3 made without a day limit not counted); RateLimit %q", got, r.Header.Get("RateLimit"))
	}
}
