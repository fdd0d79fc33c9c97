package mcplimit_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// groupSite puts the organization, set by an earlier handler (here from a
// header, for the test), in {http.vars.org} and limits per organization.
func groupSite(block string) string {
	return "route {\n\tvars org {http.request.header.X-Org}\n\tmcp_ratelimit {\n" + block + "\n\t}\n\treverse_proxy $BACKEND\n}"
}

// member proves token as a principal of organization org and returns the
// headers its calls carry.
func (e *env) member(token, org string) []string {
	e.t.Helper()
	e.prove(token, "X-Org", org)
	return []string{"Authorization", "Bearer " + token, "X-Org", org}
}

func TestGroupRateIsSharedByTheOrganization(t *testing.T) {
	const block = "tenant 1/m burst 5\nquota off\ngroup {http.vars.org} 1/m burst 3"
	e := startSite(t, groupSite(block))
	p1 := e.member("valid-org-p1", "acme")
	p2 := e.member("valid-org-p2", "acme")
	p3 := e.member("valid-org-p3", "other")
	e.prove("valid-org-solo")
	solo := []string{"Authorization", "Bearer valid-org-solo"}
	e.passes(2, "echo", p1...)
	e.passes(1, "echo", p2...)
	before := e.backend.ToolCalls()
	for i, h := range [][]string{p2, p1, p2, p1} {
		got := refusal(t, e.callTool(i, "echo", h...), http.StatusTooManyRequests, "group")
		if got.Error.Data.Code != "GROUP_RATE_LIMITED" || !strings.Contains(got.Error.Message, "this caller's organization exceeded") {
			t.Fatalf("code %s: %s", got.Error.Data.Code, got.Error.Message)
		}
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a group refusal reached the backend")
	}
	// Another organization and a principal without one are untouched.
	e.passes(3, "echo", p3...)
	e.passes(5, "echo", solo...)

	// A refusal by the group layer charged neither principal: with the
	// group raised live, p1 still has 3 tenant tokens and p2 has 4.
	site := groupSite("tenant 1/m burst 5\nquota off\ngroup {http.vars.org} 100/s burst 100")
	e.caddy.Load(t, harness.Config(site, e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
	e.settle(solo...)
	time.Sleep(200 * time.Millisecond) // the drained group refills at the new rate
	e.passes(3, "echo", p1...)
	refusal(t, e.callTool(20, "echo", p1...), http.StatusTooManyRequests, "tenant")
	e.passes(4, "echo", p2...)
	refusal(t, e.callTool(21, "echo", p2...), http.StatusTooManyRequests, "tenant")
}

func TestGroupTokensComeBackWhenALaterLayerRefuses(t *testing.T) {
	// p1's own daily quota of 1 refuses after the group layer reserved a
	// token: the organization must get it back.
	e := startSite(t, groupSite("tenant off\nquota 1/day\ngroup {http.vars.org} 1/m burst 3"))
	p1 := e.member("valid-later-p1", "acme")
	p2 := e.member("valid-later-p2", "acme")
	e.passes(1, "echo", p1...)
	for i := range 5 {
		refusal(t, e.callTool(i, "echo", p1...), http.StatusTooManyRequests, "quota")
	}
	// 2 group tokens are left, whatever p1's refused calls did.
	e.passes(1, "echo", p2...)
	refusal(t, e.callTool(9, "echo", p2...), http.StatusTooManyRequests, "quota")
	p4 := e.member("valid-later-p4", "acme")
	e.passes(1, "echo", p4...)
	p5 := e.member("valid-later-p5", "acme")
	refusal(t, e.callTool(10, "echo", p5...), http.StatusTooManyRequests, "group")
}

func TestGroupQuotaIsSharedByTheOrganization(t *testing.T) {
	e := startSite(t, groupSite("tenant off\nquota 100/day\ngroup {http.vars.org} 100/s burst 100\ngroup_quota 4/day"))
	p1 := e.member("valid-gq-p1", "acme")
	p2 := e.member("valid-gq-p2", "acme")
	e.passes(2, "echo", p1...)
	e.passes(2, "echo", p2...)
	before := e.backend.ToolCalls()
	for i, h := range [][]string{p1, p2} {
		r := e.callTool(i, "echo", h...)
		got := refusal(t, r, http.StatusTooManyRequests, "group_quota")
		if got.Error.Data.Code != "QUOTA_EXHAUSTED" || got.Error.Data.ResetsAt == "" {
			t.Fatalf("group quota refusal: %s", r.Body)
		}
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a group quota refusal reached the backend")
	}
	// Another organization has its own count.
	p3 := e.member("valid-gq-p3", "other")
	e.passes(4, "echo", p3...)
}

func TestToolQuotaRefusesThePhotoToolOnly(t *testing.T) {
	e := start(t, "tenant off\nquota 10/day\ntool analyze_photo {\n quota 2/day\n}")
	h := []string{"Authorization", "Bearer valid-photographer"}
	e.prove("valid-photographer")
	e.passes(2, "analyze_photo", h...)
	before := e.backend.ToolCalls()
	r := e.callTool(1, "analyze_photo", h...)
	got := refusal(t, r, http.StatusTooManyRequests, "tool_quota")
	if got.Error.Data.Code != "QUOTA_EXHAUSTED" || got.Error.Data.Tool != "analyze_photo" ||
		!strings.Contains(got.Error.Message, "analyze_photo") || !strings.Contains(got.Error.Message, "Do not call this tool") {
		t.Fatalf("tool quota refusal does not name the tool: %s", r.Body)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("the refused photo call reached the backend")
	}
	// A batch with a photo call is refused whole; its other calls are
	// told why they did not run, not that their tool is used up.
	r = e.post("["+harness.ToolCall(3, "echo", map[string]any{"text": "x"})+","+harness.ToolCall(4, "analyze_photo", nil)+"]", h...)
	var answers []rpcError
	r.JSON(t, &answers)
	if r.Status != http.StatusTooManyRequests || len(answers) != 2 || answers[0].Error == nil || answers[1].Error == nil {
		t.Fatalf("batch of an echo and a photo: %d %s", r.Status, r.Body)
	}
	if m := answers[0].Error.Message; !strings.HasPrefix(m, "Not run: the batch was refused whole because its calls of tool \"analyze_photo\"") {
		t.Fatalf("the echo call of the batch is told %q", m)
	}
	if m := answers[1].Error.Message; !strings.Contains(m, "Do not call this tool") || strings.HasPrefix(m, "Not run") {
		t.Fatalf("the photo call of the batch is told %q", m)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("the refused batch reached the backend")
	}
	// The account quota still has room for other tools: 10 - 2 = 8.
	e.passes(8, "echo", h...)
	refusal(t, e.callTool(2, "echo", h...), http.StatusTooManyRequests, "quota")
}

// A call refused by a used-up daily quota while its tool's monthly quota
// is used up too is told the later reset: at midnight the same call would
// still be refused. A call of another tool is told the day's. With Redis,
// so is a call answered from memory after a refusal for the day.
func TestUsedUpToolQuotaResettingLaterIsNamed(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const block = "tenant off\nquota 3/day\ntool analyze_photo {\n quota 2/month\n}"
	check := func(t *testing.T, e *env, token string) {
		h := []string{"Authorization", "Bearer " + token}
		e.prove(token)
		e.passes(2, "analyze_photo", h...)
		e.passes(1, "echo", h...)
		// Refused for the day first: with Redis, the instance remembers
		// that refusal and answers the next calls from memory.
		refusal(t, e.callTool(2, "echo", h...), http.StatusTooManyRequests, "quota")
		now := time.Now().UTC()
		month := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		got := refusal(t, e.callTool(1, "analyze_photo", h...), http.StatusTooManyRequests, "tool_quota")
		if at, _ := time.Parse(time.RFC3339, got.Error.Data.ResetsAt); !at.Equal(month) {
			t.Fatalf("the photo call is told its quota resets at %q, want %s: %s", got.Error.Data.ResetsAt, month.Format(time.RFC3339), got.Error.Message)
		}
		if ra := got.Error.Data.RetryAfterSeconds; time.Duration(ra)*time.Second < month.Sub(now)-time.Minute {
			t.Fatalf("Retry-After %ds, shorter than the %s to the month's reset", ra, month.Sub(now))
		}
		refusal(t, e.callTool(2, "echo", h...), http.StatusTooManyRequests, "quota")
	}
	t.Run("local", func(t *testing.T) { check(t, start(t, "zone toolquota_later\n"+block), "valid-later") })
	t.Run("redis", func(t *testing.T) {
		check(t, start(t, "zone toolquota_later_redis\n"+block+"\nstore redis "+harness.StartRedis(t).URL), "valid-later-redis")
	})
}

// A body that is not JSON costs, and counts against a tool's quota, what
// the reading that calls the tool most does: a call with a comment or a
// trailing comma is one call to the tool, not one per lenient reading.
func TestToolQuotaCountsAnInvalidBodysCallOnce(t *testing.T) {
	e := start(t, "zone toolquota-invalid\ntenant off\nquota off\ntool analyze_photo {\n quota 3/day\n}")
	h := []string{"Authorization", "Bearer valid-lenient"}
	e.prove("valid-lenient")
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":1,/*x*/"method":"tools/call","params":{"name":"analyze_photo"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"analyze_photo",}}`,
	} {
		if r := e.post(body, h...); r.Status == http.StatusTooManyRequests {
			t.Fatalf("invalid body %d: refused %s", i, r.Body)
		}
	}
	e.passes(1, "analyze_photo", h...)
	refusal(t, e.callTool(9, "analyze_photo", h...), http.StatusTooManyRequests, "tool_quota")
}

// A tool name with a space or a percent sign is counted like any other:
// stored quota lines end their key at the first space, so the name is
// escaped in the key, never refused as "exhausted".
func TestToolQuotaCountsNamesWithSpaces(t *testing.T) {
	for _, name := range []string{"photo tool", "50% off"} {
		t.Run(name, func(t *testing.T) {
			e := start(t, "tenant off\nquota off\nflush_interval 1s\ntool "+strconv.Quote(name)+" {\n quota 2/day\n}")
			h := []string{"Authorization", "Bearer valid-spaces"}
			e.prove("valid-spaces")
			e.passes(2, name, h...)
			r := e.callTool(1, name, h...)
			got := refusal(t, r, http.StatusTooManyRequests, "tool_quota")
			if got.Error.Data.Tool != name {
				t.Fatalf("tool quota refusal names tool %q, want %q: %s", got.Error.Data.Tool, name, r.Body)
			}
		})
	}
}

// argCall renders a tools/call of echo whose arguments object is the raw
// JSON args.
func argCall(id int, args string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`
}

// An integer past 2^53 is compared as Python and Go's integer fields read
// it, exactly: 2^53+1 exceeds a bound of 2^53, which it reads as a double.
func TestArgBoundComparesLargeIntegersExactly(t *testing.T) {
	e := start(t, "tenant 100/s burst 100\nquota off\ntool echo {\n arg id max 9007199254740992\n}")
	h := []string{"Authorization", "Bearer valid-bigint"}
	e.prove("valid-bigint")
	for args, want := range map[string]int{
		`{"id":9007199254740992}`:   http.StatusOK,
		`{"id":9007199254740993}`:   http.StatusBadRequest,
		`{"id":-9007199254740993}`:  http.StatusOK,
		`{"id":9007199254740993.0}`: http.StatusOK, // a float to every reader
	} {
		if r := e.post(argCall(1, args), h...); r.Status != want {
			t.Errorf("%s: %d %s, want %d", args, r.Status, r.Body, want)
		}
	}
}

func TestArgBoundRefusesBiggerPagesBeforeSpendingTokens(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nquota off\ntool echo {\n arg limit max 25\n}")
	h := []string{"Authorization", "Bearer valid-pager"}
	e.prove("valid-pager")
	before := e.backend.ToolCalls()
	for _, args := range []string{
		`{"limit":100}`,
		`{"limit":"100"}`,
		`{"limit":"25"}`,
		`{"limit":100,"limit":10}`,
		`{"limit":10,"limit":100}`,
		`{"Limit":100}`,
		`{"LIMIT":100}`,
		`{"\u006cimit":100}`,
		`{"limit":1e3}`,
		`{"limit":25.5}`,
		`{"limit":true}`,
		`{"limit":[100]}`,
		`{"limit":{"n":100}}`,
		`{"text":"x","limit":1e400}`,
	} {
		t.Run(args, func(t *testing.T) {
			r := e.post(argCall(7, args), h...)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", r.Status, r.Body)
			}
			var got rpcError
			r.JSON(t, &got)
			if got.Error == nil || got.Error.Code != -32602 || got.ID != float64(7) {
				t.Fatalf("want JSON-RPC -32602 echoing id 7: %s", r.Body)
			}
			if !strings.Contains(got.Error.Message, "limit") || !strings.Contains(got.Error.Message, "25") {
				t.Fatalf("message must name the argument and the bound: %s", got.Error.Message)
			}
			if e.backend.ToolCalls() != before {
				t.Fatal("a call over the bound reached the backend")
			}
		})
	}
	// Parser-differential shapes of the params object hide nothing.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"limit":100},"arguments":{"limit":1}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"limit":1},"Arguments":{"limit":100}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"limit":1}},"Params":{"name":"echo","arguments":{"limit":100}}}`,
		"\xef\xbb\xbf" + argCall(7, `{"limit":100}`),
		// 100 written with an integer part past 800 digits, which
		// strconv.ParseFloat alone reads as 0.1.
		argCall(7, `{"limit":100`+strings.Repeat("0", 800)+`e-800}`),
		"{\n jsonrpc: 2.0\n id: 7\n method: tools/call\n params: {\n  name: echo\n  arguments: {\n   limit: 100\n  }\n }\n}", // Hjson
		// Params by position, as a JSON-RPC dispatcher passes them on.
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["echo",{"limit":100}]}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["echo",[{"limit":100}]]}`,
		// A batch entry in an array, as Jackson reads a list of messages.
		`[[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"limit":100}}}]]`,
	} {
		if r := e.post(body, h...); r.Status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", body, r.Status, r.Body)
		}
	}
	// A form, as Express's extended form parser reads it, holds the
	// argument as a string: no number.
	// So does one after a BOM, which body-parser drops before qs reads it,
	// and one whose key Koa's body parsers (co-body) read at a dot.
	for _, body := range []string{
		"jsonrpc=2.0&id=7&method=tools/call&params[name]=echo&params[arguments][limit]=1",
		"\xef\xbb\xbfmethod=tools%2Fcall&params[name]=echo&params[arguments][limit]=5000&jsonrpc=2.0&id=7",
		"jsonrpc=2.0&id=7&method=tools%2Fcall&params[name]=echo&params[arguments].limit=5000",
		// The argument an empty object (qs drops the __proto__ segment,
		// Hono sets it as a member).
		"jsonrpc=2.0&id=7&method=tools%2Fcall&params[name]=echo&params[arguments][limit][__proto__]=5000",
		"jsonrpc=2.0&id=7&method=tools%2Fcall&params.name=echo&params.arguments.limit.__proto__=5000",
		// Given by position at indexes qs compacts: echo and its arguments.
		"jsonrpc=2.0&id=7&method=tools%2Fcall&params[3]=echo&params[8][limit]=5000",
	} {
		form := e.post(body, h...)
		var formAnswer rpcError
		form.JSON(t, &formAnswer)
		if form.Status != http.StatusBadRequest || formAnswer.Error == nil || formAnswer.Error.Code != -32602 || !strings.Contains(formAnswer.Error.Message, `"limit"`) {
			t.Fatalf("form %q with a string limit: %d %s", body, form.Status, form.Body)
		}
	}
	// A batch with one bad call is refused whole.
	batchBody := "[" + argCall(1, `{"limit":5}`) + "," + argCall(2, `{"limit":100}`) + "]"
	r := e.post(batchBody, h...)
	if r.Status != http.StatusBadRequest || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("batch with one bad call: %d (Retry-After %q) %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a call of a refused batch reached the backend")
	}
	// The call at fault is told what is wrong with it; the other is told
	// which call to fix.
	var answers []rpcError
	r.JSON(t, &answers)
	if len(answers) != 2 || answers[0].Error == nil || answers[1].Error == nil ||
		!strings.Contains(answers[0].Error.Message, "Not run") || !strings.Contains(answers[0].Error.Message, "id 2") ||
		strings.Contains(answers[1].Error.Message, "Not run") || !strings.Contains(answers[1].Error.Message, `"limit"`) {
		t.Fatalf("batch answers must tell the call at fault from the other: %s", r.Body)
	}
	// Each call at fault is told its own fault: told it was not run, a
	// second bad call sent again as it is would be refused again.
	r = e.post("["+argCall(1, `{"limit":5}`)+","+argCall(2, `{"limit":100}`)+","+argCall(3, `{"limit":"x"}`)+"]", h...)
	answers = nil
	r.JSON(t, &answers)
	if r.Status != http.StatusBadRequest || len(answers) != 3 || answers[0].Error == nil || answers[2].Error == nil ||
		!strings.Contains(answers[0].Error.Message, "id 2") || strings.Contains(answers[2].Error.Message, "Not run") ||
		answers[2].Error.Code != -32602 || answers[2].Error.Data.Argument != "limit" {
		t.Fatalf("batch with two calls at fault: %d %s", r.Status, r.Body)
	}
	// A call at fault sent as a notification has no id to name.
	notified := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"limit":100}}}`
	r = e.post("["+argCall(1, `{"limit":5}`)+","+notified+"]", h...)
	answers = nil
	r.JSON(t, &answers)
	if r.Status != http.StatusBadRequest || len(answers) != 1 || answers[0].Error == nil ||
		!strings.Contains(answers[0].Error.Message, "call sent as a notification (without an id) is invalid") {
		t.Fatalf("batch whose call at fault is a notification: %d %s", r.Status, r.Body)
	}
	// None of the 400s spent the single token: a call at the bound passes,
	// and so does null (absent).
	if r := e.post(argCall(8, `{"text":"ok","limit":25}`), h...); r.Status != http.StatusOK {
		t.Fatalf("limit 25 after the 400s: %d %s", r.Status, r.Body)
	}
	refusal(t, e.post(argCall(9, `{"limit":null}`), h...), http.StatusTooManyRequests, "tenant")
}

