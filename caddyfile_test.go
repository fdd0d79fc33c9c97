package mcplimit_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// adaptSite renders a whole Caddyfile whose one site holds reverse_proxy
// first and the mcp_ratelimit block after it (so the handler order in the
// output proves the registered directive order, not the user's).
func adaptSite(block string) string {
	site := "reverse_proxy 127.0.0.1:1\nmcp_ratelimit {\n" + block + "\n}"
	return harness.Config(site, "", 1, 2, "/nonexistent-storage", "")
}

// handlersInOrder returns every handler object of the adapted JSON in
// depth-first order (the order Caddy runs them in a route).
func handlersInOrder(v any) []map[string]any {
	var out []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["handler"].(string); ok {
				out = append(out, x)
			}
			// Deterministic order: walk "routes"/"handle" as arrays below;
			// map iteration order does not matter for the handlers we
			// collect because they only sit in arrays.
			for _, k := range []string{"apps", "http", "servers", "srv0", "routes", "handle"} {
				if c, ok := x[k]; ok {
					walk(c)
				}
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// adaptedHandler adapts block and returns the mcp_ratelimit handler's JSON
// without its "handler" key, checking it runs before reverse_proxy.
func adaptedHandler(t *testing.T, block string) map[string]any {
	t.Helper()
	js, err := harness.AdaptErr(adaptSite(block))
	if err != nil {
		t.Fatalf("adapt failed: %v\n%s", err, block)
	}
	var cfg any
	if err := json.Unmarshal(js, &cfg); err != nil {
		t.Fatal(err)
	}
	hs := handlersInOrder(cfg)
	var names []string
	var mine map[string]any
	for _, h := range hs {
		names = append(names, h["handler"].(string))
		if h["handler"] == "mcp_ratelimit" {
			if mine != nil {
				t.Fatalf("two mcp_ratelimit handlers in %s", js)
			}
			mine = h
		}
	}
	iM, iR := indexOf(names, "mcp_ratelimit"), indexOf(names, "reverse_proxy")
	if iM < 0 || iR < 0 || iM > iR {
		t.Fatalf("mcp_ratelimit must run before reverse_proxy without an order option; handlers %v in %s", names, js)
	}
	out := map[string]any{}
	for k, v := range mine {
		if k != "handler" {
			out[k] = v
		}
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

const fpA = "0123456789abcdef0123456789abcdef"

func TestCaddyfileEverySubdirectiveAdaptsToItsJSONField(t *testing.T) {
	cases := []struct {
		name  string
		block string
		want  string // the handler's JSON without "handler"
	}{
		{"empty block sets nothing (defaults apply at provision)", "", `{}`},
		{"zone", "zone api", `{"zone":"api"}`},
		{"identity one", "identity {http.request.header.X-Api-Key}", `{"identity":["{http.request.header.X-Api-Key}"]}`},
		{"identity several", "identity {http.request.header.X-Api-Key} {http.request.header.X-Org}",
			`{"identity":["{http.request.header.X-Api-Key}","{http.request.header.X-Org}"]}`},
		{"trust_identity", "trust_identity", `{"trust_identity":true}`},
		{"reject_status", "reject_status 401 403 404", `{"reject_status":[401,403,404]}`},
		{"known_ttl", "known_ttl 1h", `{"known_ttl":3600000000000}`},
		{"known_ttl days", "known_ttl 2d", `{"known_ttl":172800000000000}`},
		{"max_known", "max_known 500", `{"max_known":500}`},
		{"meter methods", "meter tools/call resources/read", `{"meter":["tools/call","resources/read"]}`},
		{"meter star", "meter *", `{"meter":["*"]}`},
		{"cost", "cost search 5\ncost photo 10", `{"costs":{"search":5,"photo":10}}`},
		{"max_body MiB", "max_body 2MiB", `{"max_body":2097152}`},
		{"max_body KB", "max_body 512KB", `{"max_body":512000}`},
		{"max_body at its bound", "max_body 1GiB", `{"max_body":1073741824}`},
		{"max_batch", "max_batch 8", `{"max_batch":8}`},
		{"preauth rate", "preauth 2/s", `{"preauth":{"rate":"2/s"}}`},
		{"preauth rate burst", "preauth 2/s burst 10", `{"preauth":{"rate":"2/s","burst":10}}`},
		{"preauth off", "preauth off", `{"preauth":{"off":true}}`},
		{"gateway", "gateway 10.0.0.0/8 192.0.2.7 30/m burst 60",
			`{"gateways":[{"cidrs":["10.0.0.0/8","192.0.2.7"],"rate":"30/m","burst":60}]}`},
		{"two gateways keep their order", "gateway 10.0.0.0/8 30/m\ngateway 2001:db8::/32 5/s burst 9",
			`{"gateways":[{"cidrs":["10.0.0.0/8"],"rate":"30/m"},{"cidrs":["2001:db8::/32"],"rate":"5/s","burst":9}]}`},
		{"tenant per minute", "tenant 20/m", `{"tenant":{"rate":"20/m"}}`},
		{"tenant burst", "tenant 5/s burst 20", `{"tenant":{"rate":"5/s","burst":20}}`},
		{"tenant per hour", "tenant 100/h", `{"tenant":{"rate":"100/h"}}`},
		{"tenant off", "tenant off", `{"tenant":{"off":true}}`},
		{"quota day", "quota 5000/day", `{"quota":{"day":5000}}`},
		{"quota day and month", "quota 5000/day\nquota 100000/month", `{"quota":{"day":5000,"month":100000}}`},
		{"quota off", "quota off", `{"quota":{"off":true}}`},
		{"quota day and month on one line", "quota 5000/day 100000/month", `{"quota":{"day":5000,"month":100000}}`},
		{"global", "global 50/s burst 100", `{"global":{"rate":"50/s","burst":100}}`},
		{"global off", "global off", `{"global":{"off":true}}`},
		{"anonymous", "anonymous 10/h", `{"anonymous":{"rate":"10/h"}}`},
		{"anonymous off", "anonymous off", `{"anonymous":{"off":true}}`},
		{"concurrency max and per identity", "concurrency 8 per_identity 2", `{"concurrency":{"max":8,"per_identity":2}}`},
		{"concurrency max", "concurrency 8", `{"concurrency":{"max":8}}`},
		{"concurrency per identity only", "concurrency per_identity 2", `{"concurrency":{"per_identity":2}}`},
		{"concurrency off", "concurrency off", `{"concurrency":{"off":true}}`},
		{"ipv4_prefix", "ipv4_prefix 24", `{"ipv4_prefix":24}`},
		{"ipv6_prefix", "ipv6_prefix 48", `{"ipv6_prefix":48}`},
		{"ipv6_prefix 128", "ipv6_prefix 128", `{"ipv6_prefix":128}`},
		{"flush_interval", "flush_interval 10s", `{"flush_interval":10000000000}`},
		{"error_code", "error_code -31000", `{"error_code":-31000}`},
		{"error_code positive", "error_code 42", `{"error_code":42}`},
		{"error_code just below reserved range", "error_code -32769", `{"error_code":-32769}`},
		{"refuse_with status", "refuse_with status", `{"refuse_with":"status"}`},
		{"refuse_with jsonrpc", "refuse_with jsonrpc", `{"refuse_with":"jsonrpc"}`},
		{"refuse_with tool_result", "refuse_with tool_result", `{"refuse_with":"tool_result"}`},
		{"group", "group {http.auth.user.org} 100/m", `{"group":{"key":"{http.auth.user.org}","rate":"100/m"}}`},
		{"group burst", "group {http.auth.user.org} 100/m burst 200",
			`{"group":{"key":"{http.auth.user.org}","rate":"100/m","burst":200}}`},
		{"group_quota", "group {http.auth.user.org} 100/m\ngroup_quota 1000/day\ngroup_quota 20000/month",
			`{"group":{"key":"{http.auth.user.org}","rate":"100/m"},"group_quota":{"day":1000,"month":20000}}`},
		{"tool full block", "tool analyze_photo {\ncost 5\nquota 20/day\nquota 150/month\narg limit max 100\narg depth max 2.5\nfail_closed\n}",
			`{"tools":{"analyze_photo":{"cost":5,"quota":{"day":20,"month":150},"args":{"limit":100,"depth":2.5},"fail_closed":true}}}`},
		{"tool quota periods on one line", "tool analyze_photo {\nquota 20/day 150/month\n}",
			`{"tools":{"analyze_photo":{"quota":{"day":20,"month":150}}}}`},
		{"two tools", "tool a {\ncost 2\n}\ntool b {\nfail_closed\n}", `{"tools":{"a":{"cost":2},"b":{"fail_closed":true}}}`},
		{"cost and a tool block without cost", "cost photo 3\ntool photo {\nquota 5/day\n}",
			`{"costs":{"photo":3},"tools":{"photo":{"quota":{"day":5}}}}`},
		{"store redis", "store redis redis://:secret@127.0.0.1:6379/2", `{"store":{"redis":{"url":"redis://:secret@127.0.0.1:6379/2"}}}`},
		{"store redis timeout", "store redis rediss://r.example:6380 {\ntimeout 100ms\n}",
			`{"store":{"redis":{"url":"rediss://r.example:6380","timeout":100000000}}}`},
		{"store redis env placeholder", "store redis {env.REDIS_URL}", `{"store":{"redis":{"url":"{env.REDIS_URL}"}}}`},
		{"store redis cluster", "store redis redis://:pw@10.0.0.1:7000?addr=10.0.0.2:7000 {\ncluster\ntimeout 100ms\n}",
			`{"store":{"redis":{"url":"redis://:pw@10.0.0.1:7000?addr=10.0.0.2:7000","cluster":true,"timeout":100000000}}}`},
		{"tier every limit", "tier paid {\nmatch {http.auth.user.plan} paid pro\ntenant 20/m\nquota 10000/month\nconcurrency 4 per_identity 2\ncost search 2\n}",
			`{"tiers":[{"name":"paid","match":{"placeholder":"{http.auth.user.plan}","values":["paid","pro"]},"tenant":{"rate":"20/m"},"quota":{"month":10000},"concurrency":{"max":4,"per_identity":2},"costs":{"search":2}}]}`},
		{"tiers keep their order", "tier paid {\nmatch {http.auth.user.plan} paid\ntenant 20/m\nquota 10000/month\n}\ntier trial {\nmatch {http.auth.user.plan} trial\ntenant 5/m\n}",
			`{"tiers":[{"name":"paid","match":{"placeholder":"{http.auth.user.plan}","values":["paid"]},"tenant":{"rate":"20/m"},"quota":{"month":10000}},{"name":"trial","match":{"placeholder":"{http.auth.user.plan}","values":["trial"]},"tenant":{"rate":"5/m"}}]}`},
		{"tier tenant off and quota off", "tier internal {\nmatch {http.auth.user.plan} internal\ntenant off\nquota off\n}",
			`{"tiers":[{"name":"internal","match":{"placeholder":"{http.auth.user.plan}","values":["internal"]},"tenant":{"off":true},"quota":{"off":true}}]}`},
		{"override", "override " + fpA + " {\ntenant 100/m burst 50\nquota 1000000/month\n}",
			`{"overrides":{"` + fpA + `":{"tenant":{"rate":"100/m","burst":50},"quota":{"month":1000000}}}}`},
		{"override concurrency and cost", "override " + fpA + " {\nconcurrency 10\ncost search 1\n}",
			`{"overrides":{"` + fpA + `":{"concurrency":{"per_identity":10},"costs":{"search":1}}}}`},
		{"dry_run", "dry_run", `{"dry_run":true}`},
		{"several at once", "zone api\ntenant 5/s burst 20\nquota 5000/day\ndry_run",
			`{"zone":"api","tenant":{"rate":"5/s","burst":20},"quota":{"day":5000},"dry_run":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := adaptedHandler(t, tc.block)
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatalf("bad expectation %s: %v", tc.want, err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Fatalf("block:\n%s\ngot  %s\nwant %s", tc.block, g, tc.want)
			}
		})
	}
}

func TestCaddyfileMatcherIsAppliedToTheHandlerRoute(t *testing.T) {
	site := "reverse_proxy 127.0.0.1:1\nmcp_ratelimit /mcp* {\ntenant 5/s\n}"
	js := harness.Adapt(t, harness.Config(site, "", 1, 2, "/nonexistent-storage", ""))
	s := string(js)
	iM, iR := strings.Index(s, `"mcp_ratelimit"`), strings.Index(s, `"reverse_proxy"`)
	if iM < 0 || iR < 0 || iM > iR {
		t.Fatalf("mcp_ratelimit must come before reverse_proxy: %s", js)
	}
	if !strings.Contains(s, `"path":["/mcp*"]`) {
		t.Fatalf("the matcher /mcp* is missing from the adapted route: %s", js)
	}
}

// lineOf returns the 1-based line of the first line of text containing marker.
func lineOf(t *testing.T, text, marker string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("marker %q not in\n%s", marker, text)
	return 0
}

func TestCaddyfileInvalidInputFailsAdaptNamingTheLine(t *testing.T) {
	cases := []struct {
		name   string
		block  string
		marker string // text on the offending line (its first occurrence); with a "block:" prefix any line of the block it opens may be named
		word   string // a word naming the problem, case-insensitive
	}{
		{"unknown subdirective", "tenant 5/s\nbogus 1", "bogus", "unknown subdirective"},
		{"typo of a subdirective", "tennant 5/s", "tennant", "unknown subdirective"},
		{"a block after zone", "zone a {\n}", "zone a", "takes no block"},
		{"a block after dry_run", "dry_run {\n}", "dry_run", "takes no block"},
		{"a block after fail_closed", "tool t {\nfail_closed {\n}\n}", "fail_closed", "takes no block"},
		{"a block after a tier's tenant", "tier t {\nmatch {http.auth.user.plan} x\ntenant 5/s {\n}\n}", "tenant 5/s", "takes no block"},
		{"a block after the store's timeout", "store redis redis://127.0.0.1:6379 {\ntimeout 10ms {\n}\n}", "timeout 10ms", "takes no block"},
		{"repeated tenant", "tenant 1/s\ntenant 2/s", "tenant 2/s", "more than once"},
		{"repeated zone", "zone a\nzone b", "zone b", "more than once"},
		{"repeated dry_run", "dry_run\ndry_run ", "dry_run ", "more than once"},
		{"repeated group", "group {a} 1/s\ngroup {b} 2/s", "group {b}", "more than once"},
		{"rate unit d", "tenant 5/d", "5/d", "unit"},
		{"rate unit week", "global 5/week", "5/week", "unit"},
		{"rate not a rate", "tenant abc", "abc", "rate"},
		{"rate zero", "tenant 0/s", "0/s", "positive"},
		{"rate negative", "tenant -1/s", "-1/s", "positive"},
		{"rate not integer", "preauth 1.5/s", "1.5/s", "positive"},
		{"rate empty count", "anonymous /s", "/s", "positive"},
		{"rate with a plus sign", "tenant +5/s", "+5/s", "positive"},
		{"burst zero", "tenant 5/s burst 0", "burst 0", "burst"},
		{"burst negative", "tenant 5/s burst -3", "burst -3", "burst"},
		{"burst not a number", "preauth 1/s burst many", "burst many", "burst"},
		{"burst keyword misspelt", "global 5/s brust 3", "brust", "burst"},
		{"rate with dangling burst", "tenant 5/s burst", "burst", "argument"},
		{"group burst zero", "group {org} 5/s burst 0", "burst 0", "burst"},
		{"group bad rate", "group {org} 5/d", "5/d", "unit"},
		{"group without rate", "group {org}", "group", "argument"},
		{"ipv4_prefix 33", "ipv4_prefix 33", "ipv4_prefix", "out of range"},
		{"ipv4_prefix 0", "ipv4_prefix 0", "ipv4_prefix", "out of range"},
		{"ipv4_prefix not a number", "ipv4_prefix x", "ipv4_prefix", "ipv4_prefix"},
		{"ipv6_prefix 0", "ipv6_prefix 0", "ipv6_prefix", "out of range"},
		{"ipv6_prefix 129", "ipv6_prefix 129", "ipv6_prefix", "out of range"},
		{"gateway bad CIDR", "gateway 10.0.0.300/8 5/s", "gateway", "CIDR"},
		{"gateway prefix too long", "gateway 10.0.0.0/33 5/s", "gateway", "CIDR"},
		{"gateway without CIDR", "gateway 5/s", "gateway", "no CIDR before the rate"},
		{"gateway with preauth off", "preauth off\ngateway 10.0.0.0/8 5/s", "gateway", "preauth is off"},
		{"gateway without rate", "gateway 10.0.0.0/8", "gateway", "no rate after the CIDRs"},
		{"gateway network twice", "gateway 10.0.0.0/8 5/s\ngateway 10.1.0.0/8 6/s", "gateway 10.1.0.0/8", "twice"},
		{"gateway address twice, once IPv4-mapped", "gateway 192.0.2.7 ::ffff:192.0.2.7 5/s", "gateway", "twice"},
		{"zone with a slash", "tenant 5/s\nzone a/b", "zone a/b", "slash"},
		{"zone with a space", `zone "my zone"`, "zone", "space"},
		{"zone dot dot", "zone ..", "zone ..", "directory"},
		{"zone dot", "zone .", "zone .", "directory"},
		{"zone with a closing brace", "zone }a", "zone }a", "braces"},
		{"zone with an opening brace", `zone "a{b"`, "zone", "braces"},
		{"zone with a byte that is not UTF-8", "zone a\xffb", "zone", "UTF-8"},
		{"zone empty", `zone ""`, "zone", "empty"},
		{"identity without a placeholder", "identity notaplaceholder", "identity", "no placeholder"},
		{"identity with an unclosed brace", "identity {http.request.header.X-Key", "identity", "no placeholder"},
		{"identity of global placeholders only", "identity {env.HOME} {system.hostname}-{time.now.year}", "identity {env.HOME}", "same for every caller"},
		{"identity of a file placeholder", "identity {file./etc/hostname}", "identity", "same for every caller"},
		{"identity of the server's side", "identity {http.request.local.port} {http.request.scheme}-{http.shutting_down}", "identity", "fresh identity"},
		{"identity with the method beside a key", "identity {http.request.header.X-Key} {http.request.method}", "identity", "fresh identity"},
		{"identity with the scheme around a key", "identity {http.request.scheme}{http.request.header.X-Key}", "identity", "fresh identity"},
		{"identity with the remote address and port", "identity {http.request.header.X-Key} {http.request.remote}", "identity", "fresh identity"},
		{"identity of the remote shorthand", "identity {remote}", "identity", "fresh identity"},
		{"identity with the clock beside a key", "identity {http.request.header.X-Key} {time.now.unix}", "identity", "reads the clock"},
		{"identity with the clock in a key's text", "identity {http.request.header.X-Key}-{time.now.unix_ms}", "identity", "reads the clock"},
		{"group key of the remote address and port", "group {http.request.remote} 5/s", "group", "fresh group"},
		{"group key with the clock", "group {http.auth.user.org}{time.now.unix} 5/s", "group", "reads the clock"},
		{"group key with the method in its text", "group {http.request.header.O}{http.request.method} 5/s", "group", "fresh group"},
		{"identity of two caller inputs in one text", "identity {http.request.header.A}/{http.request.header.B}", "identity", "run together"},
		{"identity of two caller inputs side by side", "identity {http.request.header.X-Key} key:{http.request.header.A}{http.auth.user.id}", "identity", "run together"},
		{"group key of two caller inputs in one text", "group {http.auth.user.org}-{http.request.header.X-Team} 5/s", "group", "run together"},
		{"group key without a placeholder", "group org 5/s", "group org", "no placeholder"},
		{"group key with an unclosed brace", "group {http.auth.user.org 5/s", "group", "no placeholder"},
		{"group key of the environment", "group {env.HOME} 5/s", "group", "same for every caller"},
		{"tier match without a placeholder", "tier gold {\nmatch plan gold\ntenant 10/s\n}", "match plan gold", "no placeholder"},
		{"tier match of the environment", "tier gold {\nmatch {env.HOME} /root\ntenant 10/s\n}", "match {env.HOME}", "same for every caller"},
		{"tier value of an earlier tier", "tier a {\nmatch {http.auth.user.plan} gold\ntenant 10/s\n}\ntier b {\nmatch {http.auth.user.plan} silver gold\ntenant 20/s\n}", "block:tier b", "never apply"},
		{"tier value of an earlier tier, header spelt otherwise", "tier a {\nmatch {http.request.header.X-Plan} gold\ntenant 10/s\n}\ntier b {\nmatch {http.request.header.x-plan} silver gold\ntenant 20/s\n}", "block:tier b", "never apply"},
		{"tier value empty", "tier a {\nmatch {http.request.header.X-Plan} \"\"\ntenant 10/s\n}", "block:tier a", "never apply"},
		{"flush_interval under the tick", "flush_interval 1ms", "flush_interval", "at least"},
		{"tool without a block", "tool echo", "tool echo", "sets nothing"},
		{"tool with an empty block", "tool echo {\n}", "tool echo", "sets nothing"},
		{"tool arg max NaN", "tool photo {\narg limit max NaN\n}", "arg limit", "number"},
		{"tool arg max Inf", "tool photo {\narg limit max -Inf\n}", "arg limit", "number"},
		{"store timeout twice", "store redis redis://127.0.0.1:6379 {\ntimeout 10ms\ntimeout 20ms\n}", "timeout 20ms", "more than once"},
		{"store redis password with a brace", "store redis redis://:QzS3{crT}@127.0.0.1:6379/0", "store redis", "percent-encode"},
		{"store redis without slashes", "store redis redis::pw@127.0.0.1", "store redis", "//"},
		{"store redis two ports", "store redis redis://127.0.0.1:6379:9", "store redis", "colon"},
		{"store redis addr without cluster", "store redis redis://127.0.0.1:6379?addr=127.0.0.1:6380", "store redis", "cluster"},
		{"store cluster twice", "store redis redis://127.0.0.1:7000 {\ncluster\ncluster\n}", "block:store redis", "more than once"},
		{"store cluster with an argument", "store redis redis://127.0.0.1:7000 {\ncluster yes\n}", "cluster yes", "argument"},
		{"store cluster with a DB", "store redis redis://127.0.0.1:7000/3 {\ncluster\n}", "block:store redis", "DB 0 alone"},
		{"store cluster with a bad addr", "store redis redis://127.0.0.1:7000?addr=10.0.0.2 {\ncluster\n}", "block:store redis", "addr"},
		{"tenant off with a burst", "tenant off burst 3", "tenant off", "no other arguments"},
		{"ipv6_prefix not a number", "ipv6_prefix abc", "ipv6_prefix", "number of bits"},
		{"meter empty method", `meter ""`, "meter", "empty"},
		{"meter off", "meter off", "meter", `"off" is not a method`},
		{"meter in capitals", "meter TOOLS/CALL", "meter", `did you mean "tools/call"`},
		{"meter misspelt", "meter tools/cal resources/read", "meter", `did you mean "tools/call"`},
		{"meter misspelt among others", "meter tools/call prompt/get", "meter", `did you mean "prompts/get"`},
		{"meter misspelt in capitals", "meter TOOLS/CAL", "meter", `did you mean "tools/call"`},
		{"meter with an invisible character", "meter tools/call\u200b", "meter", "U+200B"},
		{"meter with a look-alike letter", "meter t\u043e\u043els/call", "meter", `did you mean "tools/call"`},
		{"tool empty name", "tool \"\" {\ncost 2\n}", "tool", "tool"},
		{"tool named *", "tool * {\nquota 10/day\n}", "block:tool *", "no wildcard"},
		{"cost of tool *", "cost * 3", "cost * 3", "no wildcard"},
		{"cost of a placeholder", "cost {http.request.header.X-Tool} 3", "cost {http", "not replaced"},
		{"tool arg empty name", "tool photo {\narg \"\" max 3\n}", "arg", "arg"},
		{"tool arg of a placeholder", "tool photo {\narg {env.MCPRL_ARG} max 3\n}", "arg {env", "not replaced"},
		{"tier match value of a placeholder", "tier gold {\nmatch {http.auth.user.plan} gold {env.MCPRL_PAID}\ntenant 1/s\n}", "match {http", "not replaced"},
		{"group empty key", `group "" 5/s`, "group", "group"},
		{"store redis wrong scheme", "store redis http://127.0.0.1:6379", "store redis", "scheme"},
		{"store redis negative DB", "store redis redis://:pw@127.0.0.1:6379/-1", "store redis", "DB index"},
		{"store redis DB twice", "store redis redis://:pw@127.0.0.1:6379/1?db=3", "store redis", "DB is given twice"},
		{"store redis db parameter twice", "store redis redis://:pw@127.0.0.1:6379?db=1&db=2", "store redis", "db parameter is given more than once"},
		{"store redis pool_size twice", "store redis redis://127.0.0.1:6379?pool_size=5&pool_size=50", "store redis", "pool_size parameter is given more than once"},
		{"store redis port out of range", "store redis redis://127.0.0.1:99999", "store redis", "port"},
		{"store redis port zero", "store redis rediss://127.0.0.1:0/2", "store redis", "port"},
		{"store redis wrong scheme, with a block", "store redis http://127.0.0.1:6379 {\ntimeout 10ms\n}", "store redis", "scheme"},
		{"max_body not a size", "max_body lots", "max_body", "max_body"},
		{"max_body zero", "max_body 0", "max_body", "max_body"},
		{"max_body over 1GiB", "max_body 3GiB", "max_body", "at most"},
		{"max_batch zero", "max_batch 0", "max_batch", "positive"},
		{"max_batch negative", "max_batch -1", "max_batch", "positive"},
		{"max_known zero", "max_known 0", "max_known", "positive"},
		{"max_batch past JSON's exact integers", "max_batch 9223372036854775807", "max_batch", "at most"},
		{"max_known past 15 digits", "max_known 1000000000000000", "max_known", "at most"},
		{"max_batch with a sign", "max_batch +8", "max_batch", "positive integer"},
		{"concurrency past 15 digits", "concurrency 9223372036854775807", "concurrency", "at most"},
		{"concurrency per_identity past 15 digits", "concurrency 5 per_identity 9007199254740993", "concurrency", "at most"},
		{"burst with a sign", "tenant 5/s burst +3", "burst +3", "burst"},
		{"burst without a rate", "preauth burst 5", "preauth burst", "burst without a rate"},
		{"group burst without a rate", "group {http.request.header.X-Org} burst 5", "group {http", "burst without a rate"},
		{"quota with a sign", "quota +5/day", "quota", "quota"},
		{"cost with a sign", "cost echo +2", "cost", "positive integer"},
		{"tool cost with a sign", "tool echo {\ncost +2\n}", "cost +2", "positive integer"},
		{"known_ttl not a duration", "known_ttl forever", "known_ttl", "known_ttl"},
		{"known_ttl negative", "known_ttl -5s", "known_ttl", "known_ttl"},
		{"flush_interval not a duration", "flush_interval soon", "flush_interval", "flush_interval"},
		{"flush_interval zero", "flush_interval 0s", "flush_interval", "flush_interval"},
		{"refuse_with unknown", "refuse_with nope", "refuse_with", "refuse_with"},
		{"error_code -32000", "error_code -32000", "error_code", "error_code"},
		{"error_code -32768", "error_code -32768", "error_code", "error_code"},
		{"error_code MCP reserved", "error_code -32050", "error_code", "error_code"},
		{"error_code not a number", "error_code abc", "error_code", "error_code"},
		{"reject_status 5xx", "reject_status 401 503", "reject_status", "reject_status"},
		{"reject_status code twice", "reject_status 401 403 401", "reject_status", "listed twice"},
		{"meter method twice", "meter tools/call prompts/get tools/call", "meter", "meter \"tools/call\": listed twice"},
		{"identity placeholder twice", "identity {http.request.header.X-Key} {http.request.header.X-Key}", "identity", "listed twice"},
		{"quota week", "quota 5/week", "5/week", "quota"},
		{"quota zero", "quota 0/day", "0/day", "quota"},
		{"quota beyond 15 digits", "quota 1000000000000000/day", "quota", "999999999999999"},
		{"burst beyond 15 digits", "tenant 1/s burst 1000000000000000", "tenant", "999999999999999"},
		{"rate beyond 15 digits", "global 1000000000000000/s", "global", "999999999999999"},
		{"quota no period", "quota 5000", "quota 5000", "quota"},
		{"quota day twice", "quota 5/day\nquota 6/day", "quota 6/day", "more than once"},
		{"quota off then value", "quota off\nquota 6/day", "quota 6/day", "off"},
		{"quota day twice on one line", "quota 5/day 6/day", "quota 5/day", "more than once"},
		{"quota off with a value", "quota off 6/day", "quota off", "quota"},
		{"quota no value", "quota\ntenant 1/s", "quota", "argument"},
		{"group_quota week", "group {org} 1/s\ngroup_quota 5/week", "5/week", "quota"},
		{"group_quota off", "group {org} 1/s\ngroup_quota off", "group_quota off", `group_quota "off"`},
		{"group_quota month twice", "group {org} 1/s\ngroup_quota 5/month\ngroup_quota 6/month", "group_quota 6/month", "more than once"},
		{"concurrency zero", "concurrency 0", "concurrency", "concurrency"},
		{"concurrency per_identity zero", "concurrency 4 per_identity 0", "concurrency", "per_identity"},
		{"concurrency keyword misspelt", "concurrency 4 per_id 2", "concurrency", "per_identity"},
		{"concurrency off with a cap", "concurrency off per_identity 2", "concurrency", "off: takes no other arguments"},
		{"concurrency per_identity without its value", "concurrency 2 per_identity", "concurrency", "per_identity takes a positive integer, at most 999999999999999; none given"},
		{"concurrency cap and a stray word", "concurrency 2 foo", "concurrency", `concurrency 2: after the cap, want per_identity <positive integer, at most 999999999999999>, got "foo"`},
		{"concurrency cap and a number", "concurrency 2 2", "concurrency", `concurrency 2: after the cap, want per_identity`},
		{"concurrency per_identity alone without its value", "concurrency per_identity", "concurrency", "per_identity takes a positive integer, at most 999999999999999; none given"},
		{"meter star with names", "meter * tools/call", "meter", "combined"},
		{"meter no args", "meter", "meter", "argument"},
		{"trust_identity with an argument", "trust_identity yes", "trust_identity", "argument"},
		{"zone two args", "zone a b", "zone", "argument"},
		{"cost zero", "cost x 0", "cost x", "positive"},
		{"cost of an empty tool name", `cost "" 2`, "cost", "empty tool name"},
		{"cost beyond 15 digits", "cost x 9223372036854775807", "cost x", "999999999999999"},
		{"tool cost beyond 15 digits", "tool x {\ncost 1000000000000000\n}", "cost 1000000000000000", "999999999999999"},
		{"tier cost of an empty tool name", "tier a {\nmatch {http.auth.user.plan} gold\ncost \"\" 2\n}", "cost", "empty tool name"},
		{"error_code beyond 15 digits", "error_code 9223372036854775807", "error_code", "digits"},
		{"zone name too long", "zone zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "zone", "at most 64 bytes"},
		{"identity of escaped braces", `identity \{http.request.header.X-Api-Key\}`, "identity", "no placeholder"},
		{"identity of the original method", "identity {http.request.orig_method}", "identity", "fresh identity"},
		{"group key of escaped braces", `group \{x\} 5/s`, "group", "no placeholder"},
		{"tier match of the method", "tier gold {\nmatch {http.request.orig_method} POST\ntenant 10/s\n}", "match {http.request.orig_method}", "same for every caller"},
		{"cost twice for a tool", "cost x 1\ncost x 2", "cost x 2", "more than once"},
		{"cost then tool block with cost", "cost x 1\ntool x {\ncost 2\n}", "cost 2", "cost"},
		{"tool unknown field", "tool x {\nspeed 2\n}", "speed", "unknown subdirective"},
		{"tool cost zero", "tool x {\ncost 0\n}", "cost 0", "positive"},
		{"tool quota week", "tool x {\nquota 3/week\n}", "3/week", "quota"},
		{"tool quota month twice", "tool x {\nquota 3/month\nquota 4/day 5/month\n}", "4/day", "more than once"},
		{"tool arg without max", "tool x {\narg limit 5\n}", "arg limit", "arg"},
		{"tool arg max without a bound", "tool x {\narg size max\n}", "arg size", "with one number"},
		{"tool arg min", "tool x {\narg size min 5\n}", "arg size", `unknown bound "min"`},
		{"tool arg without a name", "tool x {\narg\n}", "arg", "arg without a name"},
		{"gateway zero rate", "gateway 10.0.0.0/8 0/s", "gateway", "<n> must be a positive integer"},
		{"gateway negative rate", "gateway 10.0.0.0/8 -1/s", "gateway", "<n> must be a positive integer"},
		{"gateway fractional rate", "gateway 10.0.0.0/8 1.5/s", "gateway", "<n> must be a positive integer"},
		{"gateway rate per day", "gateway 10.0.0.0/8 5/d", "gateway", "unit must be s, m or h"},
		{"gateway bare number", "gateway 10.0.0.0/8 5", "gateway", "want <n>/<s|m|h>"},
		{"gateway off", "gateway 10.0.0.0/8 off", "gateway", "a gateway has no off"},
		{"gateway bad second CIDR", "gateway 10.0.0.0/8 2001:db8::/129 5/s", "gateway", `"2001:db8::/129": not a CIDR or address`},
		{"gateway short CIDR", "gateway 10/8 5/s", "gateway", `"10/8": not a CIDR or address`},
		{"gateway host name", "gateway localhost 5/s", "gateway", `"localhost": not a CIDR or address`},
		{"gateway word among CIDRs", "gateway 10.0.0.0/8 lan 5/s", "gateway", `"lan": not a CIDR or address`},
		{"gateway short CIDR among CIDRs", "gateway 10.0.0.0/8 10/8 5/s", "gateway", `"10/8": not a CIDR or address`},
		{"gateway fractional bare number", "gateway 10.0.0.0/8 1.5", "gateway", "want <n>/<s|m|h>"},
		{"error_code too large", "error_code 99999999999999999999", "error_code", "at most 15 digits"},
		{"flush_interval too long", "flush_interval 99999999h", "flush_interval", "too long: at most 2562047h"},
		{"known_ttl too long in days", "known_ttl 9999999999d", "known_ttl", "too long"},
		{"tool arg bound not a number", "tool x {\narg limit max big\n}", "arg limit", "number"},
		{"tool arg bound with digit separators", "tool x {\narg limit max 1_000\n}", "arg limit", "decimal number"},
		{"tool arg bound in hexadecimal", "tool x {\narg limit max 0x1p4\n}", "arg limit", "decimal number"},
		{"tool arg bound with a plus sign", "tool x {\narg limit max +5\n}", "arg limit", "decimal number"},
		{"error_code with a plus sign", "error_code +5", "error_code", "non-zero integer"},
		{"tool twice", "tool x {\ncost 2\n}\ntool  x {\ncost 3\n}", "block:tool  x", "more than once"},
		{"store not redis", "store memcached 127.0.0.1:11211", "store", "redis"},
		{"store redis timeout bad", "store redis redis://h:1 {\ntimeout soon\n}", "timeout", "timeout"},
		{"tier with no limits", "tier free {\nmatch {http.auth.user.plan} free\n}", "block:tier free", "no limits"},
		{"tier match without value", "tier free {\nmatch {http.auth.user.plan}\ntenant 1/s\n}", "match", "match"},
		{"tier match value twice", "tier free {\ntenant 1/s\nmatch {http.auth.user.plan} free trial free\n}", "match {http.auth.user.plan}", "listed twice"},
		{"tier quota too large", "tier paid {\nmatch {http.auth.user.plan} paid\nquota 1000000000000000/month\n}", "quota 1000000000000000", "at most"},
		{"override burst too large", "override " + fpA + " {\ntenant 5/s burst 1000000000000000\n}", "burst 1000000000000000", "at most"},
		{"tool quota too large", "tool photo {\ncost 2\nquota 1000000000000000/day\n}", "quota 1000000000000000", "at most"},
		{"tier without match", "tier free {\ntenant 1/s\n}", "block:tier free", "match"},
		{"tier unknown field", "tier free {\nmatch {p} free\nspeed 5\n}", "speed", "unknown subdirective"},
		{"tier bad rate", "tier free {\nmatch {p} free\ntenant 1/d\n}", "tenant 1/d", "unit"},
		{"tier twice", "tier a {\nmatch {p} a\ntenant 1/s\n}\ntier  a {\nmatch {p} b\ntenant 2/s\n}", "block:tier  a", "more than once"},
		{"override bad fingerprint", "override XYZ {\ntenant 1/s\n}", "override XYZ", "fingerprint"},
		{"override uppercase fingerprint", "override " + strings.ToUpper(fpA) + " {\ntenant 1/s\n}", "override", "fingerprint"},
		{"override short fingerprint", "override " + fpA[:31] + " {\ntenant 1/s\n}", "override", "fingerprint"},
		{"override non-hex fingerprint", "override " + strings.Repeat("g", 32) + " {\ntenant 1/s\n}", "override", "fingerprint"},
		{"override with no limits", "override " + fpA + " {\n}", "block:override", "no limits"},
		{"override unknown field", "override " + fpA + " {\nmatch {p} x\n}", "match", "unknown subdirective"},
		{"error_code zero", "error_code 0", "error_code", "non-zero"},
		{"error_code past 15 digits, negative", "error_code -1000000000000000", "error_code", "15 digits"},
		{"quota value then off", "quota 5/day\nquota off", "quota off", "cannot be combined"},
		{"tool cost twice", "tool x {\ncost 2\ncost 3\n}", "cost 3", "more than once"},
		{"tool arg twice", "tool x {\narg limit max 5\narg limit max 500\n}", "arg limit max 500", "more than once"},
		{"tier tenant twice", "tier a {\nmatch {http.auth.user.plan} a\ntenant 1/s\ntenant 9/s\n}", "tenant 9/s", "more than once"},
		{"override concurrency twice", "override " + fpA + " {\nconcurrency 2\nconcurrency 3\n}", "concurrency 3", "more than once"},
		{"override twice", "override " + fpA + " {\ntenant 1/s\n}\noverride  " + fpA + " {\ntenant 2/s\n}", "block:override  " + fpA, "more than once"},
		{"identity without arguments", "identity", "identity", "argument"},
		{"reject_status without arguments", "reject_status", "reject_status", "argument"},
		{"group_quota without group", "group_quota 100/day", "group_quota", "requires group"},
		{"identity error after group_quota before group", "group_quota 100/day\ngroup {http.auth.user.org} 5/s\nidentity notaplaceholder", "identity notaplaceholder", "no placeholder"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := adaptSite(tc.block)
			_, err := harness.AdaptErr(cfg)
			if err == nil {
				t.Fatalf("adapt accepted invalid input:\n%s", tc.block)
			}
			marker, whole := strings.CutPrefix(tc.marker, "block:")
			first := lineOf(t, cfg, marker)
			last := first
			if whole {
				last = blockEnd(t, cfg, first)
			}
			m := regexp.MustCompile(`Caddyfile:(\d+)\b`).FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("error names no Caddyfile line: %v", err)
			}
			if n, _ := strconv.Atoi(m[1]); n < first || n > last {
				t.Errorf("error names line %d, want %d..%d (the %q line): %v", n, first, last, tc.marker, err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.word)) {
				t.Errorf("error does not say %q: %v", tc.word, err)
			}
		})
	}
}

// blockEnd returns the line of the closing brace of the block opened on
// line first.
func blockEnd(t *testing.T, text string, first int) int {
	t.Helper()
	depth := 0
	for i, l := range strings.Split(text, "\n")[first-1:] {
		depth += strings.Count(l, "{") - strings.Count(l, "}")
		if depth <= 0 && strings.TrimSpace(l) == "}" {
			return first + i
		}
	}
	t.Fatalf("no closing brace for line %d", first)
	return 0
}

// adaptThenLoad adapts block; if adapt refuses it, the error must name the
// line of marker; otherwise loading the config into Caddy must fail. It
// returns the error seen.
func adaptThenLoad(t *testing.T, block, marker string) error {
	t.Helper()
	site := "reverse_proxy 127.0.0.1:1\nmcp_ratelimit {\n" + block + "\n}"
	cfg := harness.Config(site, "", harness.FreePort(t), harness.FreePort(t), t.TempDir(), "")
	js, err := harness.AdaptErr(cfg)
	if err != nil {
		line := lineOf(t, cfg, marker)
		if !regexp.MustCompile(fmt.Sprintf(`Caddyfile:%d\b`, line)).MatchString(err.Error()) {
			t.Errorf("adapt error does not name line %d: %v", line, err)
		}
		t.Logf("refused at adapt: %v", err)
		return err
	}
	err = caddy.Load(js, true)
	t.Logf("adapt passed; refused at load: %v", err)
	if err == nil {
		_ = caddy.Stop()
		t.Fatalf("Caddy loaded an invalid config:\n%s", block)
	}
	return err
}

// The largest values the docs allow adapt: a zone name of 64 bytes, a
// rate of 999999999999999 and an error_code of as many digits.
func TestCaddyfileAcceptsTheLargestDocumentedValues(t *testing.T) {
	block := "zone " + strings.Repeat("z", 64) + "\nglobal 999999999999999/s\nerror_code -999999999999999"
	if _, err := harness.AdaptErr(adaptSite(block)); err != nil {
		t.Fatalf("adapt refused the largest documented values: %v", err)
	}
}

// An argument after the directive's name (a zone written there, or a
// matcher missing its slash) fails adapt: the block after it would
// otherwise be dropped whole, and the handler run on defaults.
func TestCaddyfileArgumentAfterTheDirectiveFailsAdapt(t *testing.T) {
	for _, site := range []string{"reverse_proxy 127.0.0.1:1\nmcp_ratelimit foo {\ntenant 5/s\n}", "reverse_proxy 127.0.0.1:1\nmcp_ratelimit api"} {
		cfg := harness.Config(site, "", 1, 2, "/nonexistent-storage", "")
		_, err := harness.AdaptErr(cfg)
		if err == nil || !strings.Contains(err.Error(), "argument") {
			t.Fatalf("adapt of %q: %v, want an error about the argument", site, err)
		}
		if line := lineOf(t, cfg, "mcp_ratelimit"); !strings.Contains(err.Error(), fmt.Sprintf("Caddyfile:%d", line)) {
			t.Errorf("error does not name line %d: %v", line, err)
		}
	}
}

func TestCaddyfileGroupQuotaWithoutGroupIsAConfigError(t *testing.T) {
	err := adaptThenLoad(t, "group_quota 1000/day", "group_quota")
	if !strings.Contains(err.Error(), "group_quota") || !strings.Contains(err.Error(), "group") {
		t.Fatalf("error does not name group_quota: %v", err)
	}
}

func TestCaddyfileToolCostBeforeCostShorthandFailsAdapt(t *testing.T) {
	// The reverse order of `cost x 1` + `tool x { cost 2 }`: the tool
	// block comes first, the shorthand second.
	cfg := adaptSite("tool x {\ncost 2\n}\ncost x 1")
	_, err := harness.AdaptErr(cfg)
	if err == nil {
		t.Fatal("adapt accepted a tool cost given twice")
	}
	if line := lineOf(t, cfg, "cost x 1"); !strings.Contains(err.Error(), fmt.Sprintf("Caddyfile:%d", line)) {
		t.Errorf("error does not name line %d: %v", line, err)
	}
	if !strings.Contains(err.Error(), "cost") {
		t.Fatalf("error does not name the cost conflict: %v", err)
	}
}
