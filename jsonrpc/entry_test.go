package jsonrpc

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestIDIsEchoedVerbatim(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  string
		id    string // "" means nil
		notif bool
	}{
		{"string_id", `{"id":"abc-1","method":"ping"}`, `"abc-1"`, false},
		{"string_id_keeps_escapes", `{"id":"a\u0062c","method":"ping"}`, `"a\u0062c"`, false},
		{"numeric_id_verbatim", `{"id":7,"method":"ping"}`, `7`, false},
		{"float_id_verbatim", `{"id": 7.50e1 ,"method":"ping"}`, `7.50e1`, false},
		{"null_id_is_present", `{"id":null,"method":"ping"}`, `null`, false},
		{"object_id_verbatim", `{"id":{"a":[1]},"method":"ping"}`, `{"a":[1]}`, false},
		{"absent_id_is_notification", `{"method":"notifications/initialized"}`, "", true},
		{"duplicate_id_last_wins", `{"id":1,"method":"ping","id":2}`, `2`, false},
		{"id_key_case_insensitive", `{"ID":3,"method":"ping"}`, `3`, false},
		{"escaped_id_key", `{"\u0069d":4}`, `4`, false},
		{"exact_id_wins_over_a_case_variant_after_it", `{"id":2,"Id":1,"method":"ping"}`, `2`, false},
		{"exact_id_wins_over_a_case_variant_before_it", `{"Id":1,"id":2,"method":"ping"}`, `2`, false},
		{"exact_id_wins_over_a_nul_variant", `{"id":2,"id\u0000":1,"method":"ping"}`, `2`, false},
		{"escaped_exact_id_wins", `{"\u0069d":2,"ID":1,"method":"ping"}`, `2`, false},
		{"case_variants_last_wins", `{"ID":1,"Id":2,"method":"ping"}`, `2`, false},
		{"id_inside_params_is_not_the_id", `{"method":"ping","params":{"id":5}}`, "", true},
		{"no_method_is_no_notification", `{"query":"x"}`, "", false},
		{"non_string_method_is_no_notification", `{"method":5}`, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := parse(t, c.body).Entry(0)
			got := e.ID()
			if c.id == "" && got != nil || c.id != "" && string(got) != c.id {
				t.Errorf("ID() = %q, want %q", got, c.id)
			}
			if e.Notification() != c.notif {
				t.Errorf("Notification() = %v, want %v", e.Notification(), c.notif)
			}
			if called := strings.Contains(c.body, `"method":"`); e.Called() != called {
				t.Errorf("Called() = %v, want %v", e.Called(), called)
			}
		})
	}
}

func TestBatchEntriesHaveTheirOwnReadings(t *testing.T) {
	r := parse(t, `[{"id":1,"method":"tools/call","params":{"name":"big"}},{"method":"notifications/initialized"},`+
		`{"id":"x","method":"tools/list","method":"tools/call","params":{"name":"a","name":"b","name":"a"}},5]`)
	if !r.Valid() || !r.Batch() || r.Len() != 4 {
		t.Fatalf("Valid=%v Batch=%v Len=%d", r.Valid(), r.Batch(), r.Len())
	}
	want := []struct {
		id      string
		object  bool
		methods []string
		tools   []string
	}{
		{`1`, true, []string{"tools/call"}, []string{"big"}},
		{``, true, []string{"notifications/initialized"}, nil},
		{`"x"`, true, []string{"tools/list", "tools/call"}, []string{"a", "b"}},
		{``, false, nil, nil},
	}
	for i, w := range want {
		e := r.Entry(i)
		if string(e.ID()) != w.id || e.Object() != w.object ||
			!slices.Equal(methods(e), w.methods) || !slices.Equal(tools(e), w.tools) {
			t.Errorf("entry %d: id %q object %v methods %q tools %q; want %+v",
				i, e.ID(), e.Object(), methods(e), tools(e), w)
		}
	}
	if r.Entry(2).HasMethod("tools/list") != true || r.Entry(2).HasMethod("tools/call") != true ||
		r.Entry(2).HasMethod("ping") || r.Entry(3).HasMethod("") {
		t.Errorf("HasMethod disagrees with Methods")
	}
}

