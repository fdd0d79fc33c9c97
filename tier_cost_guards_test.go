package mcplimit_test

import (
	"net/http"
	"testing"
	"time"
)

// A tier that sets a cost of its own keeps the top-level costs it does
// not repeat: with `cost analyze_photo 5` at the top level and a paid
// tier that only prices slow, a paid identity's photo still costs 5 of
// its burst of 10, so its third photo is refused. An operator who prices
// one more tool in a plan must not find every other priced tool turned
// into a 1-token call for that plan's clients.
func TestTierCostKeepsTheTopLevelCostsItDoesNotSet(t *testing.T) {
	e := start(t, "zone tiercostbase\npreauth 100/s burst 100\nquota off\nglobal off\ntenant 1/m burst 10\n"+
		"cost analyze_photo 5\n"+
		"tier paid {\nmatch {http.request.header.X-Plan} paid\ncost slow 2\n}")
	paid := []string{"Authorization", "Bearer valid-tiercost", "X-Plan", "paid"}
	e.prove("valid-tiercost", "X-Plan", "paid")
	e.passes(2, "analyze_photo", paid...)
	refusal(t, e.callTool(1, "analyze_photo", paid...), http.StatusTooManyRequests, "tenant")
}

// An override's `cost` lines are in force for its identity: with
// `cost echo 1` at the top level and an override giving one identity
// `cost echo 5`, that identity's echo takes 5 of its burst of 10 (the
// third is refused), while another identity still pays 1 a call. An
// operator pricing one heavy client's calls up must see it take effect.
func TestOverrideCostIsChargedToItsIdentity(t *testing.T) {
	const base = "zone overridecost\npreauth 100/s burst 100\nquota off\nglobal off\ntenant 1/m burst 10\ncost echo 1"
	x := []string{"Authorization", "Bearer valid-overridecost"}
	y := []string{"Authorization", "Bearer valid-othercost"}
	e := start(t, base)
	fp := fingerprintOf(t, e.caddy.Storage, "overridecost", x[1])
	e.reloadWith(t, base+"\noverride "+fp+" {\ncost echo 5\n}")
	settleAfterReload(t, e, x[1])
	e.prove("valid-overridecost")
	e.prove("valid-othercost")
	e.passes(2, "echo", x...)
	refusal(t, e.callTool(1, "echo", x...), http.StatusTooManyRequests, "tenant")
	e.passes(3, "echo", y...)
}

// A period that only an override limits is counted for every identity of
// the handler, not just the overridden one: with a month quota in one
// identity's override, another identity's calls are counted in the month
// too, so when it later gets an override of 3/month its 5 calls already
// made hold it, and its next call is refused. Forgetting them would hand
// a client a fresh month the moment an operator caps it.
func TestOverrideOnlyPeriodCountsEveryIdentity(t *testing.T) {
	skipNearReset(t, nextMonth)
	const base = "zone overrideperiod\npreauth 100/s burst 100\nglobal off\ntenant 100/s burst 100\nquota 100/day"
	x := []string{"Authorization", "Bearer valid-periodx"}
	y := []string{"Authorization", "Bearer valid-periody"}
	e := start(t, base)
	fpx := fingerprintOf(t, e.caddy.Storage, "overrideperiod", x[1])
	fpy := fingerprintOf(t, e.caddy.Storage, "overrideperiod", y[1])
	withX := base + "\noverride " + fpx + " {\nquota 3/month\n}"
	e.reloadWith(t, withX)
	settleAfterReload(t, e, y[1])
	e.prove("valid-periody")
	e.passes(5, "echo", y...)
	e.reloadWith(t, withX+"\noverride "+fpy+" {\nquota 3/month\n}")
	settleAfterReload(t, e, y[1])
	refusal(t, e.callTool(1, "echo", y...), http.StatusTooManyRequests, "quota")
}

// Time between two changes is credited at the slowest rate in force then,
// a tier's included, within one handler: a top-level identity drained at
// 6/m, idle 3s across two reloads that retune only a faster tier (3/s,
// then 4/s), earns a fraction of a token at 6/m, not nine at the tier's
// rate. Else every plan change an operator makes would hand slow clients
// a refill they never earned.
func TestIdleTimeBetweenChangesEarnsTheSlowestRateInOneHandler(t *testing.T) {
	block := func(fast string) string {
		return "zone slowestone\npreauth 100/s burst 100\nquota off\nglobal off\ntenant 6/m burst 10\n" +
			"tier fast {\nmatch {http.request.header.X-Plan} fast\ntenant " + fast + "\n}"
	}
	e := start(t, block("2/s burst 10"))
	if n := admittedAfterIdleBetweenChanges(t, e, "valid-slowestone", func(fast string) { e.reloadWith(t, block(fast)) }); n > 3 {
		t.Fatalf("%d of 6 calls admitted after 3s idle between two changes, want at most 3: the idle time earned the tier's rate", n)
	}
}

// An override slower than every tier is among the rates in force: an
// identity under `tenant 1/m`, drained, whose override is then changed
// and who stays away 2s until a reload raises the top-level rate, is
// credited that time at 1/m, not at the top level's 10/s (which would
// give it its whole burst back). An operator slowing one client must not
// see it refilled by an unrelated change.
func TestIdleTimeAfterAnOverrideChangeEarnsTheOverridesRate(t *testing.T) {
	const base = "zone slowoverride\npreauth 100/s burst 100\nquota off\nglobal off\n"
	auth := []string{"Authorization", "Bearer valid-slowoverride"}
	e := start(t, base+"tenant 10/s burst 10")
	fp := fingerprintOf(t, e.caddy.Storage, "slowoverride", auth[1])
	withOverride := func(tenant, burst string) string {
		return base + "tenant " + tenant + " burst 10\noverride " + fp + " {\ntenant 1/m burst " + burst + "\n}"
	}
	e.reloadWith(t, withOverride("10/s", "5"))
	settleAfterReload(t, e, auth[1])
	e.prove("valid-slowoverride")
	e.spend("valid-slowoverride", 5)
	e.reloadWith(t, withOverride("10/s", "6"))
	time.Sleep(2 * time.Second)
	e.reloadWith(t, withOverride("20/s", "6"))
	settleAfterReload(t, e, auth[1])
	if n := e.admitted(6, auth...); n > 1 {
		t.Fatalf("%d of 6 calls admitted after 2s idle at 1/m, want at most 1: the idle time earned the top-level rate", n)
	}
}

// A call that breaks two arg bounds is refused naming the first bound by
// name, every time: `limit` before `page`. A client (or an operator
// reading logs) sees the same data.argument for the same request, not
// one that changes from call to call with map order.
func TestArgRefusalNamesTheFirstBoundByName(t *testing.T) {
	e := start(t, "tenant 100/s burst 100\nquota off\ntool echo {\n arg page max 5\n arg limit max 10\n}")
	h := []string{"Authorization", "Bearer valid-twobounds"}
	e.prove("valid-twobounds")
	for i := range 20 {
		r := e.post(argCall(i, `{"page":100,"limit":100}`), h...)
		if r.Status != http.StatusBadRequest {
			t.Fatalf("call %d: status %d, want 400: %s", i, r.Status, r.Body)
		}
		var got rpcError
		r.JSON(t, &got)
		if got.Error == nil || got.Error.Data.Argument != "limit" {
			t.Fatalf("call %d names the wrong argument, want limit: %s", i, r.Body)
		}
	}
}
