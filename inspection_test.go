package mcplimit_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// drained starts Caddy with block, proves token and spends the tenant's
// single token, so every further metered request must be refused.
func drained(t *testing.T, block, token string) *env {
	t.Helper()
	e := start(t, block)
	e.prove(token)
	if r := e.call(1, "Authorization", "Bearer "+token); r.Status != http.StatusOK {
		t.Fatalf("draining call: %d %s", r.Status, r.Body)
	}
	return e
}

// batch renders a JSON array of n echo tools/call entries with ids
// first..first+n-1.
func batch(first, n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = harness.ToolCall(first+i, "echo", map[string]any{"text": "b"})
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// unchanged fails the test when a tool call reached the backend since
// before was taken.
func unchanged(t *testing.T, e *env, before int64, what string) {
	t.Helper()
	if n := e.backend.ToolCalls(); n != before {
		t.Fatalf("%s: %d tool call(s) reached the backend", what, n-before)
	}
}

// TestDrainedBucketNothingReachesTheBackend is the issue "on a drained
// bucket none of these reaches the backend": every way of wrapping a tool
// call is charged and refused.
func TestDrainedBucketNothingReachesTheBackend(t *testing.T) {
	const tok = "valid-drained"
	e := drained(t, "tenant 1/m burst 1\nquota off", tok)
	auth := []string{"Authorization", "Bearer " + tok}
	before := e.backend.ToolCalls()

	call := harness.ToolCall(2, "echo", map[string]any{"text": "x"})
	deep := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","deep":` +
		strings.Repeat("[", 12000) + strings.Repeat("]", 12000) + `}}}`
	cases := []struct {
		name string
		body string
		hdr  []string
	}{
		{"batch of 25", batch(100, 25), nil},
		{"batch under a revision without batches", batch(100, 25), []string{"MCP-Protocol-Version", "2025-06-18"}},
		{"content-type with semicolon", call, []string{"Content-Type", "application/json;"}},
		{"content-type text/plain", call, []string{"Content-Type", "text/plain"}},
		{"no content-type", call, []string{"Content-Type", ""}},
		{"content-type upper case", call, []string{"Content-Type", "APPLICATION/JSON"}},
		{"content-type with charset", call, []string{"Content-Type", "application/json; charset=utf-8"}},
		{"duplicate method, call first", `{"jsonrpc":"2.0","id":2,"method":"tools/call","method":"tools/list","params":{"name":"echo","arguments":{}}}`, nil},
		{"duplicate method, call last", `{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
		{"Method key", `{"jsonrpc":"2.0","id":2,"Method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
		{"METHOD key", `{"jsonrpc":"2.0","id":2,"METHOD":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
		{"Params/Name keys", `{"jsonrpc":"2.0","id":2,"method":"tools/call","Params":{"Name":"echo","Arguments":{}}}`, nil},
		{"PARAMS/NAME keys", `{"jsonrpc":"2.0","id":2,"method":"tools/call","PARAMS":{"NAME":"echo"}}`, nil},
		{"escaped slash in method", `{"jsonrpc":"2.0","id":2,"method":"tools\u002fcall","params":{"name":"echo","arguments":{}}}`, nil},
		{"escaped key", `{"jsonrpc":"2.0","id":2,"\u006dethod":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
		{"fully escaped method", `{"jsonrpc":"2.0","id":2,"method":"\u0074\u006f\u006f\u006c\u0073\u002f\u0063\u0061\u006c\u006c","params":{"name":"echo"}}`, nil},
		{"overlong slash in method (Jackson reads bytes)", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools\xc0\xafcall\",\"params\":{\"name\":\"echo\"}}", nil},
		{"overlong letter in the method key", "{\"jsonrpc\":\"2.0\",\"id\":2,\"meth\xc1\xafd\":\"tools/call\",\"params\":{\"name\":\"echo\"}}", nil},
		{"method in a one-element array (Jackson unwraps it)", `{"jsonrpc":"2.0","id":2,"method":["tools/call"],"params":{"name":"echo"}}`, nil},
		{"separated method key (encoding/json/v2 ignoring case)", `{"jsonrpc":"2.0","id":2,"me_thod":"tools/call","params":{"name":"echo"}}`, nil},
		{"NUL ending the method (cJSON reads a C string)", `{"jsonrpc":"2.0","id":2,"method":"tools/call\u0000","params":{"name":"echo"}}`, nil},
		{"NUL ending the method key", `{"jsonrpc":"2.0","id":2,"method\u0000":"tools/call","params":{"name":"echo"}}`, nil},
		{"call in a __proto__ object (hjson, jsonc-parser)", `{"jsonrpc":"2.0","id":2,"__proto__":{"method":"tools/call","params":{"name":"echo"}}}`, nil},
		{"UTF-8 BOM", "\xef\xbb\xbf" + call, nil},
		{"whitespace", " \r\n\t{ \"jsonrpc\" : \"2.0\" ,\n \"id\" : 2 ,\t\"method\"\n:\n\"tools/call\" , \"params\" : { \"name\" : \"echo\" } }\n\n ", nil},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil},
		{"truncated JSON", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"`, nil},
		{"not JSON", `hello there`, nil},
		{"deep nesting", deep, nil},
		{"batch hiding a call among discovery", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},` + call + `]`, nil},
		{"Mcp-Method header says tools/list", call, []string{"Mcp-Method", "tools/list", "Mcp-Name", "list"}},
		{"Mcp-Method header says initialize", call, []string{"Mcp-Method", "initialize"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.post(c.body, append(append([]string{}, auth...), c.hdr...)...)
			if r.Status != http.StatusTooManyRequests {
				t.Fatalf("status %d, want 429; body %s", r.Status, r.Body)
			}
			if r.Header.Get("Retry-After") == "" {
				t.Fatalf("no Retry-After: %v", r.Header)
			}
			unchanged(t, e, before, c.name)
		})
	}

	// Discovery and the handshake still pass on the drained bucket.
	for _, body := range []string{
		harness.Initialize(50),
		`{"jsonrpc":"2.0","id":51,"method":"tools/list"}`,
	} {
		r := e.post(body, auth...)
		if r.Status == http.StatusTooManyRequests {
			t.Fatalf("an unmetered method was refused on a drained bucket: %s -> %s", body, r.Body)
		}
		if r.Status != http.StatusOK {
			t.Fatalf("%s: status %d %s", body, r.Status, r.Body)
		}
	}
	unchanged(t, e, before, "discovery")
}

// TestBatchRefusalAnswersEveryEntryWithAnID checks the shape of a
// batch's refusal: an array, one error per entry with an id, ids echoed,
// nothing for notifications.
// A POST without a body (Content-Length: 0) is an empty message, which
// is no valid JSON: it costs 1 on a metered route, as a chunked empty
// body does.
func TestEmptyPostCostsOne(t *testing.T) {
	e := start(t, "zone emptypost\ntenant 1/m burst 2\nquota off")
	e.prove("valid-emptypost")
	auth := []string{"Authorization", "Bearer valid-emptypost"}
	r := e.post("", auth...)
	if rl := r.Header.Get("RateLimit"); !strings.HasPrefix(rl, `"tenant";r=1;`) {
		t.Fatalf("empty POST: %d, RateLimit %q, want one of the tenant's two tokens spent", r.Status, rl)
	}
	e.post("", auth...)
	refusal(t, e.call(3, auth...), http.StatusTooManyRequests, "tenant")
}

func TestBatchRefusalAnswersEveryEntryWithAnID(t *testing.T) {
	const tok = "valid-batchshape"
	e := drained(t, "tenant 1/m burst 1\nquota off", tok)
	body := `[` +
		harness.ToolCall(11, "echo", nil) + `,` +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}},` +
		`{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"echo"}},` +
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}},` +
		`{"jsonrpc":"2.0","id":99,"result":{}},` +
		`{"jsonrpc":"2.0","id":98,"query":"no method, no result"},` +
		`{"jsonrpc":"2.0","id":12,"method":"tools/list"},` +
		`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"echo"}},` +
		`{"jsonrpc":"2.0","id":true,"method":"tools/list"}` +
		`]`
	before := e.backend.ToolCalls()
	r := e.post(body, "Authorization", "Bearer "+tok)
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var out []rpcError
	r.JSON(t, &out)
	if len(out) != 6 {
		t.Fatalf("%d answers, want 6 (one per request entry with an id; none for a response): %s", len(out), r.Body)
	}
	// An entry with an id but neither a method nor a result is an invalid
	// request, answered; ids JSON-RPC does not allow (an object, a
	// boolean) are answered as invalid requests are, with id null.
	wantIDs := []any{float64(11), "abc", float64(98), float64(12), nil, nil}
	for i, a := range out {
		if a.ID != wantIDs[i] {
			t.Fatalf("answer %d has id %v, want %v: %s", i, a.ID, wantIDs[i], r.Body)
		}
		if a.Error == nil || a.Error.Data.Limit != "tenant" || a.Error.Data.Code != "TENANT_RATE_LIMITED" {
			t.Fatalf("answer %d: %s", i, r.Body)
		}
	}
	unchanged(t, e, before, "batch")

	// A batch of notifications only: refused, no JSON-RPC answer at all.
	r = e.post(`[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}]`, "Authorization", "Bearer "+tok)
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("notification batch: status %d: %s", r.Status, r.Body)
	}
	if len(bytes.TrimSpace(r.Body)) != 0 {
		t.Fatalf("a refused notification got an answer: %s", r.Body)
	}
	unchanged(t, e, before, "notification batch")
}

// A client's answer to a server request (a JSON-RPC response) gets no
// JSON-RPC answer when refused, like a notification, and so keeps the
// refusal status whatever refuse_with says: both official SDKs take a 200
// to such a POST as delivered, and the server's request would wait in vain.
func TestRefusedResponsesGetTheStatusAndNoAnswer(t *testing.T) {
	e := start(t, "preauth 1/m burst 1\nrefuse_with jsonrpc")
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":5,"result":{"roots":[]}}`,
		`{"jsonrpc":"2.0","id":6,"error":{"code":-1,"message":"no"}}`,
		`[{"jsonrpc":"2.0","id":7,"result":{}},{"jsonrpc":"2.0","method":"notifications/progress"}]`,
	} {
		r := e.post(body)
		if r.Status != http.StatusTooManyRequests || len(bytes.TrimSpace(r.Body)) != 0 {
			t.Fatalf("refused %s: %d %s, want 429 and no body", body, r.Status, r.Body)
		}
	}
	// A batch mixing a response with a request answers the request only.
	r := e.post(`[{"jsonrpc":"2.0","id":8,"result":{}},` + harness.ToolCall(9, "echo", nil) + `]`)
	var out []rpcError
	r.JSON(t, &out)
	if r.Status != http.StatusOK || len(out) != 1 || out[0].ID != float64(9) || out[0].Error == nil {
		t.Fatalf("batch of a response and a call: %d %s, want 200 with one error, for id 9", r.Status, r.Body)
	}
}

