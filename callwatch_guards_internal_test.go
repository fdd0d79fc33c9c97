package mcplimit

import (
	"strconv"
	"strings"
	"testing"
)

// A line of exactly maxWatchedEvent bytes is within the bound, also when
// it comes in several writes: an answer in it ends its call.
func TestCallWatchHoldsALineOfExactlyTheBound(t *testing.T) {
	head, tail := "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"", "\"}"
	line := head + strings.Repeat("x", maxWatchedEvent-len(head)-len(tail)) + tail
	if len(line) != maxWatchedEvent {
		t.Fatalf("line of %d bytes", len(line))
	}
	stream := line + "\n\n"
	if got := feedSplit(t, stream, call7, 4096); got != len(stream) {
		t.Fatalf("writes of 4 KiB: answers complete at %d, want %d", got, len(stream))
	}
}

// Past 32 requests the repeat check takes another path: there too, two
// requests whose ids share a value hold every slot until the last answer.
func TestCallWatchHoldsEverySlotWhileIDsRepeatInALargeBatch(t *testing.T) {
	var calls []string
	for i := range 40 {
		calls = append(calls, strings.Replace(call7, `"id":7`, `"id":`+strconv.Itoa(100+i), 1))
	}
	calls = append(calls, call7, call7)
	w := watching(t, "["+strings.Join(calls, ",")+"]")
	if !w.dupIDs {
		t.Fatal("two requests with id 7 among 42 not seen as a repeat")
	}
	w.feed([]byte(answerEvent))
	if n := w.takeCalls(); n != 0 {
		t.Fatalf("an answer to a repeated id freed %d slots before the last answer", n)
	}
}

// A line that starts like a field's name but goes on otherwise is another
// field (or none): "dataX..." holds no data, even when what follows the
// name reads as an answer.
func TestCallWatchTakesNoFieldNamedLikeData(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":7,"result":{}}`
	for name, stream := range map[string]string{
		"data_then_a_letter":  "dataX" + answer + "\n\n",
		"data_then_a_space":   "data " + answer + "\n\n",
		"event_then_a_letter": "eventX: ping\ndata: " + answer + "\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			want := -1
			if name == "event_then_a_letter" {
				want = len(stream) // not an event line: the answer is a message's
			}
			if got := feedSplit(t, stream, call7, len(stream)); got != want {
				t.Fatalf("answers complete at %d, want %d", got, want)
			}
		})
	}
}
