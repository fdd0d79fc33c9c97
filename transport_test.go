package mcplimit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// awaitCallsAtEnd makes the test's end wait for the zone's calls in flight to end
// (a backend runs an abandoned call to its end): the zone writes what it
// learnt to the test's storage once they have, which must happen before
// the storage directory is removed, or the write makes it anew.
func (e *env) awaitCallsAtEnd(zone string) {
	e.t.Cleanup(func() {
		harness.Eventually(e.t, 15*time.Second, "the zone's calls to end", func() bool { return e.inflight(zone) == 0 })
	})
}

// inflight reads the zone's in-flight count from the admin API.
func (e *env) inflight(zone string) int {
	e.t.Helper()
	_, body := e.caddy.AdminDo(e.t, http.MethodGet, "/mcp_ratelimit/"+zone, nil)
	var st struct {
		Inflight int `json:"inflight"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		e.t.Fatalf("admin API: %v: %s", err, body)
	}
	return st.Inflight
}

// A client that hangs up does not end its call: the backend (the Go SDK's
// does) runs it to the end, so its slot stays taken until the backend
// answers, or hanging up and calling again would run any number of calls
// at once.
func TestConcurrencyCapRefusesTheThirdAndHoldsAnAbandonedCallUntilItEnds(t *testing.T) {
	e := start(t, "concurrency 2\ntenant 100/s burst 100\nquota off")
	e.awaitCallsAtEnd("default")
	e.prove("valid-gina")
	before := e.backend.ToolCalls()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 2)
	for i := range 2 {
		callCtx := ctx
		if i == 1 {
			var cancelOne context.CancelFunc
			callCtx, cancelOne = context.WithCancel(ctx)
			defer cancelOne()
			go func() {
				// Both slow calls must be running in the backend, not merely admitted,
				// or one may reach it after the count below is taken.
				harness.Eventually(t, 10*time.Second, "two calls in flight", func() bool {
					return e.inflight("default") == 2 && e.backend.ToolCalls() == before+2
				})
				got := refusal(t, e.call(3, "Authorization", "Bearer valid-gina"), http.StatusTooManyRequests, "concurrency")
				// Nothing tells when a call in flight ends: no promise.
				if strings.Contains(got.Error.Message, "will work then") {
					t.Errorf("concurrency refusal promises a retry works: %s", got.Error.Message)
				}
				cancelOne() // the client of the second slow call disconnects
			}()
		}
		go func() {
			millis := 6000
			if i == 1 {
				millis = 3000
			}
			req, _ := http.NewRequestWithContext(callCtx, http.MethodPost, e.mcp,
				strings.NewReader(harness.ToolCall(i, "slow", map[string]any{"millis": millis})))
			req.Header.Set("Authorization", "Bearer valid-gina")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				done <- resp.StatusCode
				return
			}
			done <- 0
		}()
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the disconnected client never returned")
	}
	calls := e.backend.ToolCalls()
	if n := e.inflight("default"); n != 2 {
		t.Fatalf("the hung-up call's slot was freed while the backend still runs it: %d in flight", n)
	}
	refusal(t, e.call(5, "Authorization", "Bearer valid-gina"), http.StatusTooManyRequests, "concurrency")
	if e.backend.ToolCalls() != calls {
		t.Fatal("a call over the cap reached the backend after a client hung up")
	}
	harness.Eventually(t, 10*time.Second, "the abandoned call's slot to be freed when the backend ends it", func() bool { return e.inflight("default") == 1 })
	if r := e.call(4, "Authorization", "Bearer valid-gina"); r.Status != http.StatusOK {
		t.Fatalf("a freed slot must admit the next call: %d %s", r.Status, r.Body)
	}
}

func TestHeldOpenSSEStreamConsumesNothing(t *testing.T) {
	e := start(t, "tenant 1/m burst 2\nquota off")
	e.prove("valid-hank")
	session := e.caddy.URL + "/session"
	init := harness.Post(t, session, harness.Initialize(1), "Authorization", "Bearer valid-hank")
	sid := init.Header.Get("Mcp-Session-Id")
	if init.Status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", init.Status, sid)
	}
	harness.Post(t, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Authorization", "Bearer valid-hank", "Mcp-Session-Id", sid)
	openStream(t, session, "", "Authorization", "Bearer valid-hank", "Mcp-Session-Id", sid)
	for i := range 2 {
		if r := e.call(10+i, "Authorization", "Bearer valid-hank"); r.Status != http.StatusOK {
			t.Fatalf("open streams consumed the tenant's tokens: call %d got %d", i, r.Status)
		}
	}
}

// A GET or DELETE whose length was left open and whose body is then empty
// (chunked with only the last chunk; an HTTP/2 stream ended by an empty
// DATA frame) has no body all the same: it costs nothing, so a drained
// tenant still listens and ends its session.
func TestEmptyChunkedGETAndDELETEConsumeNothing(t *testing.T) {
	e := start(t, "tenant 1/m burst 2\nquota off")
	e.prove("valid-empty")
	host := strings.TrimPrefix(e.caddy.URL, "http://")
	for _, method := range []string{"GET", "DELETE", "GET", "DELETE"} {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "%s /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer valid-empty\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n", method, host)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		_ = conn.Close()
		if resp.StatusCode == http.StatusTooManyRequests || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("%s with an empty chunked body: %d, RateLimit %q: it was charged", method, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	for i := range 2 {
		if r := e.call(10+i, "Authorization", "Bearer valid-empty"); r.Status != http.StatusOK {
			t.Fatalf("empty chunked GETs and DELETEs consumed the tenant's tokens: call %d got %d", i, r.Status)
		}
	}
}

// A GET is charged when it carries a metered body, but its SSE stream is a
// listen stream that never holds the call's answer: the slot it took goes
// when the stream starts, so streams held open cannot fill the zone's
// concurrency cap. (A POST's call keeps its slot until it is answered:
// TestSSECallHoldsItsSlotUntilItsAnswer.)
func TestHeldOpenGETStreamHoldsNoConcurrencySlot(t *testing.T) {
	e := start(t, "preauth 100/s burst 100\ntenant 100/s burst 100\nquota off\nconcurrency 1")
	for i := range 2 {
		openStream(t, e.caddy.URL+"/sse", harness.ToolCall(90+i, "echo", nil))
	}
	if r := e.call(1, "Authorization", "Bearer valid-ivy"); r.Status != http.StatusOK {
		t.Fatalf("a call with two GET streams held open: %d %s", r.Status, r.Body)
	}
}

// openStream opens a GET SSE stream at url, with body if not empty and
// the headers hdr, checks that it starts, and holds it open until the
// test ends.
func openStream(t *testing.T, url, body string, hdr ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, rd)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream %s: %d", url, resp.StatusCode)
	}
}

// sdkClient returns an HTTP client that adds a bearer token.
func sdkClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestLegacySSEClientSeesEveryRefusalPromptly(t *testing.T) {
	for _, mode := range []string{"status", "jsonrpc", "tool_result"} {
		t.Run("refuse_with "+mode, func(t *testing.T) {
			e := start(t, "tenant 1/m burst 2\nquota off\nrefuse_with "+mode)
			client := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			sess, err := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: e.caddy.URL + "/sse", HTTPClient: sdkClient("valid-legacy-" + mode)}, nil)
			if err != nil {
				t.Fatalf("connecting over legacy SSE: %v", err)
			}
			defer sess.Close()
			refused := false
			for i := range 4 {
				callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := sess.CallTool(callCtx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
				hung := callCtx.Err() != nil
				callCancel()
				if hung {
					t.Fatalf("call %d hung instead of seeing the refusal", i)
				}
				if err != nil {
					refused = true
					continue
				}
				if res.IsError {
					t.Fatalf("call %d: a legacy POST refusal must be answered as status, got a tool result", i)
				}
			}
			if !refused {
				t.Fatal("no call was refused")
			}
		})
	}
}

// A legacy POST (Accept without text/event-stream) is refused as
// `status` whatever refuse_with says: HTTP 429 with the JSON-RPC error,
// never a 200 or a tool result its client would not read.
func TestLegacyPOSTRefusalIsAnsweredAsStatus(t *testing.T) {
	for _, mode := range []string{"jsonrpc", "tool_result"} {
		t.Run("refuse_with "+mode, func(t *testing.T) {
			e := start(t, "tenant 1/m burst 1\nquota off\nrefuse_with "+mode)
			e.prove("valid-old")
			e.call(1, "Authorization", "Bearer valid-old")
			// A Streamable HTTP client, listing event streams in any case
			// and with a q-value, gets refuse_with's answer.
			// Commas and semicolons in quoted parameters split nothing.
			for _, accept := range []string{`application/json;x="a\",q=0", Text/Event-Stream;q=0.5`, `text/event-stream;x="a;q=0;b"`} {
				if r := e.call(2, "Authorization", "Bearer valid-old", "Accept", accept); r.Status != http.StatusOK {
					t.Fatalf("Streamable HTTP POST (Accept %s) refused under refuse_with %s: %d %s, want 200", accept, mode, r.Status, r.Body)
				}
			}
			for _, accept := range []string{"application/json", "*/*", "", "application/json, text/event-stream;q=0", "text/event-stream ; Q=0.0", `text/event-stream;foo="a,b;c";q=0, application/json`} {
				r := e.call(2, "Authorization", "Bearer valid-old", "Accept", accept)
				if got := refusal(t, r, http.StatusTooManyRequests, "tenant"); got.ID != float64(2) {
					t.Fatalf("Accept %q: %s", accept, r.Body)
				}
			}
		})
	}
}

// A batch's calls may all run at once: each takes a concurrency slot, so
// a batch cannot put more calls in flight than the cap allows.
func TestBatchTakesASlotPerCall(t *testing.T) {
	e := start(t, "concurrency 10 per_identity 2\ntenant 100/s burst 100\nquota off")
	e.prove("valid-batch")
	before := e.backend.ToolCalls()
	r := e.post(batch(1, 3), "Authorization", "Bearer valid-batch")
	var answers []rpcError
	r.JSON(t, &answers)
	if r.Status != http.StatusTooManyRequests || len(answers) != 3 || answers[0].Error == nil ||
		answers[0].Error.Data.Limit != "concurrency" || !strings.Contains(answers[0].Error.Message, "runs 3 calls at once") ||
		!strings.Contains(answers[0].Error.Message, "never be admitted") ||
		!strings.Contains(answers[0].Error.Message, "at most 2 calls") || answers[0].Error.Data.MaxPerRequest != 2 {
		t.Fatalf("a batch of 3 under per_identity 2: %d %s", r.Status, r.Body)
	}
	unchanged(t, e, before, "a batch over the concurrency cap")
	if r := e.post(batch(4, 2), "Authorization", "Bearer valid-batch"); r.Status == http.StatusTooManyRequests {
		t.Fatalf("a batch of 2 under per_identity 2: %d %s", r.Status, r.Body)
	}
	if n := e.inflight("default"); n != 0 {
		t.Fatalf("%d calls still counted in flight after the batches", n)
	}
}

// A GET (an SSE listen stream) or a DELETE (a session's end) carries no
// JSON-RPC message to answer: its refusal is a 429 whatever refuse_with
// says, never a 200 that reads as the stream opening or the session ended.
func TestGETAndDELETERefusalsAreAnsweredAsStatus(t *testing.T) {
	for _, mode := range []string{"jsonrpc", "tool_result"} {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			t.Run(method+" refuse_with "+mode, func(t *testing.T) {
				e := start(t, "preauth 1/m burst 1\nrefuse_with "+mode)
				send := func() *harness.Response {
					req, _ := http.NewRequest(method, e.mcp, nil)
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Mcp-Session-Id", "s-1")
					return harness.Do(t, req)
				}
				send() // spends the pre-auth token
				refusal(t, send(), http.StatusTooManyRequests, "preauth")
				// One carrying a JSON-RPC request, whose id an answer
				// could echo, is answered by status all the same.
				req, _ := http.NewRequest(method, e.mcp, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`))
				req.Header.Set("Accept", "application/json, text/event-stream")
				refusal(t, harness.Do(t, req), http.StatusTooManyRequests, "preauth")
			})
		}
	}
}