// Under refuse_with jsonrpc, a refusal that cannot echo the request's id
// (a pre-auth refusal of a body too large to read for it) is answered by
// status: a 200 whose answer has id null is one an SDK cannot match, and
// the Go SDK ends its session on it.
func TestUnreadRefusalIsAnsweredByStatus(t *testing.T) {
	e := start(t, "preauth 1/m burst 1\nrefuse_with jsonrpc")
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	big := harness.ToolCall(2, "echo", map[string]any{"text": strings.Repeat("x", 70<<10)})
	r := e.post(big)
	var got rpcError
	r.JSON(t, &got)
	if r.Status != http.StatusTooManyRequests || got.ID != nil || got.Error == nil || got.Error.Data.Limit != "preauth" {
		t.Fatalf("unread body refused: %d %.300s, want 429 with an id-null pre-auth error", r.Status, r.Body)
	}
	if r := e.call(3); r.Status != http.StatusOK {
		t.Fatalf("a refusal whose body was read: %d %s, want 200 under refuse_with jsonrpc", r.Status, r.Body)
	}
}

// An invalid body refused by a layer is answered by status under
// refuse_with jsonrpc too: its answer's id is null, which a client cannot
// match to its request in a 200.
// An id holding invalid UTF-8 is echoed with each such byte as U+FFFD,
// as encoding/json reads it: a refusal is UTF-8 JSON, whatever was sent.
func TestRefusalEchoesAnInvalidUTF8IDAsUTF8(t *testing.T) {
	auth := []string{"Authorization", "Bearer valid-utf8-id"}
	e := drained(t, "tenant 1/m burst 1\nquota off", "valid-utf8-id")
	call := "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}"
	for _, body := range []string{call, "[" + call + "]"} {
		r := e.post(body, auth...)
		if r.Status != http.StatusTooManyRequests || !utf8.Valid(r.Body) || !json.Valid(r.Body) || !bytes.Contains(r.Body, []byte("\"id\":\"a\ufffdb\"")) {
			t.Fatalf("%q refused: %d %q, want UTF-8 JSON echoing \"a\\ufffdb\"", body, r.Status, r.Body)
		}
	}
}

