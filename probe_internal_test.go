package mcplimit

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// After a refusal, the later layers decide which refusal to give without
// taking anything: a tenant over its own limit must not hold the global
// bucket, the quota or a concurrency slot even for the moment before a
// rollback, or a flood of its refused calls would crowd out other tenants.
func TestLayersAfterARefusalTakeNothing(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "probe", Tenant: &RateLimit{Rate: "1/m", Burst: 1}, Costs: map[string]int64{"big": 2},
		Global: &RateLimit{Rate: "1/m", Burst: 5}, Quota: &QuotaLimit{Day: 10},
		Concurrency: &Concurrency{Max: 1},
	})
	const token = "Bearer valid-probe"
	h.zone.prove(h.zone.fpKey.Load().sum(token), time.Now())
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		t.Error("a refused call reached the next handler")
		return nil
	})
	req := httptest.NewRequest(http.MethodPost, "http://test/mcp",
		bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`)))
	req.Header.Set("Authorization", token)
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	w := httptest.NewRecorder()
	_ = h.ServeHTTP(w, req, next)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("a call costing 2 over a tenant burst of 1: %d %s", w.Code, w.Body)
	}
	// Reserving would have created the global bucket (and given its
	// tokens back); deciding without taking creates none.
	if n := h.zone.global.Len(); n != 0 {
		t.Fatalf("after a tenant refusal the zone holds %d global buckets, want none", n)
	}
}

// Anonymous and concurrency come after the shared layers but look first:
// a call refused because its identity already runs its share of calls
// takes no global token and none of the zone's slots, even for a moment.
func TestConcurrencyRefusalTakesNothingFirst(t *testing.T) {
	h := provisionForTest(t, &Handler{
		Zone: "probe-conc", Tenant: &RateLimit{Rate: "100/s", Burst: 100},
		Global: &RateLimit{Rate: "1/m", Burst: 5}, Quota: &QuotaLimit{Off: true},
		Concurrency: &Concurrency{Max: 10, PerIdentity: 1},
	})
	const token = "Bearer valid-probe-conc"
	fp := h.zone.fpKey.Load().sum(token)
	h.zone.prove(fp, time.Now())
	if !h.zone.perID.Acquire(fp, 1, 1) { // the identity's one call in flight
		t.Fatal("setup: no slot")
	}
	req := httptest.NewRequest(http.MethodPost, "http://test/mcp",
		bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)))
	req.Header.Set("Authorization", token)
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), nil, nil)
	w := httptest.NewRecorder()
	_ = h.ServeHTTP(w, req, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Error("a refused call reached the next handler")
		return nil
	}))
	if w.Code != http.StatusTooManyRequests || !bytes.Contains(w.Body.Bytes(), []byte(`"concurrency"`)) {
		t.Fatalf("a second call in flight for one identity: %d %s", w.Code, w.Body)
	}
	if n := h.zone.global.Len(); n != 0 {
		t.Fatalf("the refused call created %d global buckets, want none", n)
	}
	if n := h.zone.metrics.inflightN.Load(); n != 0 {
		t.Fatalf("%d calls counted in flight zone-wide, want none", n)
	}
}