// lingerSession connects the Go SDK client to the backend's /linger
// route, whose SSE answers stay open a second after their last message.
func lingerSession(t *testing.T, e *env, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "linger", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.caddy.URL + "/linger", HTTPClient: sdkClient(token)}, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// A call is in flight until its answer is written, not until the backend
// closes the SSE stream that carried it: a client reads the answer and
// sends its next call at once.
func TestSequentialSSECallsPassPerIdentityOne(t *testing.T) {
	e := start(t, "concurrency 10 per_identity 1\ntenant 100/s burst 100\nquota off")
	sess := lingerSession(t, e, "valid-seq", nil)
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("sequential call %d under per_identity 1 refused while the last answer's stream lingers: %v %+v", i, err, res)
		}
	}
	harness.Eventually(t, 10*time.Second, "nothing in flight", func() bool { return e.inflight("default") == 0 })
}

// A client that keeps reading an SSE answer after the response in it (as
// it may, for messages that follow) still has no call in flight: the next
// call, sent while that stream is open, passes per_identity 1.
func TestCallInFlightEndsWithItsAnswerNotItsStream(t *testing.T) {
	e := start(t, "concurrency 10 per_identity 1\ntenant 100/s burst 100\nquota off")
	linger := e.caddy.URL + "/linger"
	auth := []string{"Authorization", "Bearer valid-reader"}
	init := harness.Post(t, linger, harness.Initialize(1), auth...)
	sid := init.Header.Get("Mcp-Session-Id")
	if init.Status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", init.Status, sid)
	}
	session := append(auth, "Mcp-Session-Id", sid)
	harness.Post(t, linger, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session...)
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, linger, strings.NewReader(harness.ToolCall(10+i, "echo", map[string]any{"text": "hi"})))
		for j := 0; j < len(session); j += 2 {
			req.Header.Set(session[j], session[j+1])
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() // open until the test ends
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("call %d, sent while the last answer's stream is open: %d %s", i, resp.StatusCode, body)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !(strings.HasPrefix(sc.Text(), "data:") && strings.Contains(sc.Text(), `"result"`)) {
		}
		if sc.Err() != nil {
			t.Fatalf("call %d: reading its answer: %v", i, sc.Err())
		}
	}
}