func TestInvalidBodyRefusalIsAnsweredByStatus(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nquota off\nrefuse_with jsonrpc")
	auth := []string{"Authorization", "Bearer valid-invalid-body"}
	e.prove("valid-invalid-body")
	e.drain(auth...)
	r := e.post(harness.ToolCall(2, "echo", map[string]any{"text": "x"})+" trailing", auth...)
	var got rpcError
	r.JSON(t, &got)
	if r.Status != http.StatusTooManyRequests || got.ID != nil || got.Error == nil || got.Error.Data.Limit != "tenant" {
		t.Fatalf("invalid body refused: %d %s, want 429 with an id-null tenant error", r.Status, r.Body)
	}
	if r := e.call(3, auth...); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"id":3`)) {
		t.Fatalf("a valid body refused: %d %s, want 200 under refuse_with jsonrpc", r.Status, r.Body)
	}
	// So is a valid body whose every answer has id null: its ids are ones
	// JSON-RPC does not allow, or null.
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	}
	for _, body := range []string{call(`{"x":1}`), call("true"), call("[1]"), call("null"), "[" + call("false") + "," + call("null") + "]"} {
		r := e.post(body, auth...)
		if r.Status != http.StatusTooManyRequests || !bytes.Contains(r.Body, []byte(`"id":null`)) || bytes.Contains(r.Body, []byte(`"id":1`)) {
			t.Fatalf("%s refused: %d %s, want 429 with id-null errors", body, r.Status, r.Body)
		}
	}
	// A batch with one id a client can match is answered as the mode says.
	if r := e.post("["+call("true")+","+call("4")+"]", auth...); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"id":4`)) {
		t.Fatalf("a batch with one matchable id refused: %d %s, want 200 under refuse_with jsonrpc", r.Status, r.Body)
	}
}

// Under refuse_with tool_result, a batch entry whose id is one JSON-RPC
// does not allow gets its refusal as an error with id null, never as a
// result: JSON-RPC allows a null id only on an error.
func TestToolResultRefusalOfAnUnmatchableEntryIsAnError(t *testing.T) {
	e := start(t, "tenant 1/m burst 1\nquota off\nrefuse_with tool_result")
	auth := []string{"Authorization", "Bearer valid-null-result"}
	e.prove("valid-null-result")
	e.drain(auth...)
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	}
	r := e.post("["+call("false")+","+call("4")+"]", auth...)
	var answers []rpcError
	r.JSON(t, &answers)
	if r.Status != http.StatusOK || len(answers) != 2 {
		t.Fatalf("batch refused: %d %s, want 200 with two answers", r.Status, r.Body)
	}
	if a := answers[0]; a.ID != nil || a.Result != nil || a.Error == nil || a.Error.Data.Limit != "tenant" {
		t.Fatalf("the entry with id false: %s, want a tenant error with id null", r.Body)
	}
	if a := answers[1]; a.ID != float64(4) || a.Result == nil || !a.Result.IsError || a.Error != nil {
		t.Fatalf("the entry with id 4: %s, want a tool result with isError", r.Body)
	}
}

