package mcplimit_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// alertRules is the shape of a Prometheus rules file.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var (
	promString    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promRange     = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promNumber    = regexp.MustCompile(`(^|[^a-zA-Z0-9_:])[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	labelValues   = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)[^)]*\)`)
	matcherLabel  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	promoKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true,
	}
)

// promRefs returns the metric names and label names a PromQL expression
// (or a Grafana label_values query) refers to.
func promRefs(expr string) (metrics, labels []string) {
	expr = labelValues.ReplaceAllString(expr, "$1")
	for _, m := range promGrouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	for _, m := range promMatchers.FindAllString(promString.ReplaceAllString(expr, `""`), -1) {
		for _, l := range matcherLabel.FindAllStringSubmatch(m, -1) {
			labels = append(labels, l[1])
		}
	}
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = promNumber.ReplaceAllString(s, "$1 ")
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		id := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if promoKeywords[id] || strings.HasPrefix(rest, "(") {
			continue // an operator, or a function / aggregation name
		}
		metrics = append(metrics, id)
	}
	return metrics, labels
}

func TestPromRefsParsesWhatTheExamplesUse(t *testing.T) {
	m, l := promRefs(`histogram_quantile(0.99, sum by (zone, le) (rate(mcp_ratelimit_decision_seconds_bucket{zone=~"$zone"}[5m]))) > 1e-3 and on (zone) up == 1`)
	if strings.Join(m, ",") != "mcp_ratelimit_decision_seconds_bucket,up" {
		t.Fatalf("metrics %v", m)
	}
	if strings.Join(l, ",") != "zone,le,zone,zone" {
		t.Fatalf("labels %v", l)
	}
	if m, _ := promRefs(`label_values(mcp_ratelimit_admitted_total, zone)`); strings.Join(m, ",") != "mcp_ratelimit_admitted_total" {
		t.Fatalf("label_values: %v", m)
	}
}

// exampleQueries returns every PromQL expression of the two examples,
// keyed by where it is.
func exampleQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}

	raw, err := os.ReadFile("examples/prometheus-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("examples/prometheus-alerts.yml: %v", err)
	}
	if len(rules.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	for _, g := range rules.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Fatalf("group %q is empty or unnamed", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Fatalf("rule %+v lacks alert or expr", r)
			}
			if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("alert %s lacks a summary or a severity", r.Alert)
			}
			if _, dup := out["alert "+r.Alert]; dup {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			out["alert "+r.Alert] = r.Expr
		}
	}

	raw, err = os.ReadFile("examples/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("examples/grafana-dashboard.json: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatal("dashboard lacks a title, uid or panels")
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			out["variable "+v.Name] = q
		}
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
			}
			out["panel "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	return out
}

func TestExamplesQueryOnlyMetricsTheModuleExports(t *testing.T) {
	queries := exampleQueries(t)

	// What a running Caddy really exposes after some traffic.
	e := start(t, "zone examples\ntenant 1/m burst 1\nquota 10/day\nconcurrency 5")
	e.prove("valid-ex")
	e.call(1, "Authorization", "Bearer valid-ex")
	e.call(2, "Authorization", "Bearer valid-ex")
	text, samples := scrapeMetrics(t, e.caddy)
	series := map[string]bool{}
	for _, s := range samples {
		if s.labels["zone"] == "examples" {
			series[s.name] = true
		}
	}
	if status, _ := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil); status != http.StatusOK || text == "" {
		t.Fatal("no metrics")
	}
	declared := declaredMetrics(t)
	allowedLabels := map[string]bool{"zone": true, "layer": true, "kind": true, "result": true, "le": true}

	used := map[string]bool{}
	names := make([]string, 0, len(queries))
	for where := range queries {
		names = append(names, where)
	}
	sort.Strings(names)
	for _, where := range names {
		expr := queries[where]
		metrics, labels := promRefs(expr)
		if len(metrics) == 0 {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, m := range metrics {
			base := m
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b := strings.TrimSuffix(m, suf); b != m && declared[b] {
					base = b
				}
			}
			if !declared[base] {
				t.Errorf("%s: %s is not a metric metrics.go declares", where, m)
				continue
			}
			if !series[m] {
				t.Errorf("%s: %s does not appear on a running Caddy's /metrics", where, m)
			}
			used[base] = true
		}
		for _, l := range labels {
			if !allowedLabels[l] {
				t.Errorf("%s: label %q is not one the module exports", where, l)
			}
		}
	}
	// The examples cover what an operator watches.
	for _, m := range []string{"mcp_ratelimit_refusals_total", "mcp_ratelimit_quota_degraded", "mcp_ratelimit_inflight", "mcp_ratelimit_decision_seconds"} {
		if !used[m] {
			t.Errorf("no example query uses %s", m)
		}
	}
	var alertsOn []string
	for where, expr := range queries {
		if strings.HasPrefix(where, "alert ") {
			alertsOn = append(alertsOn, expr)
		}
	}
	all := strings.Join(alertsOn, "\n")
	for _, want := range []string{"mcp_ratelimit_refusals_total", "mcp_ratelimit_quota_degraded", "mcp_ratelimit_inflight", "mcp_ratelimit_decision_seconds_bucket"} {
		if !strings.Contains(all, want) {
			t.Errorf("no alert uses %s", want)
		}
	}
}