func TestToolPoliciesHoldForBodiesOnlyLenientParsersAccept(t *testing.T) {
	// Python's json module accepts NaN and Infinity; streaming decoders
	// (the official Go SDK among them) run the first value of a body that
	// has more after it; the Kotlin SDK reads unquoted keys and strings
	// and raw control bytes in strings (kotlinx.serialization's isLenient
	// and its lexer); the Ruby SDK's json gem reads
	// comments as whitespace and drops the backslash of an escape JSON has
	// not; the Java SDK's Jackson reads a number as a string (a tool named
	// 7), and Jackson reading bytes decodes an overlong UTF-8 sequence
	// ("limi\xC1\xB4" is limit), and with ALLOW_YAML_COMMENTS reads # to
	// the end of the line as a comment, with UNWRAP_SINGLE_VALUE_ARRAYS
	// arguments [{...}] as {...}, and with ALLOW_SINGLE_QUOTES '...' as a
	// string; Go's encoding/json/v2 matching names case-insensitively
	// ignores dashes and underscores too (li_mit is limit); Jackson reads
	// trailing commas and missing values, and ends a line comment at \r
	// too; Hjson reads a number out of a double's range (1e400) as a
	// string to the end of its line. Such a server still runs the call, so
	// argument bounds and per-tool quotas must hold for these bodies too.
	e := start(t, "tenant 100/s burst 100\nquota off\ntool echo {\n arg limit max 25\n}\ntool 7 {\n arg limit max 25\n}\ntool analyze_photo {\n quota 2/day\n}")
	h := []string{"Authorization", "Bearer valid-lenient"}
	e.prove("valid-lenient")
	for _, body := range []string{
		argCall(7, `{"limit":100,"x":NaN}`),
		argCall(7, `{"limit":Infinity}`),
		argCall(7, `{"limit":-Infinity,"limit":100}`),
		argCall(7, `{"limit":100}`) + `{}`,
		argCall(7, `{"limit":100}`) + "\n" + argCall(8, `{}`),
		`{}` + argCall(7, `{"limit":100}`),
		`[` + argCall(7, `{"limit":100}`) + `]]`,
		`{jsonrpc:"2.0",id:7,method:"tools/call",params:{name:"echo",arguments:{limit:100}}}`,
		`{"jsonrpc":"2.0","id":7,"method":tools/call,"params":{"name":echo,"arguments":{"limit":100}}}`,
		argCall(7, `{"limit":1_000}`),
		argCall(7, `{"limit":nope}`),
		argCall(7, `{"limit":nan}`),
		`/* c */` + argCall(7, `{"limit":100}`),
		argCall(7, `{"limit":100/* c */}`),
		"// c\n" + argCall(7, "{// c\n\"limit\"://\n100}"),
		`{"x":"\q",` + argCall(7, `{"limit":100}`)[1:],
		argCall(7, `{"\limit":100}`),
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":7,"arguments":{"limit":100}}}`,
		argCall(7, "{\"limit\":100,\"text\":\"a\nb\"}"),
		argCall(7, "{\"limi\xc1\xb4\":100}"),
		argCall(7, "{\"limit\":1,#x\n\"limit\":100}"),
		argCall(7, `[{"limit":100}]`),
		argCall(7, `{'limit':100}`),
		argCall(7, `{"li_mit":100}`),
		argCall(7, `{"LI-MIT":100}`),
		argCall(7, `{"limit":100,}`),
		argCall(7, "{ // c\r\"limit\":100}"),
		argCall(7, `{'text':'a,"limit":1}','limit':100}`),
		"{\"jsonrpc\":\"2.0\",\"id\":\"7\t\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"limit\":100}}}",
		argCall(7, `{"li\x6dit":100}`),
		argCall(7, "{\"lim\\\nit\":100}"),
		argCall(7, `{li\u006dit:100}`),
		argCall(7, "{\f\"limit\"\u00a0:100}"),
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ec\x68o","arguments":{"limit":100}}}`,
		"jsonrpc: \"2.0\"\nid: 7\nmethod: tools/call\nparams: {\nname: echo\narguments: {x: 1e400}\nlimit: 100\n}\n}\n",
	} {
		r := e.post(body, h...)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "-32602") {
			t.Errorf("%s: status %d, want 400 with -32602: %s", body, r.Status, r.Body)
		}
	}
	// An argument whose value is missing is no reading: the call goes on
	// (invalid, it costs 1), and the handler does not crash on it.
	if r := e.post(argCall(7, `{"limit":}`), h...); !strings.Contains(string(r.Body), "malformed payload") {
		t.Errorf("an argument without a value: %d %s, want it forwarded (the SDK backend rejects it)", r.Status, r.Body)
	}
	// Bodies whose arguments a lenient reading leaves ambiguous are
	// answered (one looped the arguments walk forever, one read past it).
	for _, args := range []string{`{"a":1,"b,"x":{"y":[]}}e":5}`, `{"a"b":7,c":1}`} {
		if r := e.post(argCall(7, args), h...); r.Status == 0 || r.Status >= 500 && !strings.Contains(string(r.Body), "malformed") {
			t.Errorf("arguments %s: %d %s, want an answer", args, r.Status, r.Body)
		}
	}
	// Such a body is no valid JSON: its one answer has id null.
	r := e.post(`{jsonrpc:"2.0",id:nope,method:tools/call,params:{name:echo,arguments:{limit:100}}}`, h...)
	var answer rpcError
	r.JSON(t, &answer)
	if r.Status != http.StatusBadRequest || answer.Error == nil || answer.ID != nil {
		t.Errorf("unquoted id: %d %s, want 400 answering id null", r.Status, r.Body)
	}
	before := e.backend.ToolCalls()
	photo := harness.ToolCall(9, "analyze_photo", map[string]any{"url": "x"}) + `{}`
	for i := range 2 {
		if r := e.post(photo, h...); r.Status != http.StatusOK {
			t.Fatalf("photo %d: %d %s", i, r.Status, r.Body)
		}
	}
	if r := e.post(photo, h...); r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), "tool_quota") {
		t.Errorf("third photo call with a trailing value: %d %s, want the tool_quota refusal", r.Status, r.Body)
	}
	if n := e.backend.ToolCalls() - before; n != 2 {
		t.Errorf("%d photo calls reached the backend, want the quota of 2", n)
	}
}