// heldBatch starts a site whose backend answers a batch on an SSE stream
// with id 1 at once and id 2 once answerLast runs (any other request with
// id 9), behind mcp_ratelimit with limits; it posts batch with the bearer
// token, reads the stream up to the answer to id 1, and returns the site,
// the stream, and answerLast.
func heldBatch(t *testing.T, limits, token, batch string) (e *env, stream *bufio.Scanner, answerLast func()) {
	t.Helper()
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		answer := func(id int) {
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{}}\n\n", id)
			http.NewResponseController(w).Flush()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if !strings.HasPrefix(string(body), "[") {
			answer(9)
			return
		}
		answer(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		answer(2)
	}))
	t.Cleanup(up.Close)
	answerLast = sync.OnceFunc(func() { close(release) })
	t.Cleanup(answerLast) // before up.Close, which waits for the batch's handler
	e = startSite(t, "mcp_ratelimit {\n"+limits+"\n}\nreverse_proxy "+up.Listener.Addr().String()+" {\nflush_interval -1\n}")
	req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(batch))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	stream = bufio.NewScanner(resp.Body)
	for stream.Scan() && !strings.Contains(stream.Text(), `"id":1`) {
	}
	return e, stream, answerLast
}

// A batch answered on an SSE stream holds a slot per call until that
// call's answer is written, not until the last one is: with per_identity
// 2, a batch of two whose first call is answered leaves room for one more
// call from the same key while the second still runs.
func TestBatchCallsLeaveFlightOneByOne(t *testing.T) {
	batch := "[" + harness.ToolCall(1, "echo", nil) + "," + harness.ToolCall(2, "echo", nil) + "]"
	e, sc, answerLast := heldBatch(t, "concurrency 10 per_identity 2\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota off", "valid-batch", batch)
	auth := []string{"Authorization", "Bearer valid-batch"}
	harness.Eventually(t, 5*time.Second, "the answered call out of flight", func() bool { return e.inflight("default") == 1 })
	if r := e.post(harness.ToolCall(9, "echo", nil), auth...); r.Status != http.StatusOK {
		t.Fatalf("a call beside a batch with one call answered, under per_identity 2: %d %s", r.Status, r.Body)
	}
	if r := e.post(batch, auth...); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a batch of two beside a call still running, under per_identity 2: %d %s", r.Status, r.Body)
	}
	answerLast()
	for sc.Scan() && !strings.Contains(sc.Text(), `"id":2`) {
	}
	harness.Eventually(t, 5*time.Second, "nothing in flight", func() bool { return e.inflight("default") == 0 })
}