// A caller out of pre-auth tokens whose request no wait lets pass is told
// so, not to wait: after the wait, the same call would meet only the
// refusal of the request as sent. What was read of it (its headers, and
// the small body read to echo its ids) is judged as inspection judges it.
func TestPreauthRefusalGivesWayToARefusalOfTheRequestAsSent(t *testing.T) {
	e := start(t, "preauth 1/h burst 1\nmax_batch 3\nmax_body 400\ntool echo {\narg limit max 10\n}")
	argCall := func(id, limit int) string {
		return harness.ToolCall(id, "echo", map[string]any{"text": "x", "limit": limit})
	}
	if r := e.call(1); r.Status != http.StatusOK {
		t.Fatalf("the one pre-auth token: %d %s", r.Status, r.Body)
	}
	for i := range 2 {
		r := e.post(argCall(2, 11))
		var got rpcError
		r.JSON(t, &got)
		if r.Status != http.StatusBadRequest || got.Error == nil || got.Error.Code != -32602 || got.ID != float64(2) {
			t.Fatalf("call %d over an arg bound with pre-auth empty: %d %s, want 400 and -32602", i, r.Status, r.Body)
		}
	}
	pings := make([]string, 4)
	for i := range pings {
		pings[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"ping"}`
	}
	if r := e.post("[" + strings.Join(pings, ",") + "]"); r.Status != http.StatusBadRequest || !bytes.Contains(r.Body, []byte("max_batch")) && !bytes.Contains(r.Body, []byte("Batch too large")) {
		t.Fatalf("batch over max_batch with pre-auth empty: %d %s, want 400", r.Status, r.Body)
	}
	// Entries in one-element arrays are messages too, as Jackson reads
	// a list of them.
	if r := e.post("[[" + strings.Join(pings, "],[") + "]]"); r.Status != http.StatusBadRequest || !bytes.Contains(r.Body, []byte("max_batch")) && !bytes.Contains(r.Body, []byte("Batch too large")) {
		t.Fatalf("batch of wrapped entries over max_batch with pre-auth empty: %d %s, want 400", r.Status, r.Body)
	}
	if r := e.post(argCall(3, 1), "Content-Encoding", "gzip"); r.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("gzip body with pre-auth empty: %d %s, want 415", r.Status, r.Body)
	}
	if r := e.post(argCall(4, 1) + strings.Repeat(" ", 400)); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over max_body with pre-auth empty: %d %s, want 413", r.Status, r.Body)
	}
	// Two credentials, or a protocol upgrade, are refused as sent too.
	twice, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(argCall(6, 1)))
	twice.Header["Authorization"] = []string{"Bearer a", "Bearer b"}
	if r := harness.Do(t, twice); r.Status != http.StatusBadRequest || !bytes.Contains(r.Body, []byte(`"id":6`)) {
		t.Fatalf("two Authorization headers with pre-auth empty: %d %s, want 400 echoing id 6", r.Status, r.Body)
	}
	if r := e.post(argCall(7, 1), "Connection", "Upgrade", "Upgrade", "websocket"); r.Status != http.StatusBadRequest {
		t.Fatalf("a protocol upgrade with pre-auth empty: %d %s, want 400", r.Status, r.Body)
	}
	// A call that passes once the wait is over is told to wait.
	got := refusal(t, e.post(argCall(5, 10)), http.StatusTooManyRequests, "preauth")
	if !strings.Contains(got.Error.Message, "will work then") {
		t.Fatalf("a call within its bounds: %s, want the wait", got.Error.Message)
	}
}

func TestUnprovenBatchCostsItsSizeAndIsRefusedWhole(t *testing.T) {
	e := start(t, "preauth 1/m burst 5")
	r := e.post(batch(1, 25))
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("batch of 25 from an unproven caller: %d %v %s", r.Status, r.Header, r.Body)
	}
	var out []rpcError
	r.JSON(t, &out)
	if len(out) != 25 {
		t.Fatalf("%d answers for a batch of 25: %s", len(out), r.Body)
	}
	for i, a := range out {
		if a.ID != float64(1+i) || a.Error == nil || a.Error.Data.Limit != "preauth" {
			t.Fatalf("answer %d: %+v", i, a)
		}
	}
	if n := e.backend.ToolCalls(); n != 0 {
		t.Fatalf("%d calls of a refused batch reached the backend", n)
	}
	if n := e.backend.Requests(); n != 0 {
		t.Fatalf("%d requests reached the backend", n)
	}
	// The refused batch consumed nothing: a single call still fits.
	if r := e.call(30); r.Status != http.StatusOK {
		t.Fatalf("after a refused batch the pre-auth budget must be intact: %d %s", r.Status, r.Body)
	}
}

// An unproven request costs its metered cost when that is more than 1,
// from 2 on: a batch of two calls takes two of the address's tokens.
func TestUnprovenRequestCostingTwoPaysTwo(t *testing.T) {
	e := start(t, "zone unproventwo\npreauth 1/h burst 3")
	r := e.post(batch(1, 2))
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("RateLimit"), `"preauth";r=1;`) {
		t.Fatalf("unproven batch of 2: %d, RateLimit %q, want 2 of 3 tokens spent", r.Status, r.Header.Get("RateLimit"))
	}
	var out []rpcError
	refused := e.post(batch(3, 2))
	refused.JSON(t, &out)
	if refused.Status != http.StatusTooManyRequests || len(out) != 2 || out[0].Error == nil || out[0].Error.Data.Limit != "preauth" {
		t.Fatalf("second unproven batch of 2 with 1 token left: %d %s", refused.Status, refused.Body)
	}
}

func TestOversizeBodyIs413(t *testing.T) {
	const tok = "valid-big"
	e := start(t, "max_body 1KiB\ntenant 10/s burst 100\nquota off")
	e.prove(tok)
	before := e.backend.ToolCalls()
	big := harness.ToolCall(3, "echo", map[string]any{"text": strings.Repeat("a", 2048)})
	check := func(r *harness.Response, what string) {
		t.Helper()
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: status %d, want 413: %s", what, r.Status, r.Body)
		}
		// Every refusal carries these (SPEC "Refusals"), body rules too.
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") ||
			r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("Retry-After") != "1" {
			t.Fatalf("%s: refusal headers %v", what, r.Header)
		}
		var got rpcError
		r.JSON(t, &got)
		if got.JSONRPC != "2.0" || got.Error == nil || got.Error.Message == "" {
			t.Fatalf("%s: not a JSON-RPC error: %s", what, r.Body)
		}
		unchanged(t, e, before, what)
	}
	check(e.post(big, "Authorization", "Bearer "+tok), "with Content-Length")

	// Chunked: no Content-Length, the limit still holds.
	check(postChunkedAtOnce(t, e.mcp, big, "Authorization", "Bearer "+tok), "chunked")

	// A chunked body under the limit is charged and handed on whole.
	small := harness.ToolCall(4, "echo", map[string]any{"text": "chunked héllo ✓"})
	r := postChunked(t, e.mcp, small, "Authorization", "Bearer "+tok)
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte("chunked héllo ✓")) {
		t.Fatalf("chunked call under the limit: %d %s", r.Status, r.Body)
	}
	if e.backend.ToolCalls() != before+1 {
		t.Fatal("the chunked call did not reach the backend")
	}
}

// postChunked posts body without a Content-Length (chunked transfer
// encoding), with the MCP headers plus hdr.
func postChunked(t *testing.T, url, body string, hdr ...string) *harness.Response {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		// Write in pieces so the body really arrives in several chunks.
		for len(body) > 0 {
			n := min(300, len(body))
			if _, err := pw.Write([]byte(body[:n])); err != nil {
				return
			}
			body = body[n:]
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if req.ContentLength != 0 {
		t.Fatalf("request has a Content-Length (%d); it must be chunked", req.ContentLength)
	}
	return harness.Do(t, req)
}

// postChunkedAtOnce posts body in chunks of 300 bytes, as postChunked
// does, but writes the whole request before it reads the answer, over a
// connection of its own: a server that refuses the body before its end
// and closes the connection would otherwise fail a client's write of the
// next chunk, and Go's client then drops the answer it was sent.
func postChunkedAtOnce(t *testing.T, url, body string, hdr ...string) *harness.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n", req.URL.RequestURI(), req.URL.Host)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&raw, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	raw.WriteString("\r\n")
	for len(body) > 0 {
		n := min(300, len(body))
		fmt.Fprintf(&raw, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	raw.WriteString("0\r\n\r\n")
	conn, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &harness.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func TestEncodedBodyIs415(t *testing.T) {
	const tok = "valid-gzip"
	e := start(t, "tenant 10/s burst 100\nquota off")
	e.prove(tok)
	before := e.backend.ToolCalls()
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(harness.ToolCall(5, "echo", map[string]any{"text": "zipped"})))
	_ = zw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.mcp, bytes.NewReader(zb.Bytes()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer "+tok)
	r := harness.Do(t, req)
	if r.Status != http.StatusUnsupportedMediaType || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("gzip body: status %d (Retry-After %q), want 415 with Retry-After 1: %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	var got rpcError
	r.JSON(t, &got)
	if got.Error == nil {
		t.Fatalf("no JSON-RPC error: %s", r.Body)
	}
	unchanged(t, e, before, "gzip")
}

// A body refused for its coding or its charset is answered with the ids
// it carries when it reads as JSON anyway (SPEC: refusals echo the
// request id): one sent unencoded under Content-Encoding, a batch under a
// foreign charset. A body that is really encoded has no id to read.
func TestEncodedOrForeignBodyRefusalEchoesItsIds(t *testing.T) {
	e := start(t, "zone echo415\nquota off")
	before := e.backend.ToolCalls()
	r := e.post(harness.ToolCall(5, "echo", map[string]any{"text": "plain"}), "Content-Encoding", "gzip")
	if got := refusal(t, r, http.StatusUnsupportedMediaType, ""); fmt.Sprint(got.ID) != "5" {
		t.Fatalf("unencoded body under gzip: id %s, want 5: %s", got.ID, r.Body)
	}
	r = e.post(batch(7, 2), "Content-Type", "application/json; charset=iso-8859-1")
	var answers []rpcError
	r.JSON(t, &answers)
	if r.Status != http.StatusUnsupportedMediaType || len(answers) != 2 || fmt.Sprint(answers[0].ID) != "7" || fmt.Sprint(answers[1].ID) != "8" {
		t.Fatalf("batch under latin1: %d %s, want 415 answering ids 7 and 8", r.Status, r.Body)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(harness.ToolCall(9, "echo", map[string]any{"text": "zipped"})))
	_ = zw.Close()
	r = e.post(zb.String(), "Content-Encoding", "gzip")
	if got := refusal(t, r, http.StatusUnsupportedMediaType, ""); got.ID != nil {
		t.Fatalf("gzip body: id %s, want null: %s", got.ID, r.Body)
	}
	unchanged(t, e, before, "refused bodies")
	// So is one whose pre-auth budget is spent: no wait lets it pass, so
	// it is told of its coding, with its id.
	e = start(t, "zone echo415_spent\nquota off\npreauth 1/h burst 1")
	e.call(1)
	r = e.post(harness.ToolCall(6, "echo", map[string]any{"text": "plain"}), "Content-Encoding", "gzip")
	if got := refusal(t, r, http.StatusUnsupportedMediaType, ""); fmt.Sprint(got.ID) != "6" {
		t.Fatalf("unencoded body under gzip, pre-auth spent: id %v, want 6: %s", got.ID, r.Body)
	}
}

// The body rules' refusals carry the zone's error_code as every other
// refusal of the limiter does (SPEC: the JSON-RPC code is configurable),
// not a code of JSON-RPC's reserved range, which error_code stays out of.
func TestBodyRuleRefusalsUseTheConfiguredErrorCode(t *testing.T) {
	e := start(t, "zone bodycode\nerror_code -31099\nmax_body 2KiB\nquota off")
	for name, r := range map[string]*harness.Response{
		"413":           e.post(harness.ToolCall(1, "echo", map[string]any{"text": strings.Repeat("x", 4<<10)})),
		"415":           e.post(harness.ToolCall(1, "echo", map[string]any{"text": "x"}), "Content-Encoding", "br"),
		"400 max_batch": e.post(batch(1, 33)),
	} {
		var got rpcError
		if err := json.Unmarshal(r.Body, &got); err != nil { // a batch's answers
			var answers []rpcError
			if json.Unmarshal(r.Body, &answers) == nil && len(answers) > 0 {
				got = answers[0]
			}
		}
		if r.Status < 400 || r.Status == http.StatusTooManyRequests || got.Error == nil || got.Error.Code != -31099 {
			t.Errorf("%s: %d %s, want a body rule's refusal with code -31099", name, r.Status, r.Body)
		}
	}
}

func TestBatchOverMaxBatchIs400(t *testing.T) {
	const tok = "valid-maxbatch"
	e := start(t, "tenant 10/s burst 100\nquota off")
	e.prove(tok)
	before := e.backend.ToolCalls()
	r := e.post(batch(1, 33), "Authorization", "Bearer "+tok)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("batch of 33: status %d, want 400: %s", r.Status, r.Body)
	}
	if !bytes.Contains(r.Body, []byte(`"error"`)) {
		t.Fatalf("no JSON-RPC error: %s", r.Body)
	}
	unchanged(t, e, before, "batch of 33")
	var each []struct{ ID any }
	if err := json.Unmarshal(r.Body, &each); err != nil || len(each) != 33 {
		t.Fatalf("batch of 33: want one error per entry: %s", r.Body)
	}
}

// An invalid body read more than one way counts, against max_batch, the
// entries of the reading that has most, as one backend runs them, not the
// entries of every reading together: this Hjson batch of two is read as
// one entry up to the syntax error and as two by the Hjson reading.
func TestMaxBatchCountsOneReading(t *testing.T) {
	const tok = "valid-maxbatch-readings"
	e := start(t, "max_batch 2\ntenant 10/s burst 100\nquota off")
	e.prove(tok)
	body := "[\n {\n  jsonrpc: 2.0\n  method: tools/call\n  id: 7\n }\n {\n  jsonrpc: 2.0\n  method: tools/call\n }\n]"
	if r := e.post(body, "Authorization", "Bearer "+tok); bytes.Contains(r.Body, []byte("Batch too large")) {
		t.Fatalf("a batch of two under max_batch 2: %d %s", r.Status, r.Body)
	}
	three := "[\n {\n  method: tools/call\n }\n {\n  method: tools/call\n }\n {\n  method: tools/call\n }\n]"
	if r := e.post(three, "Authorization", "Bearer "+tok); r.Status != http.StatusBadRequest || !bytes.Contains(r.Body, []byte("Batch too large")) {
		t.Fatalf("a batch of three under max_batch 2: %d %s", r.Status, r.Body)
	}
}

// A refusal answers a batch of more than 128 entries (and more than
// max_batch) with one error, not one per entry: a 64 KiB body of
// `[1,1,…]` from a caller pre-auth already refuses, or a proven one's
// oversized batch, must not draw megabytes of answers.
func TestRefusalOfAnOversizedBatchIsOneError(t *testing.T) {
	e := start(t, "zone echo-bound\npreauth 1/m burst 2")
	e.prove("valid-echo")
	e.call(1) // spends the address's last token
	body := "[" + strings.TrimSuffix(strings.Repeat("1,", 30000), ",") + "]"
	r := e.post(body)
	if r.Status != http.StatusTooManyRequests || len(r.Body) > 2048 {
		t.Fatalf("pre-auth refusal of a %d-byte batch: %d, %d bytes of answer, want 429 and one error", len(body), r.Status, len(r.Body))
	}
	if !bytes.HasPrefix(bytes.TrimSpace(r.Body), []byte("{")) {
		t.Fatalf("answer is not one error object: %.200s", r.Body)
	}
	big := batch(1, 129)
	if r := e.post(big, "Authorization", "Bearer valid-echo"); r.Status != http.StatusBadRequest || !bytes.HasPrefix(r.Body, []byte("{")) {
		t.Fatalf("batch of 129: %d %.200s, want 400 with one error", r.Status, r.Body)
	}
}

// The one error for an oversized batch has id null, so it is answered by
// status under refuse_with jsonrpc too (a 200 with id null ends the Go
// SDK's session), by an unproven caller out of pre-auth tokens too (no
// wait lets it pass: 400, not 429); a batch of notifications alone gets
// no answer however large; and a batch within a max_batch above 128 is
// still answered one error per entry.
func TestOversizedBatchRefusalKeepsTheAnswerRules(t *testing.T) {
	e := start(t, "zone echo-rules\nrefuse_with jsonrpc\npreauth 1/m burst 2\nmax_batch 200\ntenant 1/m burst 1\nquota off")
	e.prove("valid-rules")
	e.call(1) // spends the address's last pre-auth token
	r := e.post(batch(1, 201))
	if r.Status != http.StatusBadRequest || !bytes.HasPrefix(r.Body, []byte(`{"jsonrpc":"2.0","id":null`)) {
		t.Fatalf("unproven batch of 201 under refuse_with jsonrpc: %d %.200s, want 400 and one error with id null", r.Status, r.Body)
	}
	notes := "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/progress"},`, 300), ",") + "]"
	if r := e.post(notes); r.Status != http.StatusBadRequest || len(r.Body) != 0 {
		t.Fatalf("unproven batch of 300 notifications: %d %.200s, want 400 and no answer", r.Status, r.Body)
	}
	notes = "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/progress"},`, 150), ",") + "]"
	if r := e.post(notes); r.Status != http.StatusTooManyRequests || len(r.Body) != 0 {
		t.Fatalf("unproven batch of 150 notifications: %d %.200s, want 429 and no answer", r.Status, r.Body)
	}
	// 150 calls fit max_batch 200; the tenant's burst of 1 refuses them.
	r = e.post(batch(1, 150), "Authorization", "Bearer valid-rules")
	var each []struct{ ID int }
	if err := json.Unmarshal(r.Body, &each); err != nil || len(each) != 150 || each[149].ID != 150 {
		t.Fatalf("batch of 150 within max_batch 200: %d %.200s, want one error per entry", r.Status, r.Body)
	}
}

func TestPerToolCostIsCharged(t *testing.T) {
	const tok = "valid-cost"
	e := start(t, "cost slow 3\ntenant 1/m burst 5\nquota off")
	e.prove(tok)
	slow := harness.ToolCall(1, "slow", map[string]any{"millis": 0})
	if r := e.post(slow, "Authorization", "Bearer "+tok); r.Status != http.StatusOK {
		t.Fatalf("first slow call: %d %s", r.Status, r.Body)
	}
	before := e.backend.ToolCalls()
	// 2 tokens left; slow costs 3, however its name is spelled.
	for i, body := range []string{
		slow,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","Params":{"Name":"slow","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","name":"slow"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","name":"echo"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"\u0073low"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"sl\xc1\xafw\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",#x\n\"name\":\"slow\"}}",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":["slow"]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[{"name":"slow"}]}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":["slow",{"millis":0}]}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":["slow",`, // cut short
		"jsonrpc=2.0&id=2&method=tools%2Fcall&params%5B0%5D=slow",         // qs: params ["slow"]
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":'slow'}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"na_me":"slow"}}`,
		`{"jsonrpc":"2.0","id":2,"params":{"name":"slow",},"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":2,"x":[,],"method":"tools/call","params":{"name":"slow"}}`,
		`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}},,{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}},,` +
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo"}}]`,
		"{\"jsonrpc\":\"2.0\",\"id\":2, // c\r\"method\":\"tools/call\",\"params\":{\"name\":\"slow\"}}",
		// Hjson: members on lines, keys and strings without quotes.
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\"\nparams:{\"name\":\"slow\"}}",
		"{\n jsonrpc: 2.0\n id: 2\n method: tools/call\n params: {\n  name: slow\n }\n}",
		`{"jsonrpc":"2.0",id":2,"method":"tools/call","params":{"name":"slow"}}`,
		// A form, as Express's extended form parser hands it to a
		// TypeScript SDK that checks its Content-Type by substring.
		"jsonrpc=2.0&id=2&method=tools%2Fcall&params%5Bname%5D=slow",
		// body-parser drops a BOM before qs reads the form.
		"\xef\xbb\xbfmethod=tools%2Fcall&params[name]=slow&jsonrpc=2.0&id=2",
		// Koa's body parsers (co-body) read a dot as a bracket, and
		// URLSearchParams (Hono's parseBody) drops a leading '?'.
		"jsonrpc=2.0&id=2&method=tools%2Fcall&params.name=slow",
		"?method=tools%2Fcall&params.name=slow&jsonrpc=2.0&id=2",
		// qs drops an array's holes: params[5] alone is params[0].
		"jsonrpc=2.0&id=2&method=tools%2Fcall&params[5][name]=slow",
	} {
		r := e.post(body, "Authorization", "Bearer "+tok)
		got := refusal(t, r, http.StatusTooManyRequests, "tenant")
		if got.Error.Data.Code != "TENANT_RATE_LIMITED" {
			t.Fatalf("body %d: %s", i, r.Body)
		}
	}
	// A batch's entries in one-element arrays, as Jackson reads a list of
	// messages: the batch is refused whole, each entry answered.
	for _, body := range []string{
		`[[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}]]`,
		`[[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}],[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}],` +
			`[{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo"}}]]`,
	} {
		r := e.post(body, "Authorization", "Bearer "+tok)
		if r.Status != http.StatusTooManyRequests || !bytes.Contains(r.Body, []byte(`"id":2,"error"`)) || !bytes.Contains(r.Body, []byte("TENANT_RATE_LIMITED")) {
			t.Fatalf("%s: %d %s, want the tenant's 429 answering id 2", body, r.Status, r.Body)
		}
	}
	unchanged(t, e, before, "costly slow calls")
	// The 2 tokens left still buy two echo calls.
	for i := range 2 {
		if r := e.call(10+i, "Authorization", "Bearer "+tok); r.Status != http.StatusOK {
			t.Fatalf("echo %d: %d %s", i, r.Status, r.Body)
		}
	}
}