func TestFailClosedToolRefusedWhileStoreDegraded(t *testing.T) {
	dir := harness.TempDir(t, "quota-store")
	// echo has a policy of its own, but is not fail_closed.
	e := start(t, "flush_interval 1s\ntenant off\nquota 1000/day\ntool analyze_photo {\n fail_closed\n}\ntool echo {\n arg limit max 1000\n}", harness.Options{Storage: dir})
	h := []string{"Authorization", "Bearer valid-failclosed"}
	e.prove("valid-failclosed")
	e.passes(1, "analyze_photo", h...)
	e.passes(1, "echo", h...)

	// The storage directory becomes unusable.
	repair := harness.BreakStorage(t, dir)
	degraded := func() bool {
		var z struct {
			QuotaStore struct {
				Degraded bool `json:"degraded"`
			} `json:"quota_store"`
		}
		e.caddy.AdminJSON(t, "/mcp_ratelimit/default", &z)
		return z.QuotaStore.Degraded
	}
	e.passes(1, "echo", h...) // a pending count to push
	harness.Eventually(t, 10*time.Second, "the quota store to be degraded", degraded)

	before := e.backend.ToolCalls()
	r := e.callTool(1, "analyze_photo", h...)
	got := refusal(t, r, http.StatusServiceUnavailable, "store")
	if got.Error.Data.Code != "STORE_UNAVAILABLE" || strings.Contains(got.Error.Message, "Quota exhausted") ||
		!strings.Contains(got.Error.Message, "analyze_photo") {
		t.Fatalf("fail_closed refusal: %s", r.Body)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a fail_closed refusal reached the backend")
	}
	// Other tools keep failing open.
	e.passes(3, "echo", h...)
	// A batch that includes the fail_closed tool is refused whole.
	batchBody := "[" + harness.ToolCall(1, "echo", nil) + "," + harness.ToolCall(2, "analyze_photo", nil) + "]"
	r = e.post(batchBody, h...)
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("batch with a fail_closed tool: %d %s", r.Status, r.Body)
	}
	// Its other calls are told they were not run because of that tool's.
	var answers []rpcError
	r.JSON(t, &answers)
	if len(answers) != 2 || answers[0].Error == nil || answers[1].Error == nil ||
		!strings.HasPrefix(answers[0].Error.Message, `Not run: the batch was refused whole because its calls of tool "analyze_photo" cannot be counted`) ||
		strings.HasPrefix(answers[1].Error.Message, "Not run") {
		t.Fatalf("batch with a fail_closed tool: each call must be told its part: %s", r.Body)
	}

	// Storage returns: the tool works again.
	repair()
	harness.Eventually(t, 10*time.Second, "the quota store to recover", func() bool { return !degraded() })
	e.passes(1, "analyze_photo", h...)
}

