package mcplimit_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// Every refusal's message is written for an agent to act on (SPEC,
// Refusals): which limit and its figures, then what to do. A rate limit
// says the same call works after the wait; a quota refusal says not to
// retry with this key before the reset and to report the quota; a request
// that can never pass as sent says so and what would; a concurrency cap
// promises no time. Each row drives a real refusal and holds its whole
// message.
func TestRefusalMessagesTellTheAgentWhatToDo(t *testing.T) {
	a := []string{"Authorization", "Bearer valid-msg-a"}
	b := []string{"Authorization", "Bearer valid-msg-b"}
	orgA := append([]string{"X-Org", "acme"}, a...)
	orgB := append([]string{"X-Org", "acme"}, b...)
	proxied := harness.Options{Global: "servers {\n\ttrusted_proxies static 127.0.0.1/32\n}"}
	const (
		wait  = `Retry in [1-9][0-9]*s`
		reset = `[0-9]{4}-[0-9]{2}-[0-9]{2}T00:00:00Z`
	)
	for _, c := range []struct {
		name, block string
		opts        harness.Options
		setup       func(e *env)
		send        func(e *env) *harness.Response
		status      int
		limit, want string
	}{{
		name:  "tenant",
		block: "tenant 1/h burst 1\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a"); e.spend("valid-msg-a", 1) },
		send:  func(e *env) *harness.Response { return e.call(9, a...) },
		limit: "tenant",
		want:  `Rate limited: this API key exceeded its per-hour limit \(1/h, burst 1\)\. ` + wait + `; the same call will work then\.`,
	}, {
		name:  "preauth",
		block: "preauth 1/h burst 1",
		setup: func(e *env) { e.call(1, "Authorization", "Bearer bad-msg") },
		send:  func(e *env) *harness.Response { return e.call(9, "Authorization", "Bearer bad-msg") },
		limit: "preauth",
		want:  `Rate limited: requests from this network address without an accepted credential exceeded their per-hour limit \(1/h, burst 1\)\. ` + wait + `; the same call will work then\.`,
	}, {
		name:  "a full set of addresses",
		block: "max_known 1\nglobal off\npreauth 1/h burst 5", // no bucket refills while the set fills
		opts:  proxied,
		setup: func(e *env) { e.fillAddresses() },
		send: func(e *env) *harness.Response {
			return e.call(9, "Authorization", "Bearer bad-msg", "X-Forwarded-For", "198.51.100.2")
		},
		limit: "preauth",
		want:  `Rate limited: this server already tracks as many network addresses as it may, and none of them can make room for this one yet\. ` + wait + ` or later\.`,
	}, {
		name:  "anonymous",
		block: "preauth off\nanonymous 2/m burst 1",
		setup: func(e *env) { e.call(1) },
		send:  func(e *env) *harness.Response { return e.call(9) },
		limit: "anonymous",
		want:  `Rate limited: requests without credentials exceeded their shared per-minute limit \(2/m, burst 1\)\. ` + wait + `; the same call will work then\.`,
	}, {
		name:  "group",
		block: "group {http.request.header.X-Org} 1/h burst 1\nquota off",
		setup: func(e *env) {
			e.prove("valid-msg-a", "X-Org", "acme")
			e.prove("valid-msg-b", "X-Org", "acme")
			e.call(1, orgA...)
		},
		send:  func(e *env) *harness.Response { return e.call(9, orgB...) },
		limit: "group",
		want:  `Rate limited: this caller's organization exceeded its shared per-hour limit \(1/h, burst 1\)\. ` + wait + `; the same call will work then\.`,
	}, {
		name:  "global",
		block: "global 1/h burst 1\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a"); e.spend("valid-msg-a", 1) },
		send:  func(e *env) *harness.Response { return e.call(9, a...) },
		limit: "global",
		want:  `Rate limited: this server is at its total per-hour capacity \(1/h, burst 1\)\. ` + wait + `; the same call will work then\.`,
	}, {
		name:  "a cost above the burst",
		block: "tenant 1/h burst 2\nquota off\ncost echo 3",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.call(9, a...) },
		limit: "tenant",
		want: `Rate limited: this request costs 3, more than this API key's per-hour limit \(1/h, burst 2\) admits at once; it will never be admitted as sent\. ` +
			`Send fewer or cheaper calls per request, costing at most 2 together\.`,
	}, {
		name:  "a batch above the organization's burst",
		block: "group {http.request.header.X-Org} 1/h burst 3\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 4), orgA...) },
		limit: "group",
		want: `Rate limited: this request costs 4, more than this caller's organization's shared per-hour limit \(1/h, burst 3\) admits at once; it will never be admitted as sent\. ` +
			`Send fewer or cheaper calls per request, costing at most 3 together\.`,
	}, {
		name:  "a batch above the server's burst",
		block: "global 1/h burst 3\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 4), a...) },
		limit: "global",
		want: `Rate limited: this request costs 4, more than this server's total per-hour limit \(1/h, burst 3\) admits at once; it will never be admitted as sent\. ` +
			`Send fewer or cheaper calls per request, costing at most 3 together\.`,
	}, {
		name:  "a keyless batch above the anonymous burst",
		block: "anonymous 1/h burst 3\nquota off",
		setup: func(*env) {},
		send:  func(e *env) *harness.Response { return e.post(batch(1, 4)) },
		limit: "anonymous",
		want: `Rate limited: this request costs 4, more than the shared per-hour limit for requests without credentials \(1/h, burst 3\) admits at once; it will never be admitted as sent\. ` +
			`Send fewer or cheaper calls per request, costing at most 3 together\.`,
	}, {
		name:  "an unproven batch above the pre-auth burst",
		block: "preauth 1/h burst 3\nquota off",
		setup: func(*env) {},
		send:  func(e *env) *harness.Response { return e.post(batch(1, 4), "Authorization", "Bearer valid-msg-new") },
		limit: "preauth",
		want: `Rate limited: this request costs 4, more than this network address's per-hour limit for requests without an accepted credential \(1/h, burst 3\) admits at once; it will never be admitted as sent\. ` +
			`Send fewer or cheaper calls per request, costing at most 3 together\.`,
	}, {
		name:  "a batch above the burst and a smaller quota",
		block: "tenant 1/h burst 5\nquota 4/day",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 6), a...) },
		limit: "tenant",
		want: `Rate limited: this request costs 6, more than this API key's per-hour limit \(1/h, burst 5\) admits at once; it will never be admitted as sent\. ` +
			`Send fewer or cheaper calls per request, costing at most 4 together \(the most the other limits on this request admit\)\.`,
	}, {
		name:  "a batch whose cost is beyond counting",
		block: "max_batch 10000\nglobal off\ntenant 1/h burst 999999999999999\nquota off\ncost echo 999999999999999",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 9300), a...) },
		limit: "tenant",
		want: `Rate limited: this request costs at least 9223372036854775807, more than this API key's per-hour limit \(1/h, burst 999999999999999\) admits at once; it will never be admitted as sent\. ` +
			`Send fewer or cheaper calls per request, costing at most 999999999999999 together\.`,
	}, {
		name:  "a batch beyond counting against a quota",
		block: "max_batch 10000\nglobal off\ntenant off\nquota 999999999999999/day\ncost echo 999999999999999\ncost other 1",
		// One call counted first: its count plus the batch's would wrap.
		setup: func(e *env) {
			e.prove("valid-msg-a")
			e.post(harness.ToolCall(1, "other", map[string]any{}), a...)
		},
		send:  func(e *env) *harness.Response { return e.post(batch(1, 9300), a...) },
		limit: "quota",
		want:  `Quota too small for this request: it costs at least 9223372036854775807, more than this API key's whole daily quota \(999999999999999\); it will never be admitted as sent\. Send requests costing at most 999999999999998 \(what is left now\)\.`,
	}, {
		name:  "a full set of callers",
		block: "max_known 1\nglobal off\npreauth 10000/s burst 10000\ntenant 1/h burst 5\nquota off",
		setup: func(e *env) { e.fillTenants("valid-msg-fill"); e.prove("valid-msg-b") },
		send:  func(e *env) *harness.Response { return e.call(9, b...) },
		limit: "tenant",
		want:  `Rate limited: this server already tracks as many callers as it may, and none of them can make room for this one yet\. ` + wait + ` or later\.`,
	}, {
		name:  "a batch above the concurrency cap",
		block: "concurrency 2\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 3), a...) },
		limit: "concurrency",
		want:  `Too many calls in flight: this request runs 3 calls at once, more than the limit of 2 on this server; it will never be admitted as sent\. Send at most 2 calls per request\.`,
	}, {
		name:  "a batch above a caller's concurrency cap and a smaller bucket",
		block: "concurrency 10 per_identity 3\ntenant 1/h burst 2\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 4), a...) },
		limit: "concurrency",
		want: `Too many calls in flight: this request runs 4 calls at once, more than the limit of 3 for this API key; it will never be admitted as sent\. ` +
			`Send at most 2 calls per request \(the most the other limits on this request admit\)\.`,
	}, {
		name:  "a full concurrency cap",
		block: "concurrency 5 per_identity 1\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a"); e.holdACall(a) },
		send:  func(e *env) *harness.Response { return e.call(9, a...) },
		limit: "concurrency",
		want:  `Too many calls in flight for this API key \(limit 1\)\. Retry once one of them has finished, in 1s or later\.`,
	}, {
		name:  "a rate limit with the concurrency cap full",
		block: "concurrency 1\ntenant 1/h burst 1\nquota off",
		setup: func(e *env) { e.prove("valid-msg-a"); e.holdACall(a) },
		send:  func(e *env) *harness.Response { return e.call(9, a...) },
		limit: "tenant",
		want: `Rate limited: this API key exceeded its per-hour limit \(1/h, burst 1\)\. ` + wait +
			` or later, once one of the calls in flight on this server has finished too \(limit 1\)\.`,
	}, {
		name:  "quota exhausted",
		block: "quota 1/day",
		setup: func(e *env) { e.prove("valid-msg-a"); e.spend("valid-msg-a", 1) },
		send:  func(e *env) *harness.Response { return e.call(9, a...) },
		limit: "quota",
		want:  `Quota exhausted: this API key used its daily quota \(1\)\. Do not retry with this key until the quota resets at ` + reset + `; report the exhausted quota to the user\.`,
	}, {
		name:  "group quota exhausted",
		block: "group {http.request.header.X-Org} 100/s\ngroup_quota 1/month\nquota off",
		setup: func(e *env) {
			e.prove("valid-msg-a", "X-Org", "acme")
			e.prove("valid-msg-b", "X-Org", "acme")
			e.call(1, orgA...)
		},
		send:  func(e *env) *harness.Response { return e.call(9, orgB...) },
		limit: "group_quota",
		want: `Quota exhausted: this caller's organization used its monthly quota \(1\)\. Do not retry with this key, nor with another key of the organization, until the quota resets at ` +
			reset + `; report the exhausted quota to the user\.`,
	}, {
		name:  "tool quota exhausted",
		block: "tool echo {\nquota 1/day\n}",
		setup: func(e *env) { e.prove("valid-msg-a"); e.spend("valid-msg-a", 1) },
		send:  func(e *env) *harness.Response { return e.call(9, a...) },
		limit: "tool_quota",
		want: `Quota exhausted: this API key used its daily quota for tool "echo" \(1 call\)\. Do not call this tool with this key until the quota resets at ` +
			reset + ` \(other tools still work\); report the exhausted quota to the user\.`,
	}, {
		name:  "quota nearly exhausted",
		block: "quota 3/day",
		setup: func(e *env) { e.prove("valid-msg-a"); e.spend("valid-msg-a", 1) },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 3), a...) },
		limit: "quota",
		want: `Quota nearly exhausted: this request costs 3, more than the 2 left of this API key's daily quota \(3\)\. It will not be admitted as sent before the quota resets at ` +
			reset + `; requests costing at most 2 fit the quotas now\.`,
	}, {
		name:  "quota too small",
		block: "quota 2/day",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send:  func(e *env) *harness.Response { return e.post(batch(1, 3), a...) },
		limit: "quota",
		want:  `Quota too small for this request: it costs 3, more than this API key's whole daily quota \(2\); it will never be admitted as sent\. Send requests costing at most 2\.`,
	}, {
		name:  "an argument over its bound",
		block: "tool echo {\narg limit max 10\n}",
		setup: func(e *env) { e.prove("valid-msg-a") },
		send: func(e *env) *harness.Response {
			return e.post(harness.ToolCall(9, "echo", map[string]any{"limit": 11}), a...)
		},
		status: http.StatusBadRequest,
		want:   `Invalid params: argument "limit" of tool "echo" must be a number no greater than 10\.`,
	}, {
		name:   "a fail_closed tool while the store is unreachable",
		block:  "store redis redis://127.0.0.1:" + strconv.Itoa(harness.FreePort(t)) + "\ntool echo {\nfail_closed\n}",
		setup:  func(e *env) { e.prove("valid-msg-a") },
		send:   func(e *env) *harness.Response { return e.call(9, a...) },
		status: http.StatusServiceUnavailable,
		limit:  "store",
		want: `Temporarily unavailable: the rate limiter cannot count calls to tool "echo" right now \(its quota store is unreachable\), ` +
			`and this tool is never left uncounted\. This is not an exhausted quota\. ` + wait + `\.`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, c.block, c.opts)
			c.setup(e)
			status := c.status
			if status == 0 {
				status = http.StatusTooManyRequests
			}
			msg := refusal(t, c.send(e), status, c.limit).Error.Message
			if !regexp.MustCompile(`^` + c.want + `$`).MatchString(msg) {
				t.Errorf("message\n%s\ndoes not read\n%s", msg, c.want)
			}
		})
	}
}

// holdACall starts a slow call with the headers hdr and waits until the
// zone counts it in flight; the test's end waits for it.
func (e *env) holdACall(hdr []string) {
	e.t.Helper()
	done := e.slowInBackground(1500, hdr...)
	harness.Eventually(e.t, 5*time.Second, "the slow call in flight", func() bool { return e.inflight("default") == 1 })
	e.t.Cleanup(func() { <-done })
}