// A batch's last metered call keeps its slot until the stream holds an
// answer to every request the POST carried, unmetered ones included: a
// batch of a call and a ping, whose call is answered first, still holds
// per_identity 1 while the ping's answer is to come.
func TestLastCallSlotStaysUntilEveryRequestIsAnswered(t *testing.T) {
	batch := "[" + harness.ToolCall(1, "echo", nil) + `,{"jsonrpc":"2.0","id":2,"method":"ping"}]`
	e, sc, answerLast := heldBatch(t, "concurrency 10 per_identity 1\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota off", "valid-ping", batch)
	auth := []string{"Authorization", "Bearer valid-ping"}
	if r := e.post(harness.ToolCall(9, "echo", nil), auth...); r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), "CONCURRENCY_LIMITED") {
		t.Fatalf("a call beside a batch whose call is answered and whose ping is not, under per_identity 1: %d %s", r.Status, r.Body)
	}
	if n := e.inflight("default"); n != 1 {
		t.Fatalf("in flight with the ping unanswered: %d", n)
	}
	answerLast()
	for sc.Scan() && !strings.Contains(sc.Text(), `"id":2`) {
	}
	harness.Eventually(t, 5*time.Second, "nothing in flight", func() bool { return e.inflight("default") == 0 })
	if r := e.post(harness.ToolCall(9, "echo", nil), auth...); r.Status != http.StatusOK {
		t.Fatalf("a call once the batch is answered: %d %s", r.Status, r.Body)
	}
}

