package mcplimit

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	maphandler "github.com/caddyserver/caddy/v2/modules/caddyhttp/map"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// costWarnings compiles h and returns the warnings its load gives about
// tool costs: those no call can pay, and tool policies a meter list that
// leaves out tools/call never applies.
func costWarnings(t *testing.T, h *Handler) []observer.LoggedEntry {
	t.Helper()
	pol, err := compile(h)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	logger := zap.New(core)
	warnUnpayableCosts(pol, logger)
	warnUnmeteredToolPolicies(pol, logger)
	return logs.All()
}

// unmeteredTools returns the tools named by the "meter list leaves out"
// warnings among logs, one entry per warning.
func unmeteredTools(logs []observer.LoggedEntry) []string {
	var warned []string
	for _, e := range logs {
		if strings.Contains(e.Message, "meter list leaves out") {
			warned = append(warned, fmt.Sprint(e.ContextMap()["tools"]))
		}
	}
	return warned
}

// Under `meter *` every tools/call is charged: a tool cost above the
// tenant burst is warned about as one no call can pass (an operator
// learns the tool is unusable before a client does), and the load does
// not falsely claim the handler's tool costs do nothing.
func TestMeterAllChargesToolCostsSoAnUnpayableCostIsWarned(t *testing.T) {
	logs := costWarnings(t, &Handler{
		Meter:  []string{"*"},
		Tenant: &RateLimit{Rate: "1/s", Burst: 3},
		Costs:  Costs{"analyze_photo": 10},
	})
	if len(logs) != 1 {
		t.Fatalf("%d warnings (%v), want one: analyze_photo's cost over the tenant burst", len(logs), logs)
	}
	f := logs[0].ContextMap()
	if f["tool"] != "analyze_photo" || f["limit"] != "tenant burst" || f["allows"] != int64(3) {
		t.Fatalf("warned %q with %v, want analyze_photo over the tenant burst of 3", logs[0].Message, f)
	}
	if warned := unmeteredTools(logs); len(warned) != 0 {
		t.Fatalf("warned that tool policies do nothing under meter *: %v", warned)
	}
}

// A tool's fail_closed on a handler whose meter list leaves out
// tools/call does nothing (its calls never touch the quota store), and the
// load names the tool: an operator relying on it to refuse during an
// outage learns it will not.
func TestFailClosedOnAnUnmeteredHandlerIsWarned(t *testing.T) {
	logs := costWarnings(t, &Handler{
		Meter: []string{"resources/read"},
		Tools: map[string]*ToolPolicy{"photo": {FailClosed: true}},
	})
	if warned := unmeteredTools(logs); !slices.Equal(warned, []string{"[photo]"}) {
		t.Fatalf("warned about %v, want one warning naming photo", warned)
	}
}

// An override's tool cost on a handler whose meter list leaves out
// tools/call charges nothing, and the load names the tool: the operator
// who gave one identity a dearer tool learns it is free here.
func TestAnOverridesCostOnAnUnmeteredHandlerIsWarned(t *testing.T) {
	logs := costWarnings(t, &Handler{
		Meter:     []string{"resources/read"},
		Overrides: map[string]*Limits{"2dec10e3feec47eec5b1715aed15d0f7": {Costs: Costs{"echo": 3}}},
	})
	if warned := unmeteredTools(logs); !slices.Equal(warned, []string{"[echo]"}) {
		t.Fatalf("warned about %v, want one warning naming echo", warned)
	}
}

// An identity placeholder first seen unset and later set by an earlier
// handler (a map) is warned about both ways: the unset warning does not
// stop the watch, so the operator still learns the identity reads a value
// derived from the request, which the input checks do not cover.
func TestIdentityPlaceholderWarnedUnsetIsStillWarnedWhenSet(t *testing.T) {
	h := &Handler{Identity: []string{"{mykey}"}}
	logs, warn := watchUnset(t, h)
	if err := warn(httptest.NewRecorder(), unsetRequest()); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 1 || logs.FilterMessage(derivedIdentityWarning).Len() != 0 {
		t.Fatalf("%d warnings after a request without the map, want the unset one alone", logs.Len())
	}
	mapped := &maphandler.Handler{Source: "{http.request.method}", Destinations: []string{"mykey"}, Defaults: []string{"k"}}
	if err := mapped.ServeHTTP(httptest.NewRecorder(), unsetRequest(), warn); err != nil {
		t.Fatal(err)
	}
	if got := logs.FilterMessage(derivedIdentityWarning).Len(); got != 1 || logs.Len() != 2 {
		t.Fatalf("%d warnings, %d of a derived identity, after a request the map set it for; want 2, one of them", logs.Len(), got)
	}
}
