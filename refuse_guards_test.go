package mcplimit_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// Under refuse_with tool_result, a tools/call that an argument bound
// refuses is answered as SPEC.md says for a request rule: HTTP 400 with
// the JSON-RPC error -32602 naming the argument, never a tool result. A
// tool result would tell the agent the tool ran and failed, and the same
// call would be sent again unchanged.
func TestArgBoundRefusalIsAnErrorUnderToolResult(t *testing.T) {
	e := start(t, "tenant 100/s burst 100\nquota off\nrefuse_with tool_result\ntool echo {\n arg limit max 25\n}")
	h := []string{"Authorization", "Bearer valid-arg-result"}
	e.prove("valid-arg-result")
	before := e.backend.ToolCalls()
	r := e.post(argCall(7, `{"limit":100}`), h...)
	var got rpcError
	r.JSON(t, &got)
	if r.Status != http.StatusBadRequest || got.Result != nil || got.Error == nil || got.Error.Code != -32602 ||
		got.ID != float64(7) || got.Error.Data.Argument != "limit" {
		t.Fatalf("arg bound refusal under refuse_with tool_result: %d %s, want 400 with error -32602 for argument limit, id 7", r.Status, r.Body)
	}
	if e.backend.ToolCalls() != before {
		t.Fatal("a call over the bound reached the backend")
	}
}

// A batch with one call and more than 128 entries that are not messages
// passes max_batch, which counts messages; when the tenant refuses it,
// its answer is the one error with id null that an oversized batch gets,
// and so it is answered by status (429) under refuse_with jsonrpc: a 200
// whose only answer has id null ends the Go SDK's session.
func TestOneErrorForAnOversizedBatchIsAnsweredByStatus(t *testing.T) {
	e := start(t, "refuse_with jsonrpc\ntenant 1/m burst 1\nquota off")
	auth := []string{"Authorization", "Bearer valid-one-for-all"}
	e.prove("valid-one-for-all")
	e.spend("valid-one-for-all", 1) // the tenant's one token
	body := "[" + argCall(2, `{"text":"hi"}`) + strings.Repeat(",1", 200) + "]"
	r := e.post(body, auth...)
	if r.Status != http.StatusTooManyRequests || !bytes.HasPrefix(r.Body, []byte(`{"jsonrpc":"2.0","id":null`)) {
		t.Fatalf("tenant refusal of a call with 200 bare entries under refuse_with jsonrpc: %d %.200s, want 429 and one error with id null", r.Status, r.Body)
	}
	refusal(t, r, http.StatusTooManyRequests, "tenant")
}

// A call costing more than the whole daily quota is told so, with the
// largest request that passes; "(what is left now)" is added only once
// some of the quota is used, when the largest request that passes now is
// smaller than the quota: before any use it would suggest that a larger
// request passes later, which none does.
func TestQuotaTooSmallNamesWhatIsLeftOnlyOnceSomeIsUsed(t *testing.T) {
	skipNearReset(t, nextDay)
	e := start(t, "tenant 100/s burst 100\nquota 5/day\ncost echo 10")
	h := []string{"Authorization", "Bearer valid-too-small"}
	e.prove("valid-too-small")
	want := "Quota too small for this request"
	got := refusal(t, e.call(1, h...), http.StatusTooManyRequests, "quota")
	if msg := got.Error.Message; !strings.Contains(msg, want) || !strings.Contains(msg, "at most 5") || strings.Contains(msg, "what is left now") {
		t.Fatalf("before any use: %q, want %q naming at most 5 and not what is left now", msg, want)
	}
	e.passes(2, "analyze_photo", h...)
	got = refusal(t, e.call(2, h...), http.StatusTooManyRequests, "quota")
	if msg := got.Error.Message; !strings.Contains(msg, want) || !strings.Contains(msg, "at most 3 (what is left now)") {
		t.Fatalf("after 2 of 5: %q, want %q naming at most 3 (what is left now)", msg, want)
	}
}