// A fail_closed refusal's Retry-After is the wait until the next flush
// tries storage again, counting down, not a whole flush interval each
// time; and the call works once that wait has passed with storage back.
func TestFailClosedRetryAfterIsTheWaitForTheNextFlush(t *testing.T) {
	const interval = 5 // seconds
	dir := harness.TempDir(t, "quota-store")
	e := start(t, fmt.Sprintf("zone failclosed_wait\nflush_interval %ds\ntenant off\nquota 1000/day\ntool analyze_photo {\n fail_closed\n}", interval), harness.Options{Storage: dir})
	h := []string{"Authorization", "Bearer valid-failclosed-wait"}
	e.prove("valid-failclosed-wait")
	repair := harness.BreakStorage(t, dir)
	e.passes(1, "echo", h...) // a pending count to push
	harness.Eventually(t, 2*interval*time.Second, "the quota store to be degraded", func() bool {
		return harness.GetZone(t, e.caddy.Admin, "failclosed_wait").QuotaStore.Degraded
	})
	retryAfter := func() int {
		t.Helper()
		r := e.callTool(1, "analyze_photo", h...)
		refusal(t, r, http.StatusServiceUnavailable, "store")
		n, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil {
			t.Fatalf("Retry-After %q: %v", r.Header.Get("Retry-After"), err)
		}
		return n
	}
	first := retryAfter()
	time.Sleep(2 * time.Second)
	second := retryAfter()
	if first > interval+1 || second > first-1 {
		t.Fatalf("Retry-After %d, then %d two seconds later; want at most the interval and a second (%d), counting down", first, second, interval+1)
	}
	repair()
	time.Sleep(time.Duration(second) * time.Second)
	e.passes(1, "analyze_photo", h...)
}

