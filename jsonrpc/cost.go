package jsonrpc

import "math"

// ToolsCall is the method whose cost depends on the tool it calls.
const ToolsCall = "tools/call"

// Meter says which methods cost.
type Meter struct {
	// All makes every request cost at least 1: each entry, and a body
	// that is invalid or holds no object.
	All bool
	// Methods lists the metered methods, typically {"tools/call"}.
	Methods []string
}

// Enabled reports whether m meters anything.
func (m Meter) Enabled() bool { return m.All || len(m.Methods) > 0 }

// metered reports whether a method reading is metered.
func (m Meter) metered(method []byte) bool {
	if m.All {
		return true
	}
	for _, x := range m.Methods {
		if string(method) == x {
			return true
		}
	}
	return false
}

// Cost returns what the request costs under m: the sum over its entries of
// each entry's cost, which is the maximum over its method readings of
//
//   - 0 for a method that is not metered (and for an entry with no method),
//   - toolCost(name) for a metered "tools/call", taking the highest cost over
//     all params.name string readings, or toolCost(nil) when there is none,
//   - 1 for any other metered method,
//
// and at least 1 for every JSON-RPC message (a request, a notification or
// a response) when m.All is set: other entries, such as the elements of a
// REST body's array, cost nothing, and the caller charges a body at least
// 1. A body that is invalid, or holds no object (such as [] or 5), costs
// at least 1 when m is enabled;
// an invalid body costs whatever its scanned part costs if that is more:
// the most any one reading of it costs (see Parse), as a backend reads it
// one way. A disabled Meter costs 0.
//
// toolCost must return at least 1 (smaller results count as 1) and must
// neither modify nor keep its argument, which aliases the body; a nil
// toolCost means every tool costs 1.
// The sum saturates at math.MaxInt64.
func (r *Request) Cost(m Meter, toolCost func(tool []byte) int64) int64 {
	if !m.Enabled() {
		return 0
	}
	var total int64
	if r.oneReading() {
		total = entriesCost(m, toolCost, r.entries)
	} else {
		total = r.mostCost(m, toolCost)
	}
	if total < 1 && (!r.valid || r.objects == 0) {
		total = 1
	}
	return total
}

// entriesCost returns the sum of the costs of the entries whose records
// are records (an entry without one costs nothing).
func entriesCost(m Meter, toolCost func([]byte) int64, records []Entry) int64 {
	var total int64
	for i := range records {
		total = addSat(total, records[i].cost(m, toolCost))
	}
	return total
}

// mostCost returns the cost of the reading of an invalid body that costs
// most.
func (r *Request) mostCost(m Meter, toolCost func([]byte) int64) int64 {
	return r.mostOver(func(records []Entry) int64 { return entriesCost(m, toolCost, records) })
}

// Calls returns how many calls the request puts in flight under m: its
// entries that cost something (a batch's calls may all run at once), and
// at least 1 when the request costs anything at all. For an invalid body,
// it is the most any one reading puts in flight.
func (r *Request) Calls(m Meter) int {
	if !m.Enabled() {
		return 0
	}
	if r.count+r.altCount <= 1 { // one entry at most: no reading counts more than the minimum
		return 1
	}
	n := r.mostOver(func(records []Entry) int64 { return int64(entriesCalls(m, records)) })
	return max(int(n), 1)
}

// ToolCalls returns how many entries call tool (a "tools/call" method
// reading with a params.name reading equal to tool), each entry once
// however many of its readings name it: for an invalid body, the most any
// one reading calls it, as a backend runs one reading.
func (r *Request) ToolCalls(tool []byte) int64 {
	return r.mostOver(func(records []Entry) int64 {
		var n int64
		for i := range records {
			if records[i].CallsTool(tool) {
				n++
			}
		}
		return n
	})
}

// entriesCalls returns how many of the entries whose records are records
// put a call in flight under m.
func entriesCalls(m Meter, records []Entry) int {
	n := 0
	for i := range records {
		if records[i].Metered(m) {
			n++
		}
	}
	return n
}

// addSat returns a+b for b >= 0, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// cost returns the entry's cost; see Request.Cost.
func (e *Entry) cost(m Meter, toolCost func([]byte) int64) int64 {
	var c int64
	if m.All && e.message() {
		c = 1
	}
	tools := false
	for _, t := range e.r.methods[e.methods.lo:e.methods.hi] {
		b := e.r.bytes(t)
		if !m.metered(b) {
			continue
		}
		if string(b) == ToolsCall {
			if !tools {
				tools = true
				c = max(c, e.toolCost(toolCost))
			}
			continue
		}
		c = max(c, 1)
	}
	return c
}

// toolCost returns the highest cost over the entry's tool name readings.
func (e *Entry) toolCost(toolCost func([]byte) int64) int64 {
	if toolCost == nil {
		return 1
	}
	names := e.r.tools[e.tools.lo:e.tools.hi]
	if len(names) == 0 {
		return max(1, toolCost(nil))
	}
	c := int64(1)
	for _, t := range names {
		c = max(c, toolCost(e.r.bytes(t)))
	}
	return c
}