func TestBodyReachesTheBackendUnchanged(t *testing.T) {
	const tok = "valid-unchanged"
	e := start(t, "tenant 10/s burst 100\nquota off")
	e.prove(tok)
	for _, body := range []string{
		harness.ToolCall(1, "echo", map[string]any{"text": "héllo ✓"}),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"h\u00e9llo \u2713"}}}`,
		"{ \"jsonrpc\":\"2.0\",\n\"id\":3,\t\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"héllo ✓\"}}}  ",
	} {
		r := e.post(body, "Authorization", "Bearer "+tok)
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if text := echoText(t, r); text != "héllo ✓" {
			t.Fatalf("backend echoed %q, want %q (body %s)", text, "héllo ✓", r.Body)
		}
	}
}

// echoText extracts the text of an echo tool result from a JSON or SSE
// response.
func echoText(t *testing.T, r *harness.Response) string {
	t.Helper()
	payload := r.Body
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(r.Body), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				payload = []byte(strings.TrimSpace(d))
				break
			}
		}
	}
	var res struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(payload, &res); err != nil || len(res.Result.Content) == 0 {
		t.Fatalf("no tool result in %q (%v)", r.Body, err)
	}
	return res.Result.Content[0].Text
}

func TestNonUTF8CharsetIsRefusedOnAMeteredRoute(t *testing.T) {
	e := start(t, "quota off")
	before := e.backend.ToolCalls()
	for _, ct := range []string{
		"application/json; charset=utf-16",
		// Spellings that hide a UTF-7 charset from a first-parameter,
		// quote-blind reading: the TypeScript SDK's parsers find it.
		`application/json; x="a;charset=utf-8"; charset=utf-7`,
		"application/json; charset=utf-8; charset=utf-7",
	} {
		r := e.post(harness.ToolCall(1, "echo", map[string]any{"text": "hi"}), "Content-Type", ct)
		if r.Status != http.StatusUnsupportedMediaType {
			t.Fatalf("%s: status %d, want 415: %s", ct, r.Status, r.Body)
		}
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a refused body reached the backend")
	}
	if r := e.post(harness.ToolCall(2, "echo", map[string]any{"text": "hi"}), "Content-Type", "application/json; charset=UTF-8"); r.Status != http.StatusOK {
		t.Fatalf("charset=UTF-8 must pass: %d %s", r.Status, r.Body)
	}
}

// A backend that detects JSON's encoding (Python's json.loads does) runs
// every call of a UTF-16 or UTF-32 body, which reads as nothing in UTF-8:
// such bodies are refused, whatever Content-Type says.
func TestUTF16And32BodiesAreRefused(t *testing.T) {
	const tok = "valid-wide"
	e := start(t, "tenant 10/s burst 100\nquota off")
	e.prove(tok)
	call := batch(1, 3)
	var le16, be32 []byte
	for _, u := range utf16.Encode([]rune(call)) {
		le16 = binary.LittleEndian.AppendUint16(le16, u)
	}
	be32 = binary.BigEndian.AppendUint32(be32, 0xFEFF)
	for _, r := range call {
		be32 = binary.BigEndian.AppendUint32(be32, uint32(r))
	}
	before := e.backend.ToolCalls()
	for name, body := range map[string][]byte{"UTF-16LE": le16, "UTF-32BE with BOM": be32} {
		r := e.post(string(body), "Authorization", "Bearer "+tok)
		if r.Status != http.StatusUnsupportedMediaType || !bytes.Contains(r.Body, []byte(`"error"`)) {
			t.Fatalf("%s body: status %d %s, want 415 with a JSON-RPC error", name, r.Status, r.Body)
		}
	}
	unchanged(t, e, before, "UTF-16/32")
}

// A body over a lower bound that request_body sets before this handler,
// sent without a Content-Length (request_body answers one over its size
// itself), is refused as too large, as one over max_body is, naming that
// bound.
func TestBodyOverAnEarlierRequestBodyLimitIs413(t *testing.T) {
	const tok = "valid-rb"
	e := startSite(t, "request_body {\n\tmax_size 1KB\n}\nmcp_ratelimit {\n\tzone rb\n\ttenant 10/s burst 100\n\tquota off\n}\nreverse_proxy $BACKEND")
	e.prove(tok)
	before := e.backend.ToolCalls()
	r := postChunkedAtOnce(t, e.mcp, harness.ToolCall(3, "echo", map[string]any{"text": strings.Repeat("a", 2048)}), "Authorization", "Bearer "+tok)
	var got rpcError
	r.JSON(t, &got)
	if r.Status != http.StatusRequestEntityTooLarge || got.Error == nil || !strings.Contains(got.Error.Message, "the limit is 1000 bytes") {
		t.Fatalf("chunked body over request_body's max_size: %d %s, want our 413 naming 1000 bytes", r.Status, r.Body)
	}
	unchanged(t, e, before, "over request_body's limit")
}