// Messages before the answer (progress notifications) do not end a call:
// its slot stays taken until the answer itself is written.
func TestSSECallHoldsItsSlotUntilItsAnswer(t *testing.T) {
	e := start(t, "concurrency 10 per_identity 1\ntenant 100/s burst 100\nquota off")
	progressed := make(chan struct{}, 1)
	sess := lingerSession(t, e, "valid-progress", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			progressed <- struct{}{}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	slow := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"millis": 1500}}
		p.SetProgressToken("tok")
		_, err := sess.CallTool(ctx, p)
		slow <- err
	}()
	select {
	case <-progressed:
	case <-ctx.Done():
		t.Fatal("no progress notification from the slow call")
	}
	if e.inflight("default") != 1 {
		t.Fatalf("a call that only reported progress is not in flight: %d", e.inflight("default"))
	}
	if _, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err == nil {
		t.Fatal("a second call was admitted while the first, past its progress notification, was still running")
	}
	if err := <-slow; err != nil {
		t.Fatalf("slow call: %v", err)
	}
	if res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil || res.IsError {
		t.Fatalf("the call after an answered one was refused: %v", err)
	}
}

// A POST of JSON-RPC notifications and responses only (a client's answers
// to the server's requests, its cancellations) puts no call in flight: the
// backend answers it at once. Under meter * it costs 1 and is never
// refused by the concurrency cap, or a call waiting on the client's answer
// (roots/list, sampling, elicitation) would hold the identity's one slot
// until it times out, and a cancellation would never reach the backend.
func TestAnswersAndNotificationsTakeNoConcurrencySlot(t *testing.T) {
	e := start(t, "preauth 100/s burst 100\ntenant 100/s burst 100\nquota off\nmeter *\nconcurrency 5 per_identity 1")
	e.awaitCallsAtEnd("default")
	auth := []string{"Authorization", "Bearer valid-answers"}
	e.prove("valid-answers")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.mcp, strings.NewReader(harness.ToolCall(1, "slow", map[string]any{"millis": 3000})))
		req.Header.Set(auth[0], auth[1])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	harness.Eventually(t, 10*time.Second, "the slow call in flight", func() bool { return e.inflight("default") == 1 })
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"roots":[]}}`,
		`[{"jsonrpc":"2.0","id":8,"error":{"code":-1,"message":"no"}},{"jsonrpc":"2.0","method":"notifications/progress"}]`,
	} {
		if r := e.post(body, auth...); r.Status == http.StatusTooManyRequests {
			t.Fatalf("%s with the identity's slot taken: %d %s, want it passed on", body, r.Status, r.Body)
		}
	}
	refusal(t, e.call(2, auth...), http.StatusTooManyRequests, "concurrency")
	// A tools/call sent without an id is a call to a backend that runs
	// notifications: it holds a slot like one (refused, it gets the
	// status alone, as every notification does).
	if r := e.post(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`, auth...); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a tools/call without an id with the identity's slot taken: %d %s, want 429", r.Status, r.Body)
	}
}