// A call this handler set no RateLimit fields on (an unmetered one) keeps
// every RateLimit value of a backend's 429, even one that reads exactly
// like this handler's policy.
func TestUpstream429OfAnUnmeteredCallKeepsTheBackendsFields(t *testing.T) {
	site := `route {
	mcp_ratelimit {
		zone upstream-unmetered
		tenant 1/h burst 2
		quota 3/day
	}
	@throttle header X-Throttle 1
	rewrite @throttle /throttle
	reverse_proxy $BACKEND
}`
	e := startSite(t, site)
	token := "Bearer valid-unmetered"
	if r := e.call(1, "Authorization", token); r.Status != http.StatusOK || r.Header.Get("RateLimit-Policy") == "" {
		t.Fatalf("proving call: %d, RateLimit-Policy %q", r.Status, r.Header.Get("RateLimit-Policy"))
	}
	ours := `"tenant";q=2;w=7200, "quota-day";q=3;w=86400`
	r := e.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "Authorization", token, "X-Throttle", "1",
		"X-Upstream-Policy", ours, "X-Upstream-RateLimit", `"tenant";r=0;t=60`)
	if p, v := r.Header.Values("RateLimit-Policy"), r.Header.Values("RateLimit"); r.Status != http.StatusTooManyRequests ||
		len(p) != 1 || p[0] != ours || len(v) != 1 || v[0] != `"tenant";r=0;t=60` {
		t.Fatalf("a backend 429 to an unmetered call: %d, RateLimit-Policy %q, RateLimit %q; want the backend's values", r.Status, p, v)
	}
}

