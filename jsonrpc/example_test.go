package jsonrpc_test

import (
	"fmt"
	"strings"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// A handler reads the body, parses it into a pooled Request and charges it.
func Example() {
	httpBody := strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call",` +
		`"params":{"name":"search","arguments":{"limit":50}},"method":"tools/list"}`)

	buf, tooLarge, err := jsonrpc.ReadBody(httpBody, 1<<20)
	defer buf.Release()
	if err != nil || tooLarge {
		return // answer 400 or 413
	}
	req := jsonrpc.GetRequest()
	defer jsonrpc.PutRequest(req) // runs before buf.Release: req refers to buf

	req.Parse(buf.Bytes())
	toolCost := func(tool []byte) int64 {
		if string(tool) == "search" {
			return 3
		}
		return 1
	}
	cost := req.Cost(jsonrpc.Meter{Methods: []string{jsonrpc.ToolsCall}}, toolCost)
	fmt.Println("valid:", req.Valid(), "entries:", req.Len(), "cost:", cost)

	e := req.Entry(0)
	e.Methods(func(m []byte) { fmt.Println("method reading:", string(m)) })
	limit, numeric, present := e.Arg("limit")
	fmt.Println("id:", string(e.ID()), "limit:", limit, numeric, present)
	// Output:
	// valid: true entries: 1 cost: 3
	// method reading: tools/call
	// method reading: tools/list
	// id: 7 limit: 50 true true
}
