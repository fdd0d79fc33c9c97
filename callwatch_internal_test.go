package mcplimit

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

const (
	progressEvent = "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\"}}\n\n"
	answerEvent   = "event: message\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
	answer8Event  = "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n\n"
	call7         = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}`
	call8         = `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"slow"}}`
)

// watching returns a watch for the responses to the POST body.
func watching(t testing.TB, body string) *callWatch {
	req := jsonrpc.GetRequest()
	req.Parse([]byte(body))
	t.Cleanup(func() { jsonrpc.PutRequest(req) })
	w := new(callWatch)
	w.expect(req, jsonrpc.Meter{Methods: []string{jsonrpc.ToolsCall}})
	w.begin()
	return w
}

// feedSplit feeds stream to a watch for the responses to body, split
// after every split bytes, and returns the offset just past the write that
// completed the answers, or -1.
func feedSplit(t testing.TB, stream, body string, split int) int {
	w := watching(t, body)
	for i := 0; i < len(stream); i += split {
		end := min(i+split, len(stream))
		if w.feed([]byte(stream[i:end])) {
			return end
		}
	}
	return -1
}

// Each metered call's answer is counted as it comes, for its slot to go
// then; an answer to an unmetered request frees none.
func TestCallWatchCountsEachMeteredCallAnswered(t *testing.T) {
	w := watching(t, "["+call7+`,{"jsonrpc":"2.0","id":5,"method":"tools/list"},`+call8+"]")
	for _, step := range []struct {
		event string
		calls int
	}{
		{"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n", 0},
		{progressEvent, 0},
		{answer8Event, 1},
		{answer8Event, 0}, // answered already
	} {
		if w.feed([]byte(step.event)) {
			t.Fatalf("the answers ended at %q", step.event)
		}
		if n := w.takeCalls(); n != step.calls {
			t.Fatalf("after %q: %d calls answered, want %d", step.event, n, step.calls)
		}
	}
	if !w.feed([]byte(answerEvent)) {
		t.Fatal("the last answer did not end the watch")
	}
}

func TestCallWatchEndsAtTheLastAnswer(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream string
		body   string // the POST's
		want   int    // offset where the answers are complete, -1 never, 0 the end
	}{
		{"answer_after_progress", progressEvent + answerEvent + ": ping\n\n", call7, len(progressEvent + answerEvent)},
		// The blank line's CR ends the event; its LF is not another line.
		{"crlf_lines", strings.ReplaceAll(answerEvent, "\n", "\r\n"), call7, len(strings.ReplaceAll(answerEvent, "\n", "\r\n")) - 1},
		{"cr_lines", strings.ReplaceAll(answerEvent, "\n", "\r"), call7, 0},
		{"crlf_lines_of_an_event_without_its_blank_line", strings.ReplaceAll(strings.TrimSuffix(answerEvent, "\n"), "\n", "\r\n"), call7, -1},
		{"data_over_two_lines", "data: {\"jsonrpc\":\"2.0\",\ndata:\"id\":7,\"result\":{}}\n\n", call7, 0},
		{"progress_only", progressEvent + progressEvent, call7, -1},
		{"answer_without_its_blank_line", strings.TrimSuffix(answerEvent, "\n"), call7, -1},
		{"two_answers_awaited", answer8Event + progressEvent + answerEvent, "[" + call7 + "," + call8 + "]", len(answer8Event + progressEvent + answerEvent)},
		{"the_same_answer_twice", answerEvent + answerEvent, "[" + call7 + "," + call8 + "]", -1},
		{"an_answer_to_another_id", answer8Event, call7, -1},
		{"null_id_answers_an_entry_without_one", answerEvent + "data: {\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{}}\n\n", "[" + call7 + ",5]", 0},
		{"one_of_two", answerEvent + progressEvent, "[" + call7 + "," + call8 + "]", -1},
		{"batch_of_answers_in_one_event", "data: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1},{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":2}]\n\n", `[{"id":1,"method":"ping"},{"id":2,"method":"ping"}]`, 0},
		{"batch_of_answers_one_without_the_version", "data: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1},{\"id\":2,\"result\":2}]\n\n", `[{"id":1,"method":"ping"},{"id":2,"method":"ping"}]`, -1},
		// Clients skip an event of another type than message, and a
		// message without "jsonrpc":"2.0": such an answer answers nothing.
		{"answer_in_an_event_of_another_type", "event: ping\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n", call7, -1},
		{"answer_in_an_event_of_another_type_then_a_message", "event: ping\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n" + answer8Event, "[" + call7 + "," + call8 + "]", -1},
		{"event_type_lasts_one_event", "event: ping\n\n" + answerEvent, call7, 0},
		{"empty_event_type_is_message", "event:\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n", call7, 0},
		{"answer_without_the_version", "data: {\"id\":7,\"result\":{}}\n\n", call7, -1},
		{"answer_of_another_version", "data: {\"jsonrpc\":\"1.0\",\"id\":7,\"result\":{}}\n\n", call7, -1},
		{"version_spelled_otherwise", "data: {\"JSONRPC\":\"2.0\",\"id\":7,\"result\":{}}\n\n", call7, -1},
		// Keys as JavaScript reads them, exactly: "ID" is no id there,
		// and a message with a method is no response for Go's SDK.
		{"id_spelled_otherwise", "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"ID\":7,\"result\":{}}\n\n", call7, -1},
		{"answer_with_a_null_method", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":null,\"result\":{}}\n\n", call7, -1},
		{"answer_without_result_or_error", "data: {\"jsonrpc\":\"2.0\",\"id\":7}\n\n", call7, -1},
		{"error_answer", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-1,\"message\":\"no\"}}\n\n", call7, 0},
		{"duplicate_id_last_wins", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"id\":9,\"result\":{}}\n\n", call7, -1},
		{"other_field_named_like_data", "datum: {\"id\":7,\"result\":{}}\n\n", call7, -1},
		{"line_without_colon_named_like_data", "datax{\"id\":7,\"result\":{}}\n\n", call7, -1},
		{"a_notification_awaits_no_answer", answerEvent, "[" + call7 + `,{"jsonrpc":"2.0","method":"notifications/cancelled"}]`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			for split := 1; split <= len(c.stream); split++ {
				want := c.want
				if want == 0 {
					want = len(c.stream)
				}
				if want > 0 { // the write that holds the answer's last byte
					want = min((want+split-1)/split*split, len(c.stream))
				}
				if got := feedSplit(t, c.stream, c.body, split); got != want {
					t.Fatalf("writes of %d bytes: answers complete at %d, want %d", split, got, want)
				}
			}
		})
	}
}

// An event or a line over maxWatchedEvent is skipped, whatever it holds
// (the tail of a long line is no line of its own), and the watch goes on
// to the answers after it.
func TestCallWatchSkipsAnOversizedEvent(t *testing.T) {
	huge := strings.Repeat("x", maxWatchedEvent)
	for name, before := range map[string]string{
		"event":                              "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"" + huge + "\"}\n\n",
		"comment_line":                       ": " + huge + "\n\n",
		"comment_line_ending_like_an_answer": ": " + huge + "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n",
		// The end of the long line is no blank line: the answer's data
		// line after it is the same event's, which no client reads.
		"data_line_then_an_answers_data": "data: " + huge + "\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			// In one write, in writes of 4 KiB, and in two whose second
			// starts where the huge run of x ends.
			cut := strings.LastIndex(before, "x") + 1
			for _, writes := range [][]string{{before}, chunks(before, 4096), {before[:cut], before[cut:]}} {
				w := watching(t, call7)
				for _, b := range writes {
					if w.feed([]byte(b)) {
						t.Fatalf("%d writes: the oversized part ended the call", len(writes))
					}
				}
				if !w.feed([]byte(answerEvent)) {
					t.Fatalf("%d writes: the answer after the oversized part did not end the call", len(writes))
				}
			}
		})
	}
}

func TestIsEventStream(t *testing.T) {
	for v, want := range map[string]bool{
		"text/event-stream":                true,
		"Text/Event-Stream; charset=utf-8": true,
		" text/event-stream ":              true,
		"application/json":                 false,
		"text/event-streams":               false,
		"":                                 false,
	} {
		if got := isEventStream(v); got != want {
			t.Errorf("isEventStream(%q) = %v, want %v", v, got, want)
		}
	}
}

// A POST is a listen stream only when every reading of every message is a
// listen request: a tool call in any reading keeps its slot held until
// its answer.
func TestListenOnlyTakesEveryReading(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`:                                                true,
		`[{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"},{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen"}]`: true,
		`[{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`:           false,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","method":"tools/call"}`:                                      false,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","Method":"tools/call"}`:                                      false,
		`{"jsonrpc":"2.0","method":"subscriptions/listen"}`:                                                                   false,
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                                                                                false,
		`not json`:                                                                                                            false,
	} {
		var req jsonrpc.Request
		req.Parse([]byte(body))
		if got := listenOnly(&req); got != want {
			t.Errorf("%s: listenOnly %v, want %v", body, got, want)
		}
	}
}

// A stream an encode handler after this one compresses is not read (its
// bytes are no SSE text): its slots go when it ends.
func TestCallWatchLeavesAnEncodedStream(t *testing.T) {
	for _, c := range []struct {
		encoding string
		watched  bool
	}{{"", true}, {"identity", true}, {"gzip", false}, {"identity, br", false}} {
		w := watching(t, call7)
		h := http.Header{"Content-Type": {"text/event-stream"}}
		if c.encoding != "" {
			h.Set("Content-Encoding", c.encoding)
		}
		w.start(&decision{concID: true}, h)
		if got := w.awaiting > 0; got != c.watched {
			t.Errorf("Content-Encoding %q: watched %v, want %v", c.encoding, got, c.watched)
		}
	}
}

// chunks cuts s into pieces of n bytes, the last shorter.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// A backend answers with the id it decoded, spelled its own way: the
// answer ends the call whose id has its value; another value ends nothing.
// A string of invalid UTF-8 has the value a decoder reads (U+FFFD for each
// bad byte), however the answer spells it; integers past what an int64
// holds keep values of their own, short of infinity.
func TestCallWatchMatchesAnIDByItsValue(t *testing.T) {
	for _, c := range []struct {
		sent, echoed string
		match        bool
	}{
		{`"é0"`, `"\u00e90"`, true},
		{`"x\u0041"`, `"xA"`, true},
		{`"x\/y"`, `"x/y"`, true},
		{`1e0`, `1.0`, true},
		{`1e0`, `1`, true},
		{`-0`, `0`, true},
		{`10`, `1e1`, true},
		{`9007199254740993`, `9007199254740992`, true},
		{`1e400`, `1e401`, true},
		{`"1"`, `1`, false},
		{`1`, `2`, false},
		{`"a"`, `"A"`, false},
		{`123456789012345`, `123456789012346`, false},
		{`1.5`, `1`, false},
		{"\"a\xff\"", `"a\ufffd"`, true},
		{"\"a\xff\"", "\"a\xef\xbf\xbd\"", true},
		{"\"a\xff\"", "\"a\xff\"", true}, // echoed as sent, by a backend that copies bytes
		{"\"a\xff\"", `"a"`, false},
		{`1e19`, `1e20`, false},
		{`-1e19`, `-1e30`, false},
		{`1e19`, `1e400`, false},
		{`1e19`, `10000000000000000000`, true},
		{`1e15`, `1000000000000000`, true},
	} {
		body := `{"jsonrpc":"2.0","id":` + c.sent + `,"method":"tools/call","params":{"name":"slow"}}`
		w := watching(t, body)
		event := "data: {\"jsonrpc\":\"2.0\",\"id\":" + c.echoed + ",\"result\":{}}\n\n"
		if got := w.feed([]byte(event)); got != c.match {
			t.Errorf("sent %s, answered %s: answered = %v, want %v", c.sent, c.echoed, got, c.match)
		}
	}
}

// When two requests' ids have one value, an answer cannot tell which it
// ends (a backend that runs both answers each with that id): a quick
// answer to one must not free another's slot, so none goes before the
// last answer.
func TestCallWatchHoldsEverySlotWhileIDsRepeat(t *testing.T) {
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	for name, body := range map[string]string{
		"same_spelling":       "[" + call7 + "," + call7 + "," + ping + "]",
		"same_value":          "[" + call7 + "," + strings.Replace(call7, `"id":7`, `"id":7.0`, 1) + "," + ping + "]",
		"two_calls_no_others": "[" + call7 + "," + strings.Replace(call7, `"id":7`, `"id":7e0`, 1) + "]",
	} {
		t.Run(name, func(t *testing.T) {
			w := watching(t, body)
			for i := range len(w.idEnds) - 1 {
				if w.feed([]byte(answerEvent)) {
					t.Fatalf("answer %d ended the watch", i+1)
				}
				if n := w.takeCalls(); n != 0 {
					t.Fatalf("answer %d freed %d slots before the last answer", i+1, n)
				}
			}
			if !w.feed([]byte(answerEvent)) {
				t.Fatal("the last answer did not end the watch")
			}
		})
	}
}