func TestUpstream429PassesThroughAndIsCountedApart(t *testing.T) {
	site := `route {
	mcp_ratelimit {
		zone upstream
		meter *
		preauth 100/s burst 100
	}
	rewrite * /throttle
	reverse_proxy $BACKEND
}`
	e := startSite(t, site)
	for i := range 3 {
		r := e.call(i)
		if r.Status != http.StatusTooManyRequests {
			t.Fatalf("status %d, want the backend's 429", r.Status)
		}
		if strings.TrimSpace(string(r.Body)) != "upstream provider quota" || r.Header.Get("Retry-After") != "7" {
			t.Fatalf("the backend's 429 was not passed through untouched: %v %q", r.Header, r.Body)
		}
		if r.Header.Get("Cache-Control") == "no-store" || strings.Contains(string(r.Body), "jsonrpc") {
			t.Fatalf("the backend's 429 was rewritten: %v %q", r.Header, r.Body)
		}
		// Its RateLimit fields are the backend's alone, not mixed with
		// the ones this handler sets on metered answers.
		if p, v := r.Header.Values("RateLimit-Policy"), r.Header.Values("RateLimit"); len(p) != 1 || p[0] != `"upstream";q=100;w=60` ||
			len(v) != 1 || v[0] != `"upstream";r=0;t=7` {
			t.Fatalf("the backend's 429 carries RateLimit-Policy %q and RateLimit %q, want only the backend's", p, v)
		}
	}
	// A backend whose values read exactly like this handler's (a second
	// Caddy with the same policy) keeps them: only the leading values,
	// which this handler set before the backend answered, are withdrawn.
	same := `"preauth";q=100;w=1`
	r := e.call(3, "X-Upstream-Policy", same, "X-Upstream-RateLimit", `"preauth";r=0;t=1`)
	if p, v := r.Header.Values("RateLimit-Policy"), r.Header.Values("RateLimit"); r.Status != http.StatusTooManyRequests ||
		len(p) != 1 || p[0] != same || len(v) != 1 || v[0] != `"preauth";r=0;t=1` {
		t.Fatalf("a backend 429 with this handler's own policy: %d, RateLimit-Policy %q, RateLimit %q; want the backend's values once each", r.Status, p, v)
	}
	st, body := e.caddy.AdminDo(t, http.MethodGet, "/metrics", nil)
	if st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
	if v := promValue(string(body), "mcp_ratelimit_upstream_throttled_total", `zone="upstream"`); v != 4 {
		t.Fatalf("mcp_ratelimit_upstream_throttled_total = %v, want 4", v)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "mcp_ratelimit_refusals_total{") && strings.Contains(line, `zone="upstream"`) &&
			!strings.HasSuffix(line, " 0") {
			t.Fatalf("an upstream 429 counted as our refusal: %s", line)
		}
	}
	var z struct {
		Upstream int              `json:"upstream_throttled"`
		Refusals map[string]int64 `json:"refusals"`
	}
	e.caddy.AdminJSON(t, "/mcp_ratelimit/upstream", &z)
	if z.Upstream != 4 {
		t.Fatalf("admin upstream_throttled = %d, want 4: %+v", z.Upstream, z)
	}
	for l, n := range z.Refusals {
		if n != 0 {
			t.Fatalf("admin refusals[%s] = %d after upstream 429s only", l, n)
		}
	}
}
