package mcplimit_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	mcplimit "github.com/mcpratelimit/caddy-mcp-ratelimit"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// validateJSON decodes js into a fresh Handler and validates it, turning a
// panic into a test failure.
func validateJSON(t *testing.T, js string) (err error) {
	t.Helper()
	var h mcplimit.Handler
	if err := json.Unmarshal([]byte(js), &h); err != nil {
		t.Fatalf("decoding %s: %v", js, err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Validate panicked on %s: %v", js, r)
		}
	}()
	return h.Validate()
}

func TestValidateRejectsEveryInvalidJSONValueNamingTheField(t *testing.T) {
	fp := "0123456789abcdef0123456789abcdef"
	cases := []struct {
		js   string
		word string // names the field at fault
	}{
		{`{"tenant":{"rate":"0/s"}}`, "tenant"},
		{`{"quota":{"off":true,"month":5}}`, "quota"},
		{`{"error_code":-1000000000000000}`, "error_code"},
		{`{"tenant":{"rate":"-1/s"}}`, "tenant"},
		{`{"tenant":{"rate":"5/d"}}`, "tenant"},
		{`{"tenant":{"rate":"abc"}}`, "tenant"},
		{`{"tenant":{"burst":-1}}`, "burst"},
		{`{"preauth":{"burst":-2}}`, "preauth"},
		{`{"preauth":{"rate":"1/week"}}`, "preauth"},
		{`{"global":{"rate":"0/m"}}`, "global"},
		{`{"anonymous":{"rate":"x"}}`, "anonymous"},
		{`{"anonymous":{"burst":-1,"rate":"1/s"}}`, "anonymous"},
		{`{"max_batch":-1}`, "max_batch"},
		{`{"max_known":-5}`, "max_known"},
		{`{"max_known":1000000000000000}`, "max_known"},
		{`{"max_batch":9007199254740992}`, "max_batch"},
		{`{"concurrency":{"max":1000000000000000}}`, "concurrency"},
		{`{"concurrency":{"per_identity":1000000000000000}}`, "per_identity"},
		{`{"max_body":-1}`, "max_body"},
		{`{"max_body":3221225472}`, "at most"},
		{`{"known_ttl":-1}`, "known_ttl"},
		{`{"flush_interval":-1000000000}`, "flush_interval"},
		{`{"ipv4_prefix":40}`, "ipv4_prefix"},
		{`{"ipv4_prefix":-1}`, "ipv4_prefix"},
		{`{"ipv6_prefix":129}`, "ipv6_prefix"},
		{`{"ipv6_prefix":-64}`, "ipv6_prefix"},
		{`{"error_code":-32001}`, "error_code"},
		{`{"error_code":-32000}`, "error_code"},
		{`{"error_code":-32768}`, "error_code"},
		{`{"refuse_with":"nope"}`, "refuse_with"},
		{`{"zone":".."}`, "zone"},
		{`{"identity":["constant"]}`, "identity"},
		{`{"tools":{"echo":{}}}`, "echo"},
		{`{"reject_status":[500]}`, "reject_status"},
		{`{"reject_status":[200]}`, "reject_status"},
		{`{"reject_status":[401,401]}`, "listed twice"},
		{`{"meter":["tools/call","tools/call"]}`, "meter \"tools/call\": listed twice"},
		{`{"identity":["{http.request.header.A}","{http.request.header.A}"]}`, "identity \"{http.request.header.A}\": reads what \"{http.request.header.A}\" reads, listed twice"},
		{`{"identity":["{http.request.header.X-Key}","{http.request.uri.query.k}","{http.request.header.x-key}"]}`, "identity \"{http.request.header.x-key}\": reads what \"{http.request.header.X-Key}\" reads, listed twice"},
		{`{"zone":"a/b"}`, "zone"},
		{`{"zone":"a b"}`, "zone"},
		{`{"zone":"a\u0000b"}`, "control"},
		{`{"preauth":{"off":true},"gateways":[{"cidrs":["10.0.0.0/8"],"rate":"5/s"}]}`, "preauth is off"},
		{`{"zone":"a\u007fb"}`, "control"},
		{`{"zone":"paid\u00a0plan"}`, "spaces"},
		{`{"zone":"a\u200bb"}`, "invisible"},
		{`{"zone":"a\ufffdb"}`, "UTF-8"},
		{`{"tools":{"photo":null}}`, "photo"},
		{`{"identity":["{http.request.header.A}","{http.request.tls.version}"]}`, "fresh identity"},
		{`{"meter":["*","tools/call"]}`, "meter"},
		{`{"meter":[""]}`, "meter"},
		{`{"meter":["off"]}`, "meter"},
		{`{"meter":["Tools/Call"]}`, "did you mean"},
		{`{"meter":["TOOLS/CAL"]}`, `did you mean "tools/call"`},
		{`{"meter":["tools/call\u200b"]}`, "U+200B"},
		{`{"meter":["tools\uff0fcall"]}`, `did you mean "tools/call"`},
		{`{"costs":{"x":0}}`, "cost"},
		{`{"costs":{"x":-3}}`, "cost"},
		{`{"quota":{"day":-1}}`, "quota"},
		{`{"quota":{"month":-1}}`, "quota"},
		{`{"quota":{"off":true,"day":5}}`, "quota"},
		{`{"tenant":{"off":true,"rate":"5/s"}}`, "tenant"},
		{`{"global":{"off":true,"burst":5}}`, "global"},
		{`{"anonymous":{"burst":5}}`, "anonymous"},
		{`{"gateways":[{"cidrs":["10.0.0.0/8"],"rate":"1/s"},{"cidrs":["10.1.0.0/8"],"rate":"2/s"}]}`, "gateway"},
		{`{"concurrency":{"max":-1}}`, "concurrency"},
		{`{"concurrency":{"per_identity":-1}}`, "concurrency"},
		{`{"concurrency":{"off":true,"max":2}}`, "off"},
		{`{"concurrency":{"off":true,"per_identity":2}}`, "off"},
		{`{"gateways":[{}]}`, "gateway"},
		{`{"gateways":[{"cidrs":["nope"],"rate":"1/s"}]}`, "gateway"},
		{`{"gateways":[{"cidrs":["10.0.0.0/8"]}]}`, "gateway"},
		{`{"gateways":[{"cidrs":["10.0.0.0/8"],"rate":"1/d"}]}`, "gateway"},
		{`{"gateways":[{"cidrs":["10.0.0.0/8"],"rate":"1/s","burst":-1}]}`, "gateway"},
		{`{"group_quota":{"day":5}}`, "group_quota"},
		{`{"group":{"rate":"1/s"}}`, "group"},
		{`{"group":{"key":"{http.auth.user.org}"}}`, "group"},
		{`{"group":{"key":"{http.auth.user.org}","rate":"1/d"}}`, "group"},
		{`{"group":{"key":"{http.auth.user.org}","rate":"1/s"},"group_quota":{"day":-5}}`, "group_quota"},
		{`{"tools":{"x":{"cost":-1}}}`, "tool x"},
		{`{"tools":{"x":{"quota":{"day":-1}}}}`, "tool x"},
		{`{"tools":{"x":{"quota":{"off":true}}}}`, "tool x quota"},
		{`{"group":{"key":"{http.auth.user.org}","rate":"5/s"},"group_quota":{"off":true}}`, "group_quota"},
		{`{"tools":{"x":{"args":{"":5}}}}`, "tool x"},
		{`{"tools":{"x":{"args":{"{env.MCPRL_ARG}":5}}}}`, "not replaced"},
		{`{"tiers":[{"name":"p","match":{"placeholder":"{http.auth.user.plan}","values":["{env.MCPRL_PAID}"]},"tenant":{"rate":"1/s"}}]}`, "not replaced"},
		{`{"tools":{"":{"cost":1}}}`, "tool"},
		{`{"costs":{"":2}}`, "empty tool name"},
		{`{"costs":{"x":1000000000000000}}`, "cost x"},
		{`{"tiers":[{"name":"p","match":{"placeholder":"{http.auth.user.plan}","values":["p"]},"tenant":{}}]}`, "sets no limits"},
		{`{"tiers":[{"name":"p","match":{"placeholder":"{http.auth.user.plan}","values":["p"]},"concurrency":{}}]}`, "sets no limits"},
		{`{"overrides":{"` + fp + `":{"tenant":{}}}}`, "sets no limits"},
		{`{"overrides":{"` + fp + `":{"quota":{},"concurrency":{}}}}`, "sets no limits"},
		{`{"tools":{"x":{"cost":1000000000000000}}}`, "tool x"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b"]},"costs":{"":1}}]}`, "tier x"},
		{`{"error_code":1000000000000000}`, "error_code"},
		{`{"zone":"` + strings.Repeat("z", 65) + `"}`, "zone"},
		{`{"identity":["\\{http.request.header.X-Api-Key\\}"]}`, "no placeholder"},
		{`{"identity":["{http.request.orig_method}"]}`, "fresh identity"},
		{`{"identity":["{http.request.header.A}","{http.request.proto}"]}`, "fresh identity"},
		{`{"identity":["{http.request.header.A}{http.request.cookie.b}"]}`, "run together"},
		{`{"group":{"key":"{http.auth.user.org}/{http.auth.user.id}","rate":"5/s"}}`, "run together"},
		{`{"group":{"key":"{http.request.orig_method}","rate":"1/s"}}`, "fresh group"},
		{`{"costs":{"x":1},"tools":{"x":{"cost":2}}}`, "tool x"},
		{`{"costs":{"*":2}}`, "no wildcard"},
		{`{"tools":{"*":{"cost":2}}}`, "no wildcard"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b"]},"costs":{"{c}":2}}]}`, "not replaced"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b"]}}]}`, "tier x"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}"},"tenant":{"rate":"1/s"}}]}`, "tier x"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b","b"]},"tenant":{"rate":"1/s"}}]}`, "listed twice"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":[null]},"tenant":{"rate":"1/s"}}]}`, "never apply"},
		{`{"tiers":[{"name":"x","match":{"values":["b"]},"tenant":{"rate":"1/s"}}]}`, "tier x"},
		{`{"tiers":[{"match":{"placeholder":"{a}","values":["b"]},"tenant":{"rate":"1/s"}}]}`, "tier"},
		{`{"tiers":[{}]}`, "tier"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b"]},"tenant":{"rate":"1/d"}}]}`, "tier x"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b"]},"costs":{"s":0}}]}`, "tier x"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b"]},"quota":{"day":-1}}]}`, "tier x"},
		{`{"tiers":[{"name":"x","match":{"placeholder":"{a}","values":["b"]},"tenant":{"rate":"1/s"}},{"name":"x","match":{"placeholder":"{a}","values":["c"]},"tenant":{"rate":"2/s"}}]}`, "tier x"},
		{`{"overrides":{"XYZ":{"tenant":{"rate":"1/s"}}}}`, "override"},
		{`{"overrides":{"` + strings.ToUpper(fp) + `":{"tenant":{"rate":"1/s"}}}}`, "override"},
		{`{"overrides":{"` + fp + `":null}}`, "override"},
		{`{"overrides":{"` + fp + `":{}}}`, "override"},
		{`{"overrides":{"` + fp + `":{"tenant":{"rate":"9/d"}}}}`, "override"},
		{`{"overrides":{"` + fp + `":{"concurrency":{"max":-1}}}}`, "override"},
		{`{"store":{"redis":{}}}`, "redis"},
	}
	for _, tc := range cases {
		t.Run(tc.js, func(t *testing.T) {
			err := validateJSON(t, tc.js)
			if err == nil {
				t.Fatalf("Validate accepted %s", tc.js)
			}
			if !strings.Contains(err.Error(), tc.word) {
				t.Fatalf("error does not name %q: %v", tc.word, err)
			}
		})
	}
}

func TestValidateAcceptsValidJSON(t *testing.T) {
	fp := "0123456789abcdef0123456789abcdef"
	for _, js := range []string{
		`{}`,
		`{"store":{}}`,
		`{"tenant":{"off":true},"quota":{"off":true},"global":{"off":true},"preauth":{"off":true}}`,
		`{"tenant":{"rate":"20/m"},"quota":{"day":5000,"month":100000}}`,
		`{"error_code":-31004}`, `{"error_code":-32769}`, `{"error_code":-31999}`, `{"error_code":1}`,
		`{"ipv4_prefix":1,"ipv6_prefix":128}`,
		`{"meter":["*"]}`,
		`{"meter":["roots/list","notifications/tools/list_changed","acme/search"]}`,
		`{"group":{"key":"{http.auth.user.org}","rate":"100/m","burst":5},"group_quota":{"month":10}}`,
		`{"costs":{"x":1},"tools":{"x":{"quota":{"day":5},"args":{"limit":100},"fail_closed":true}}}`,
		`{"tiers":[{"name":"paid","match":{"placeholder":"{a}","values":["p"]},"tenant":{"rate":"20/m"},"quota":{"month":10000}},{"name":"trial","match":{"placeholder":"{a}","values":["t"]},"tenant":{"rate":"5/m"}}]}`,
		`{"overrides":{"` + fp + `":{"tenant":{"rate":"100/m","burst":50},"quota":{"off":true}}}}`,
		// `{}` sets nothing, beside a limit that is set.
		`{"tiers":[{"name":"paid","match":{"placeholder":"{a}","values":["p"]},"tenant":{"rate":"20/m"},"quota":{},"concurrency":{}}]}`,
		`{"overrides":{"` + fp + `":{"tenant":{"rate":"100/m"},"quota":{}}}}`,
		// An empty quota is one left out, as an empty rate limit is.
		`{"quota":{}}`, `{"quota":{"day":0}}`, `{"group_quota":{}}`,
		`{"group":{"key":"{http.auth.user.org}","rate":"1/s"},"group_quota":{}}`,
		`{"store":{"redis":{"url":"redis://127.0.0.1:1"}}}`,
		`{"identity":["{env.TENANT_PREFIX}{http.request.header.X-Api-Key}","{system.hostname}"]}`,
		`{"identity":["{env.HOME}","{http.auth.user.id}"]}`,
		`{"identity":["{system.os}:{http.request.header.X-Api-Key}{http.request.header.X-Api-Key}"]}`,
		`{"identity":["{http.request.host}"]}`,
		`{"identity":["{http.request.remote.host}"]}`,
		`{"group":{"key":"{http.request.remote.host}","rate":"5/s"}}`,
		// The largest values the docs allow.
		`{"zone":"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz","global":{"rate":"999999999999999/s"},"error_code":-999999999999999}`,
	} {
		if err := validateJSON(t, js); err != nil {
			t.Errorf("Validate refused valid %s: %v", js, err)
		}
	}
}

// Every Caddyfile the adapter accepts without a cross-field problem must
// also validate as JSON: adapt output is editable and POSTable.
func TestValidateAcceptsAdaptOutput(t *testing.T) {
	block := "zone api\nidentity {http.request.header.X-Key}\nreject_status 401\nknown_ttl 1h\nmax_known 10\n" +
		"meter tools/call\ncost search 2\nmax_body 1KiB\nmax_batch 4\npreauth 1/s burst 2\ngateway 10.0.0.0/8 5/s\n" +
		"tenant 5/s burst 20\nquota 5000/day\nquota 9000/month\nglobal 100/s\nanonymous 1/s\nconcurrency 4 per_identity 1\n" +
		"ipv4_prefix 24\nipv6_prefix 56\nflush_interval 5s\nerror_code -31000\nrefuse_with jsonrpc\n" +
		"group {http.auth.user.org} 10/s\ngroup_quota 100/day\ntool photo {\ncost 3\nquota 20/day\narg n max 5\nfail_closed\n}\n" +
		"tier paid {\nmatch {http.auth.user.plan} paid\ntenant 20/m\n}\n" +
		"override 0123456789abcdef0123456789abcdef {\ntenant 1/s\n}\ndry_run"
	got := adaptedHandler(t, block)
	js, _ := json.Marshal(got)
	if err := validateJSON(t, string(js)); err != nil {
		t.Fatalf("adapt output does not validate: %v\n%s", err, js)
	}
}

// An invalid JSON value surfaces as a load error from Caddy naming the
// field, and a typo'd field name is refused rather than ignored.
func TestLoadingInvalidJSONIntoCaddyFailsNamingTheField(t *testing.T) {
	for _, tc := range []struct{ handler, word string }{
		{`{"handler":"mcp_ratelimit","tenant":{"rate":"0/s"}}`, "tenant"},
		{`{"handler":"mcp_ratelimit","ipv4_prefix":40}`, "ipv4_prefix"},
		{`{"handler":"mcp_ratelimit","tenat":{"rate":"1/s"}}`, "tenat"},
		// encoding/json reads a null bound as 0, a bound that refuses
		// every value of the argument.
		{`{"handler":"mcp_ratelimit","tools":{"photo":{"args":{"size": null}}}}`, "tools.photo.args.size: null is no bound"},
		{`{"handler":"mcp_ratelimit","tools":{"photo":{"args":{"size":"9"}}}}`, "tools.photo.args.size: json: cannot unmarshal string"},
		// A value a type decodes itself says only what is wrong with it;
		// the error names where it is.
		{`{"handler":"mcp_ratelimit","known_ttl":"abc"}`, `known_ttl: time: invalid duration "abc"`},
		{`{"handler":"mcp_ratelimit","store":{"redis":{"url":"redis://127.0.0.1:1","timeout":"5"}}}`, "store.redis.timeout: time: missing unit"},
		{`{"handler":"mcp_ratelimit","tiers":[{"name":"a","match":{"placeholder":"{x}","values":["a"]}},{"name":"b","tenant":{"rate":"1/s","brust":3}}]}`, `tiers[1].tenant: json: unknown field "brust"`},
		{`{"handler":"mcp_ratelimit","max_known":"9"}`, "max_known: json: cannot unmarshal string into a value of type int"},
		// Two spellings of one field, each decoding alone: the decoder's
		// own error, naming the handler's type.
		{`{"handler":"mcp_ratelimit","max_known":9,"MAX_KNOWN":"9"}`, "Go struct field Handler.max_known of type int"},
		{`{"handler":"mcp_ratelimit","tiers":[{"name":"a","match":{"placeholder":"{x}","values":["a"]}},{"name":"b","tenant":{"burst":"3"}}]}`, "tiers[1].tenant.burst: json: cannot unmarshal string"},
		{`{"handler":"mcp_ratelimit","costs":{"slow":"2"}}`, "costs.slow: json: cannot unmarshal string"},
		// encoding/json reads a null cost as 0, which the cost check would
		// then quote.
		{`{"handler":"mcp_ratelimit","costs":{"slow":null}}`, "costs.slow: null is no cost"},
		// A key spelt in another case, which encoding/json takes, is named
		// where it is too.
		{`{"handler":"mcp_ratelimit","Tiers":[{"name":"a","tenant":{"brust":1}}]}`, `tiers[0].tenant: json: unknown field "brust"`},
		{`{"handler":"mcp_ratelimit","overrides":{"0123456789abcdef0123456789abcdef":{"costs":{"slow":null}}}}`, "overrides.0123456789abcdef0123456789abcdef.costs.slow: null is no cost"},
	} {
		cfg := `{"admin":{"listen":"127.0.0.1:` + itoa(harness.FreePort(t)) + `","config":{"persist":false}},` +
			`"storage":{"module":"file_system","root":"` + t.TempDir() + `"},` +
			`"apps":{"http":{"servers":{"srv0":{"listen":["127.0.0.1:` + itoa(harness.FreePort(t)) + `"],` +
			`"automatic_https":{"disable":true},"routes":[{"handle":[` + tc.handler + `,{"handler":"static_response","body":"ok"}]}]}}}}}`
		err := caddy.Load([]byte(cfg), true)
		if err == nil {
			_ = caddy.Stop()
			t.Fatalf("Caddy loaded %s", tc.handler)
		}
		if !strings.Contains(err.Error(), tc.word) {
			t.Fatalf("load error does not name %q: %v", tc.word, err)
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
