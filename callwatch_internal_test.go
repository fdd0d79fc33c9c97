package mcplimit

import (
	"strings"
	"testing"
)

const (
	progressEvent = "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\"}}\n\n"
	answerEvent   = "event: message\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
)

// feedSplit feeds stream to a watch awaiting n answers, split after
// every split bytes, and returns the offset just past the write that
// completed the answers, or -1.
func feedSplit(stream string, n, split int) int {
	w := callWatch{awaiting: n}
	for i := 0; i < len(stream); i += split {
		end := min(i+split, len(stream))
		if w.feed([]byte(stream[i:end])) {
			return end
		}
	}
	return -1
}

func TestCallWatchEndsAtTheLastAnswer(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream string
		n      int
		want   int // offset where the answers are complete, -1 never, 0 the end
	}{
		{"answer_after_progress", progressEvent + answerEvent + ": ping\n\n", 1, len(progressEvent + answerEvent)},
		{"crlf_lines", strings.ReplaceAll(answerEvent, "\n", "\r\n"), 1, len(strings.ReplaceAll(answerEvent, "\n", "\r\n"))},
		{"data_over_two_lines", "data: {\"jsonrpc\":\"2.0\",\ndata:\"id\":7,\"result\":{}}\n\n", 1, 0},
		{"progress_only", progressEvent + progressEvent, 1, -1},
		{"answer_without_its_blank_line", strings.TrimSuffix(answerEvent, "\n"), 1, -1},
		{"two_answers_awaited", answerEvent + progressEvent + answerEvent, 2, len(answerEvent + progressEvent + answerEvent)},
		{"one_of_two", answerEvent + progressEvent, 2, -1},
		{"batch_of_answers_in_one_event", "data: [{\"id\":1,\"result\":1},{\"id\":2,\"result\":2}]\n\n", 2, 0},
		{"other_field_named_like_data", "datum: {\"id\":7,\"result\":{}}\n\n", 1, -1},
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
				if got := feedSplit(c.stream, c.n, split); got != want {
					t.Fatalf("writes of %d bytes: answers complete at %d, want %d", split, got, want)
				}
			}
		})
	}
}

func TestCallWatchGivesUpOnAnOversizedEvent(t *testing.T) {
	w := callWatch{awaiting: 1}
	big := "data: {\"id\":7,\"result\":\"" + strings.Repeat("x", maxWatchedEvent) + "\"}\n\n"
	if w.feed([]byte(big)) || w.awaiting != -1 {
		t.Fatalf("an event over the bound: awaiting %d", w.awaiting)
	}
	if w.feed([]byte(answerEvent)) {
		t.Fatal("a watch that gave up ended a call")
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