func TestMethodsAreDistinctEvenWhenThousandsRepeat(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"method":"a"`)
	for i := range 5000 {
		fmt.Fprintf(&b, `,"method":"m%d","method":"a"`, i%3)
	}
	b.WriteString(`}`)
	got := methods(parse(t, b.String()).Entry(0))
	if !slices.Equal(got, []string{"a", "m0", "m1", "m2"}) {
		t.Errorf("Methods() = %q", got)
	}
}

func TestHasMethodComparesDecodedStrings(t *testing.T) {
	e := parse(t, `{"method":"tools\u002Fcall","method":"\u00e9"}`).Entry(0)
	for m, want := range map[string]bool{"tools/call": true, "é": true, `tools\u002Fcall`: false, "tools/call ": false} {
		if e.HasMethod(m) != want {
			t.Errorf("HasMethod(%q) = %v, want %v", m, !want, want)
		}
	}
}

func TestRequestIsReusable(t *testing.T) {
	r := GetRequest()
	defer PutRequest(r)
	r.Parse([]byte(`[{"method":"tools/call","params":{"name":"big"}},{"method":"tools/call"}]`))
	if got := r.Cost(toolsCallMeter, tableCost); got != 6 {
		t.Fatalf("first Cost() = %d", got)
	}
	r.Parse([]byte(`{"method":"tools/list"}`))
	if got := r.Cost(toolsCallMeter, tableCost); got != 0 || r.Len() != 1 || r.Batch() {
		t.Fatalf("after reuse: Cost() = %d Len %d Batch %v", got, r.Len(), r.Batch())
	}
	r.Reset()
	if r.Valid() || r.Len() != 0 {
		t.Errorf("after Reset: Valid %v Len %d", r.Valid(), r.Len())
	}
	if got := r.Cost(toolsCallMeter, tableCost); got != 1 {
		t.Errorf("Cost of nothing parsed = %d, want 1", got)
	}
}

func TestEntriesWithoutReadingsTakeNoRecord(t *testing.T) {
	const n = 1000
	r := parse(t, "["+strings.Repeat(`{},1,{"x":[1]},`, n)+`{"id":9,"method":"tools/call"}]`)
	if !r.Valid() || r.Len() != 3*n+1 {
		t.Fatalf("Valid %v Len %d", r.Valid(), r.Len())
	}
	for i := range 3 * n {
		if e := r.Entry(i); e.Object() != (i%3 != 1) || e.ID() != nil || e.Notification() || methods(e) != nil {
			t.Fatalf("entry %d: object %v id %q", i, e.Object(), e.ID())
		}
	}
	if e := r.Entry(3 * n); string(e.ID()) != "9" || !e.HasMethod(ToolsCall) {
		t.Errorf("last entry: id %q methods %q", e.ID(), methods(e))
	}
	if len(r.entries) != 1 {
		t.Errorf("%d records for 1 entry with readings", len(r.entries))
	}
	// Under meter * only messages cost: the one tools/call.
	if got := r.Cost(Meter{All: true}, nil); got != 1 {
		t.Errorf("All: Cost() = %d, want 1", got)
	}
}

func TestMemoryStaysSmallForHugeBatchesOfEmptyEntries(t *testing.T) {
	body := []byte("[" + strings.Repeat("{},", 1<<18) + "{}]") // 768 KiB
	r := new(Request)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r.Parse(body)
	runtime.ReadMemStats(&after)
	if !r.Valid() || r.Len() != 1<<18+1 {
		t.Fatalf("Valid %v Len %d", r.Valid(), r.Len())
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(body))/4 {
		t.Errorf("parsing %d bytes allocated %d bytes", len(body), alloc)
	}
}

func TestParseAndCostDoNotAllocateWithAWarmRequest(t *testing.T) {
	r := GetRequest()
	defer PutRequest(r)
	for _, body := range append(sdkBodies, benchCall, `{"method":"tools\u002fcall","params":{"name":"b\u0069g"}}`) {
		b := []byte(body)
		r.Parse(b) // warm
		allocs := testing.AllocsPerRun(100, func() {
			r.Parse(b)
			r.Cost(toolsCallMeter, tableCost)
			for i := range r.Len() {
				e := r.Entry(i)
				e.ID()
				e.HasMethod(ToolsCall)
				e.Arg("limit")
			}
		})
		if allocs != 0 {
			t.Errorf("%d allocations for %s", int(allocs), body)
		}
	}
	r.Reset()
	if r.body != nil {
		t.Errorf("Reset keeps the body")
	}
}

func TestResponse(t *testing.T) {
	for _, c := range []struct {
		name      string
		body      string
		responses []bool // Response() of each entry
	}{
		{"result", `{"jsonrpc":"2.0","id":1,"result":{}}`, []bool{true}},
		{"error_with_null_id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}`, []bool{true}},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, []bool{false}},
		{"server_request", `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"}`, []bool{false}},
		{"no_id_no_method", `{"result":1}`, []bool{false}},
		{"id_without_result_or_error", `{"id":5,"query":"x"}`, []bool{false}},
		{"id_with_a_method_that_is_no_string", `{"id":5,"method":7}`, []bool{false}},
		{"keys_in_another_case", `{"ID":5,"Result":true}`, []bool{true}},
		{"escaped_key", `{"id":5,"err\u006fr":{}}`, []bool{true}},
		{"batch", `[{"id":1,"result":1},{"method":"x"},5,{"id":2,"error":{}}]`, []bool{true, false, false, true}},
		{"invalid", `{"id":1,"result":`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := parse(t, c.body)
			if r.Len() != len(c.responses) {
				t.Fatalf("Len() = %d, want %d", r.Len(), len(c.responses))
			}
			for i, want := range c.responses {
				if got := r.Entry(i).Response(); got != want {
					t.Errorf("entry %d: Response() = %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestTrimDropsWhatALargeBodyGrew checks that a Request kept for reuse
// (as the handler keeps one per pooled decision) does not hold on to the
// buffers an unusually large body grew, and still parses afterwards.
func TestTrimDropsWhatALargeBodyGrew(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools\u002fcall","params":{"name":"x"}}`
	bodies := map[string]string{
		"entries and readings": "[" + strings.Repeat(call+",", keepEntries) + call + "]",
		"decoded strings":      `{"method":"` + strings.Repeat(`\u0041`, keepBytes+1) + `"}`,
		"entry bits":           "[" + strings.Repeat("0,", keepWords*64) + "0]",
		"nesting":              strings.Repeat("[", keepWords*64+1) + strings.Repeat("]", keepWords*64+1),
	}
	r := new(Request)
	for name, body := range bodies {
		r.Parse([]byte(body))
		grown := cap(r.entries) > keepEntries || cap(r.methods) > keepEntries || cap(r.arena) > keepBytes ||
			cap(r.objBits) > keepWords || cap(r.s.stack) > keepWords
		if !grown {
			t.Fatalf("%s: the body grew no buffer beyond what is kept", name)
		}
		r.Trim()
		if cap(r.entries) > keepEntries || cap(r.methods) > keepEntries || cap(r.tools) > keepEntries || cap(r.args) > keepEntries ||
			cap(r.arena) > keepBytes || cap(r.scratch) > keepBytes || cap(r.objBits) > keepWords || cap(r.s.stack) > keepWords {
			t.Fatalf("%s: Trim kept a grown buffer", name)
		}
	}
	r.Parse([]byte(call))
	if !r.Valid() || r.Len() != 1 || !r.Entry(0).Called() {
		t.Fatal("a trimmed Request no longer parses")
	}
}
