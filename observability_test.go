package mcplimit_test

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// sample is one line of the Prometheus text exposition.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads the admin endpoint's /metrics and returns the raw text and
// its samples.
func scrapeMetrics(t *testing.T, c *harness.Caddy) (string, []promSample) {
	t.Helper()
	status, body := c.AdminDo(t, http.MethodGet, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	var out []promSample
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		s := promSample{name: m[1], labels: map[string]string{}, value: v}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[lp[1]] = lp[2]
		}
		out = append(out, s)
	}
	return string(body), out
}

// metric returns the value of the one sample of name whose labels include
// want, and whether there is one.
func metricValue(samples []promSample, name string, want map[string]string) (float64, bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return s.value, true
		}
	}
	return 0, false
}

// mustMetric is metric failing the test when the sample is missing or
// differs from want.
func mustMetric(t *testing.T, samples []promSample, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := metricValue(samples, name, labels)
	if !ok {
		t.Fatalf("no sample %s%v on /metrics", name, labels)
	}
	if got != want {
		t.Fatalf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// declaredMetrics are the metric names metrics.go registers.
func declaredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`Name:\s*"(mcp_ratelimit_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		names[m[1]] = true
	}
	if len(names) < 8 {
		t.Fatalf("found only %d metric names in metrics.go: %v", len(names), names)
	}
	return names
}

// fingerprintOf computes the fingerprint of an identity value the way the
// handler does, from the zone key in the file-system storage directory.
func fingerprintOf(t *testing.T, storage, zone, value string) string {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(storage, "mcp_ratelimit", zone, "fingerprint.key"))
	if err != nil {
		t.Fatalf("reading the zone key: %v", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(value))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// logOptions returns global options that send Caddy's logs as JSON to a
// fresh file, and the file's path.
func logOptions(t *testing.T) (harness.Options, string) {
	path := filepath.Join(t.TempDir(), "caddy.log")
	return harness.Options{Global: fmt.Sprintf("log {\n output file %s\n format json\n level INFO\n}", path)}, path
}

// logEvents reads the JSON log lines of path.
func logEvents(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading log: %v", err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// refusalEvents are the "refused" events of zone and layer.
func refusalEvents(events []map[string]any, zone, layer string) []map[string]any {
	var out []map[string]any
	for _, ev := range events {
		if ev["msg"] == "refused" && ev["zone"] == zone && ev["layer"] == layer {
			out = append(out, ev)
		}
	}
	return out
}

// adminZone returns GET /mcp_ratelimit/<zone> decoded.
func adminZone(t *testing.T, c *harness.Caddy, zone string) map[string]any {
	t.Helper()
	var all struct {
		Zones map[string]map[string]any `json:"zones"`
	}
	c.AdminJSON(t, "/mcp_ratelimit/", &all)
	z, ok := all.Zones[zone]
	if !ok {
		t.Fatalf("zone %q missing from %v", zone, all.Zones)
	}
	return z
}

func TestRefusalCountersAreExactPerLayerAndSurviveReload(t *testing.T) {
	block := "zone obs\npreauth 1/m burst 3\ntenant 1/m burst 2\nquota off"
	e := start(t, block)
	e.prove("valid-obs") // admitted 1, pre-auth 3 → 2
	e.spend("valid-obs", 2)
	const tenantRefusals = 7
	for i := range tenantRefusals {
		refusal(t, e.call(10+i, "Authorization", "Bearer valid-obs"), http.StatusTooManyRequests, "tenant")
	}
	for i := range 2 { // the pre-auth bucket's last two tokens
		if r := e.call(20 + i); r.Status == http.StatusTooManyRequests {
			t.Fatalf("unproven call %d refused early: %s", i, r.Body)
		}
	}
	const preauthRefusals = 4
	for i := range preauthRefusals {
		refusal(t, e.call(30+i), http.StatusTooManyRequests, "preauth")
	}
	admitted := 1 + 2 + 2
	total := admitted + tenantRefusals + preauthRefusals

	check := func(tenant, preauth, admitted, total int) {
		t.Helper()
		text, samples := scrapeMetrics(t, e.caddy)
		z := map[string]string{"zone": "obs"}
		mustMetric(t, samples, "mcp_ratelimit_refusals_total", map[string]string{"zone": "obs", "layer": "tenant"}, float64(tenant))
		mustMetric(t, samples, "mcp_ratelimit_refusals_total", map[string]string{"zone": "obs", "layer": "preauth"}, float64(preauth))
		for _, l := range []string{"group", "quota", "group_quota", "tool_quota", "global", "concurrency", "anonymous", "store"} {
			mustMetric(t, samples, "mcp_ratelimit_refusals_total", map[string]string{"zone": "obs", "layer": l}, 0)
		}
		mustMetric(t, samples, "mcp_ratelimit_admitted_total", z, float64(admitted))
		mustMetric(t, samples, "mcp_ratelimit_decision_seconds_count", z, float64(total))
		mustMetric(t, samples, "mcp_ratelimit_decision_seconds_bucket", map[string]string{"zone": "obs", "le": "+Inf"}, float64(total))
		if _, ok := metricValue(samples, "mcp_ratelimit_decision_seconds_sum", z); !ok {
			t.Fatal("no mcp_ratelimit_decision_seconds_sum")
		}
		mustMetric(t, samples, "mcp_ratelimit_inflight", z, 0)
		mustMetric(t, samples, "mcp_ratelimit_quota_degraded", z, 0)
		if _, ok := metricValue(samples, "mcp_ratelimit_tracked", map[string]string{"zone": "obs", "kind": "known"}); !ok {
			t.Fatalf("no mcp_ratelimit_tracked{kind=\"known\"} on /metrics")
		}
		for _, s := range samples {
			if s.name == "mcp_ratelimit_tracked" && s.labels["kind"] == "" {
				t.Fatalf("mcp_ratelimit_tracked without kind: %v", s.labels)
			}
		}
		// Every metric metrics.go declares is exported.
		for name := range declaredMetrics(t) {
			if !strings.Contains(text, "\n"+name) && !strings.HasPrefix(text, name) {
				t.Errorf("declared metric %s does not appear on /metrics", name)
			}
		}
		// No label other than the documented ones.
		allowed := map[string]bool{"zone": true, "layer": true, "kind": true, "result": true, "le": true}
		for _, s := range samples {
			if !strings.HasPrefix(s.name, "mcp_ratelimit_") {
				continue
			}
			for k := range s.labels {
				if !allowed[k] {
					t.Errorf("%s has unexpected label %q", s.name, k)
				}
			}
		}
	}
	check(tenantRefusals, preauthRefusals, admitted, total)
	if v, _ := metricValue(func() []promSample { _, s := scrapeMetrics(t, e.caddy); return s }(), "mcp_ratelimit_tracked", map[string]string{"zone": "obs", "kind": "known"}); v != 1 {
		t.Errorf("tracked{kind=known} = %v, want 1 proven identity", v)
	}

	// The same config loaded again: no duplicate registration, counts kept.
	e.reloadWith(t, block)
	check(tenantRefusals, preauthRefusals, admitted, total)
	// And the metrics registered in the new config still move.
	refusal(t, e.call(40, "Authorization", "Bearer valid-obs"), http.StatusTooManyRequests, "tenant")
	check(tenantRefusals+1, preauthRefusals, admitted, total+1)
}

// A zone that stops (here: a reload drops it) logs the refusals its
// sampling still holds, however young their window: the represents_count
// of its events sum to every refusal.
func TestStoppingZoneLogsTheRefusalsSamplingHolds(t *testing.T) {
	opts, logPath := logOptions(t)
	e := start(t, "zone floodstop\npreauth 1/m burst 1", opts)
	if r := e.call(0); r.Status == http.StatusTooManyRequests {
		t.Fatalf("first call refused: %s", r.Body)
	}
	const n = 130 // 20 logged one by one, one event for 100, 10 held
	for i := range n {
		if r := e.call(1 + i); r.Status != http.StatusTooManyRequests {
			t.Fatalf("call %d: %d, want a pre-auth refusal", i, r.Status)
		}
	}
	site := "mcp_ratelimit {\nzone floodstop-next\n}\nreverse_proxy $BACKEND"
	e.caddy.Load(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, opts.Global))
	var sum float64
	harness.Eventually(t, 5*time.Second, "the stopped zone's events to represent every refusal", func() bool {
		sum = 0
		for _, ev := range refusalEvents(logEvents(t, logPath), "floodstop", "preauth") {
			rc, _ := ev["represents_count"].(float64)
			sum += rc
		}
		return sum == n
	})
}

func TestRefusalFloodIsSampledButRepresentsEveryRefusal(t *testing.T) {
	opts, logPath := logOptions(t)
	e := start(t, "zone flood\npreauth 1/m burst 1", opts)
	if r := e.call(0); r.Status == http.StatusTooManyRequests {
		t.Fatalf("first call refused: %s", r.Body)
	}
	const n = 500
	for i := range n {
		if r := e.call(1 + i); r.Status != http.StatusTooManyRequests {
			t.Fatalf("call %d: %d, want a pre-auth refusal", i, r.Status)
		}
	}
	// The zone loop ticks every second; leftovers of the last window are
	// logged once it has ended.
	var events []map[string]any
	var sum float64
	harness.Eventually(t, 5*time.Second, "sampled events to represent every refusal", func() bool {
		events = refusalEvents(logEvents(t, logPath), "flood", "preauth")
		sum = 0
		for _, ev := range events {
			rc, _ := ev["represents_count"].(float64)
			sum += rc
		}
		return sum >= n
	})
	time.Sleep(1500 * time.Millisecond) // nothing more may arrive
	events = refusalEvents(logEvents(t, logPath), "flood", "preauth")
	sum = 0
	for _, ev := range events {
		rc, ok := ev["represents_count"].(float64)
		if !ok || rc < 1 {
			t.Fatalf("refusal event without a positive represents_count: %v", ev)
		}
		if ra, _ := ev["retry_after"].(float64); rc == 1 && (ev["layer"] != "preauth" || ra < 1) {
			t.Fatalf("a single refusal's event must carry its layer and wait: %v", ev)
		}
		sum += rc
	}
	if sum != n {
		t.Fatalf("represents_count sums to %v over %d events, want %d", sum, len(events), n)
	}
	if len(events) >= n/2 {
		t.Fatalf("%d events logged for %d refusals: the flood was not sampled", len(events), n)
	}
	t.Logf("%d refusals logged as %d events", n, len(events))
	_, samples := scrapeMetrics(t, e.caddy)
	mustMetric(t, samples, "mcp_ratelimit_refusals_total", map[string]string{"zone": "flood", "layer": "preauth"}, n)
}

func TestNoRawCredentialInLabelsLogsOrAdminAPI(t *testing.T) {
	opts, logPath := logOptions(t)
	e := start(t, "zone secrets\npreauth 1/m burst 3\ntenant 1/m burst 2\nquota 100/day", opts)
	const valid, garbage = "valid-SECRETTOKEN123", "garbage-SECRET456"
	e.prove(valid)
	for i := range 4 { // 2 admitted, 2 tenant refusals
		e.call(i, "Authorization", "Bearer "+valid)
	}
	for i := range 4 { // garbage: the backend rejects, then pre-auth refuses
		e.call(10+i, "Authorization", "Bearer "+garbage)
	}
	fpValid := fingerprintOf(t, e.caddy.Storage, "secrets", "Bearer "+valid)
	fpGarbage := fingerprintOf(t, e.caddy.Storage, "secrets", "Bearer "+garbage)

	var logText []byte
	harness.Eventually(t, 5*time.Second, "refusal logs", func() bool {
		logText, _ = os.ReadFile(logPath)
		return bytes.Contains(logText, []byte(fpValid)) && bytes.Contains(logText, []byte(fpGarbage))
	})
	events := logEvents(t, logPath)
	if len(refusalEvents(events, "secrets", "tenant")) == 0 || len(refusalEvents(events, "secrets", "preauth")) == 0 {
		t.Fatalf("expected tenant and preauth refusal events in:\n%s", logText)
	}
	for _, ev := range refusalEvents(events, "secrets", "tenant") {
		if ev["fingerprint"] != fpValid {
			t.Fatalf("tenant refusal logs fingerprint %v, want %s", ev["fingerprint"], fpValid)
		}
	}

	metricsText, _ := scrapeMetrics(t, e.caddy)
	_, adminAll := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/", nil)
	_, adminID := e.caddy.AdminDo(t, http.MethodGet, "/mcp_ratelimit/secrets/identities/"+fpValid, nil)
	_, cfg := e.caddy.AdminDo(t, http.MethodGet, "/config/", nil)
	var storageText []byte
	_ = filepath.Walk(e.caddy.Storage, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			storageText = append(storageText, b...)
		}
		return nil
	})
	for what, text := range map[string][]byte{
		"log": logText, "/metrics": []byte(metricsText), "admin API": adminAll,
		"admin identity": adminID, "config": cfg, "storage": storageText,
	} {
		for _, secret := range []string{"SECRETTOKEN123", "SECRET456"} {
			if bytes.Contains(text, []byte(secret)) {
				t.Errorf("%s contains the raw credential %q", what, secret)
			}
		}
	}
	for _, line := range strings.Split(metricsText, "\n") {
		if strings.HasPrefix(line, "mcp_ratelimit_") &&
			(strings.Contains(line, fpValid) || strings.Contains(line, fpGarbage) || strings.Contains(line, "127.0.0.1")) {
			t.Errorf("metric line carries a fingerprint or an address: %s", line)
		}
	}
}

// Requests refused as sent (body rules, identity headers, argument bounds)
// are refusals too: counted exactly, under layer "request".
func TestRequestRefusalsAreCounted(t *testing.T) {
	e := start(t, "zone reqs\nmax_body 300\ntool echo {\n arg limit max 5\n}")
	e.prove("valid-reqs")
	h := []string{"Authorization", "Bearer valid-reqs"}
	if r := e.post(harness.ToolCall(1, "echo", map[string]any{"text": "hi"}), append(h, "Content-Encoding", "gzip")...); r.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("gzip body: %d", r.Status)
	}
	if r := e.post(harness.ToolCall(2, "echo", map[string]any{"text": strings.Repeat("x", 400)}), h...); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize body: %d", r.Status)
	}
	if r := e.post(argCall(3, `{"limit":50}`), h...); r.Status != http.StatusBadRequest {
		t.Fatalf("argument over its bound: %d", r.Status)
	}
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	if n := promValue(string(body), "mcp_ratelimit_refusals_total", `layer="request"`, `zone="reqs"`); n != 3 {
		t.Fatalf("mcp_ratelimit_refusals_total{layer=request} = %v, want 3", n)
	}
	if z := harness.GetZone(t, e.caddy.Admin, "reqs"); z.Refusals["request"] != 3 {
		t.Fatalf("admin API refusals %v, want request: 3", z.Refusals)
	}
}

// The in-flight gauge counts every admitted metered call, with no
// concurrency cap configured too, until its answer is written.
func TestInflightCountsCallsWithoutACap(t *testing.T) {
	e := start(t, "zone inflightall\ntenant off\nquota off")
	e.prove("valid-inflight")
	h := []string{"Authorization", "Bearer valid-inflight"}
	a := e.slowInBackground(2000, h...)
	b := e.slowInBackground(2000, h...)
	harness.Eventually(t, 5*time.Second, "two calls in flight without a cap", func() bool { return e.inflight("inflightall") == 2 })
	_, samples := scrapeMetrics(t, e.caddy)
	mustMetric(t, samples, "mcp_ratelimit_inflight", map[string]string{"zone": "inflightall"}, 2)
	<-a
	<-b
	harness.Eventually(t, 5*time.Second, "the gauge to come back to 0", func() bool { return e.inflight("inflightall") == 0 })
	_, samples = scrapeMetrics(t, e.caddy)
	mustMetric(t, samples, "mcp_ratelimit_inflight", map[string]string{"zone": "inflightall"}, 0)
}

// A tool costing more than the tenant burst (top level or a tier's) is
// called out when the config loads: none of its calls could ever pass.
func TestUnpayableToolCostIsWarnedAtLoad(t *testing.T) {
	opts, logPath := logOptions(t)
	start(t, "zone unpayable\ntenant 5/s burst 4\ncost slow 5\ncost quick 2\n"+
		"tier small {\nmatch {http.request.header.X-Plan} small\ntenant 1/s burst 2\n}", opts)
	tiers := zoneWarnings(t, logPath, "unpayable", "costs more than the tenant burst", 2, "tier", "tool")
	if !slices.Equal(tiers, []string{" slow", "small slow"}) {
		t.Fatalf("warned for %v, want slow at the top level and in tier small only", tiers)
	}
}

// A tool costing more than a quota, the group's burst or the global
// burst allows is called out too: the first such limit is named.
func TestToolCostOverAnyLimitIsWarnedAtLoad(t *testing.T) {
	opts, logPath := logOptions(t)
	start(t, "zone unpayable2\ntenant 50/s burst 100\nquota 8/day\nglobal 5/s burst 6\n"+
		"group {http.request.header.X-Org} 5/s burst 20\ngroup_quota 9/month\ncost echo 10\ncost photo 7\ncost slow 6", opts)
	got := zoneWarnings(t, logPath, "unpayable2", "no call of it can pass", 2, "tool", "limit", "allows")
	if want := []string{"echo daily quota 8", "photo global burst 6"}; !slices.Equal(got, want) {
		t.Fatalf("warned %q, want %q", got, want)
	}
	// A handler that does not meter tools/call charges no tool's cost:
	// only the warning that says so comes.
	opts, logPath = logOptions(t)
	start(t, "zone unpayable3\nmeter tools/list\ntenant 1/s burst 3\ncost photo 10", opts)
	loadWarnings(t, logPath, "meter list leaves out", "tools")
	for _, ev := range logEvents(t, logPath) {
		if msg, _ := ev["msg"].(string); strings.Contains(msg, "no call of it can pass") && ev["zone"] == "unpayable3" {
			t.Fatalf("warned that photo cannot pass where tool calls cost nothing: %v", ev)
		}
	}
}

// zoneWarnings waits for n warnings of zone whose message holds msg in
// the log at logPath and returns each as the values of fields, joined by
// spaces, sorted.
func zoneWarnings(t *testing.T, logPath, zone, msg string, n int, fields ...string) []string {
	t.Helper()
	var got []string
	harness.Eventually(t, 5*time.Second, "the warnings", func() bool {
		got = nil
		for _, ev := range logEvents(t, logPath) {
			if m, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(m, msg) && ev["zone"] == zone {
				vals := make([]string, len(fields))
				for i, f := range fields {
					vals[i] = fmt.Sprint(ev[f])
				}
				got = append(got, strings.Join(vals, " "))
			}
		}
		return len(got) >= n
	})
	slices.Sort(got)
	return got
}

// loadWarnings waits for a warning whose message holds msg in the log at
// logPath and returns each such warning's zone and field, as "zone value".
func loadWarnings(t *testing.T, logPath, msg, field string) []string {
	t.Helper()
	var warned []string
	harness.Eventually(t, 5*time.Second, "the warning", func() bool {
		warned = nil
		for _, ev := range logEvents(t, logPath) {
			if m, _ := ev["msg"].(string); ev["level"] == "warn" && strings.Contains(m, msg) {
				warned = append(warned, fmt.Sprintf("%v %v", ev["zone"], ev[field]))
			}
		}
		return len(warned) > 0
	})
	return warned
}

// A meter list naming a method MCP does not define for a client to send
// (a vendor's own) is warned about at load, naming the methods, and the
// method is metered as written; a list of MCP's methods is not warned.
func TestUnknownMeteredMethodsAreWarnedAtLoad(t *testing.T) {
	opts, logPath := logOptions(t)
	e := startSite(t, `route /mcp* {
		mcp_ratelimit {
			zone vendor_methods
			meter tools/call acme/search
			tenant 1/m burst 2
		}
		reverse_proxy $BACKEND
	}
	route /known* {
		mcp_ratelimit {
			zone known_methods
			meter tools/call resources/read tasks/result
		}
		reverse_proxy $BACKEND
	}`, opts)
	time.Sleep(200 * time.Millisecond) // every handler's load logged
	if warned := loadWarnings(t, logPath, "methods MCP does not define", "methods"); !slices.Equal(warned, []string{"vendor_methods [acme/search]"}) {
		t.Fatalf("warned %q, want the vendor zone's acme/search only", warned)
	}
	e.prove("valid-vendor")
	h := []string{"Authorization", "Bearer valid-vendor"}
	search := func(id int) *harness.Response {
		return e.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"acme/search","params":{}}`, id), h...)
	}
	for i := range 2 {
		// The SDK's backend answers a method it does not know with a 400:
		// what matters is that the call was let through.
		if r := search(i + 1); r.Status == http.StatusTooManyRequests {
			t.Fatalf("acme/search %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	if r := search(3); r.Status != http.StatusTooManyRequests {
		t.Fatalf("acme/search over the tenant burst: %d %s, want it metered and refused", r.Status, r.Body)
	}
}

// A tool's cost, quota and fail_closed on a handler whose meter list
// leaves out tools/call do nothing (its calls cost nothing), and the load
// says so; its arg bounds still refuse. A handler metering tools/call is
// not warned.
func TestUnmeteredToolPoliciesAreWarnedAtLoad(t *testing.T) {
	opts, logPath := logOptions(t)
	e := startSite(t, `route /metered* {
		mcp_ratelimit {
			zone metered_tools
			tool pager {
				quota 2/day
			}
		}
		reverse_proxy $BACKEND
	}
	route {
		mcp_ratelimit {
			zone unmetered_tools
			meter resources/read
			cost slow 3
			tool pager {
				arg limit max 100
				quota 2/day
			}
			tool quick {
				arg limit max 5
			}
		}
		reverse_proxy $BACKEND
	}`, opts)
	if warned := loadWarnings(t, logPath, "meter list leaves out", "tools"); !slices.Equal(warned, []string{"unmetered_tools [pager slow]"}) {
		t.Fatalf("warned %q, want the unmetered zone's pager and slow only", warned)
	}
	h := []string{"Authorization", "Bearer valid-unmetered"}
	for i := range 3 {
		if r := e.post(harness.ToolCall(i, "pager", map[string]any{"limit": 5}), h...); r.Status != http.StatusOK {
			t.Fatalf("call %d of the unmetered pager: %d %s", i+1, r.Status, r.Body)
		}
	}
	if r := e.post(harness.ToolCall(4, "pager", map[string]any{"limit": 1000}), h...); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"limit"`) {
		t.Fatalf("a pager call over its arg bound: %d %s", r.Status, r.Body)
	}
}