// A POST of notifications only puts no call in flight, though it costs 1
// under `meter *`: the in-flight gauge stays at 0 while the backend holds
// its answer open, as it shows 1 for a request held the same way.
func TestNotificationsPutNoCallInFlight(t *testing.T) {
	e := start(t, "zone notinflight\nmeter *\ntenant off\nquota off")
	e.prove("valid-notes")
	auth := []string{"Authorization", "Bearer valid-notes"}
	linger := e.caddy.URL + "/linger" // the backend holds every POST a second after answering
	for _, c := range []struct {
		body string
		want int64
	}{
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`, 0},
		{`{"jsonrpc":"2.0","id":3,"method":"ping"}`, 1},
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequest(http.MethodPost, linger, strings.NewReader(c.body))
			req.Header.Set(auth[0], auth[1])
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		most := int64(0)
	held:
		for {
			select {
			case <-done:
				break held
			default:
				most = max(most, int64(e.inflight("notinflight")))
			}
		}
		if most != c.want {
			t.Errorf("%s held open by the backend: in flight %d at most, want %d", c.body, most, c.want)
		}
	}
}

// heldSSEBackend answers its first request on an SSE stream: the events
// first, then, once release is called (or the request ends), the events
// last; the stream stays open until then. Each event is a write of its
// own. Later requests get a JSON-RPC answer with id 9 at once.
func heldSSEBackend(t *testing.T, first, last []string) (addr string, release func()) {
	t.Helper()
	ch := make(chan struct{})
	var served atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Swap(true) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":9,"result":{}}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(events []string) {
			for _, data := range events {
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
				http.NewResponseController(w).Flush()
			}
		}
		send(first)
		select {
		case <-ch:
		case <-r.Context().Done():
		}
		send(last)
	}))
	t.Cleanup(up.Close)
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release) // before up.Close, which waits for the handler
	return up.Listener.Addr().String(), release
}

// postHeld posts body as an SSE-accepting client and reads the stream up
// to the line holding upTo, leaving the rest to be read by the returned
// function. Every write before upTo's has then been watched: the handler
// watches a write before it takes the next.
func postHeld(t *testing.T, url, auth, body, upTo string) (rest func(string)) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	rest = func(s string) {
		for sc.Scan() && !strings.Contains(sc.Text(), s) {
		}
	}
	rest(upTo)
	return rest
}

// A backend answers with the id it decoded, spelled its own way: the
// answer ends the call, and its slot goes while the stream stays open.
func TestAnswerWithItsIDSpelledAnotherWayEndsTheCall(t *testing.T) {
	addr, release := heldSSEBackend(t, []string{`{"jsonrpc":"2.0","id":"\u00e9","result":{}}`}, nil)
	e := startSite(t, "mcp_ratelimit {\nconcurrency 10 per_identity 1\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota off\n}\nreverse_proxy "+addr+" {\nflush_interval -1\n}")
	postHeld(t, e.mcp, "Bearer valid-reencoded", `{"jsonrpc":"2.0","id":"é","method":"tools/call","params":{"name":"echo"}}`, `"result"`)
	harness.Eventually(t, 5*time.Second, "the answered call out of flight", func() bool { return e.inflight("default") == 0 })
	release()
}

// Requests of one POST whose ids have one value cannot be told apart by
// their answers (a backend that runs them all answers each with that id):
// a quick answer (to the ping) must not free a call's slot, or a batch of
// calls sharing an id would run more calls than per_identity allows.
func TestRepeatedIDsHoldEverySlotUntilTheLastAnswer(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":7,"result":{}}`
	marker := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"marker"}}`
	addr, release := heldSSEBackend(t, []string{answer, marker}, []string{answer, answer})
	e := startSite(t, "mcp_ratelimit {\nconcurrency 10 per_identity 2\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota off\n}\nreverse_proxy "+addr+" {\nflush_interval -1\n}")
	auth := []string{"Authorization", "Bearer valid-repeated"}
	batch := "[" + harness.ToolCall(7, "echo", nil) + "," + harness.ToolCall(7, "echo", nil) + `,{"jsonrpc":"2.0","id":7.0,"method":"ping"}]`
	rest := postHeld(t, e.mcp, auth[1], batch, `"marker"`)
	if r := e.post(harness.ToolCall(9, "echo", nil), auth...); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a call beside a batch of two calls, one answer in, ids repeated, under per_identity 2: %d %s", r.Status, r.Body)
	}
	if n := e.inflight("default"); n != 2 {
		t.Fatalf("in flight %d, want the batch's 2", n)
	}
	release()
	rest("never")
	harness.Eventually(t, 5*time.Second, "nothing in flight", func() bool { return e.inflight("default") == 0 })
}

// A metered notification (a tools/call without an id, which a backend that
// runs notifications runs) holds a slot no answer names: a POST carrying
// one beside a ping keeps every slot until its response ends, not until
// the ping is answered, or adding a ping would end the notification's call
// in the limiter while the backend still runs it.
func TestMeteredNotificationBesideARequestHoldsItsSlotToTheEnd(t *testing.T) {
	marker := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"marker"}}`
	addr, release := heldSSEBackend(t, []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, marker}, nil)
	e := startSite(t, "mcp_ratelimit {\nconcurrency 10 per_identity 1\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota off\n}\nreverse_proxy "+addr+" {\nflush_interval -1\n}")
	auth := []string{"Authorization", "Bearer valid-notified"}
	batch := `[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","id":1,"method":"ping"}]`
	rest := postHeld(t, e.mcp, auth[1], batch, `"marker"`)
	if r := e.post(harness.ToolCall(9, "echo", nil), auth...); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a call beside a notified call still running, its POST's ping answered, under per_identity 1: %d %s", r.Status, r.Body)
	}
	release()
	rest("never")
	harness.Eventually(t, 5*time.Second, "nothing in flight", func() bool { return e.inflight("default") == 0 })
}

// A notification of a metered method is a call: it takes a concurrency
// slot, so with the one slot held it is refused, not forwarded.
func TestMeteredNotificationTakesAConcurrencySlot(t *testing.T) {
	e := start(t, "zone notifslot\nmeter tools/call resources/read\nconcurrency 1\ntenant 100/s burst 100\nquota off")
	e.prove("valid-notifslot")
	h := []string{"Authorization", "Bearer valid-notifslot"}
	done := e.slowInBackground(2000, h...)
	harness.Eventually(t, 5*time.Second, "the slow call in flight", func() bool { return e.inflight("notifslot") == 1 })
	r := e.post(`{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"demo://x"}}`, h...)
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("a resources/read notification with the one slot held: %d %s, want 429", r.Status, r.Body)
	}
	<-done
}
