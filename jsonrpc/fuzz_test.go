package jsonrpc

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
)

// Real bodies sent by MCP clients.
var sdkBodies = []string{
	// Go SDK (github.com/modelcontextprotocol/go-sdk).
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"client","version":"v0.0.1"},"protocolVersion":"2025-06-18"}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}}`,
	// TypeScript SDK.
	`{"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ts-client","version":"1.0.0"}},"jsonrpc":"2.0","id":0}`,
	`{"method":"notifications/initialized","jsonrpc":"2.0"}`,
	`{"method":"tools/list","jsonrpc":"2.0","id":1}`,
	`{"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}},"jsonrpc":"2.0","id":1}`,
	// A batch, and a client's response to a server request.
	`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`,
	`{"jsonrpc":"2.0","id":"srv-1","result":{"content":[{"type":"text","text":"ok"}]}}`,
}

// fuzzSeeds are the shapes the rules are about.
var fuzzSeeds = []string{
	"jsonrpc=2.0&id=1&method=tools%2Fcall&params[name]=big&params%5Barguments%5D[limit]=5+0&x[]=%C3",
	"{\n jsonrpc: 2.0\n id: 1\n method: tools/call\n params: {\n  name: big\n  arguments: {\n   limit: 50.\n  }\n }\n}",
	"method: '''tools/call'''\nparams: {name: '''\n    big\n    '''\n}\n# c\n// c\n/* c */",
	"[\n {\n  \"method\": \"tools/call\"\n  id\": 1\n }\n {a: 'x\\'y', b: true , c: 1e5}\n]",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"a":1,"b,"x":{"y":[]}}e":5}}}`,
	`{""""""1"method""tools/call""params"{"name""search""arguments"{""d",":}`,
	`{"method":"tools/call","params":{"name":"search","arguments":{"limi"id":7,t":1}}}`,
	`{"method":"tools/call","params":{"name":"big","arguments":{"limit":}}}`,
	`{"method":"tools/call\u0000","params":{"name":"sea\x72ch","arguments":{li\u006dit:1,"q":"\uZZ" "limit" 7}}}`,
	"\v{\"method\":\u00a0\"tools/\\\ncall\",\"params\":{\"name\":'big'}}",
	"[{\"method\":\"tools/call\",\"params\":{\"name\":\"big\",},},,{\"x\":[,1,,],// c\r\"method\":\"tools/call\"},]",
	`{'method':'tools/call','params':{'name':'big','arguments':{'limit':'a,}"',"limit":5}}}`,
	"{x:'a,method:tools/call,#c\nparams:{name:big,arguments:[{limit:7}]},y:b'}",
	"{\"method\":[\"tools\xc0\xafcall\"],\"params\":[{\"arguments\":{\"limi\xc1\xb4\":9}}]}",
	`{"method":"tools/list","method":"tools/call"}`,
	`{"method":"tools/call","method":"tools/list"}`,
	`{"method":"tools/call","params":{"name":"echo"},"params":{"name":"big"}}`,
	`{"method":"tools/call","params":{"name":"big","name":"echo"}}`,
	`{"Method":"tools/call","Params":{"Name":"photo"},"ID":1}`,
	`{"METHOD":"tools/call","param\u017f":{"NAME":"big","arguments":{"LIMIT":10,"limit":100}}}`,
	"{\"method\":\"tools/call\",\"param\u017f\":{\"name\":\"big\"}}",
	`{"\u006dethod":"tools\u002fcall","params":{"name":"\ud83d\udcf7"}}`,
	"\xEF\xBB\xBF {\"method\":\"tools/call\"}\n",
	`{"method":"tools/call","params":{"name":"big","arguments":{"x":[[[[[[1]]]]]]}}}`,
	`{"method":"tools/call","params":{"name":"big"`,
	`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"photo"}}`,
	`[]`, `[1,{"method":"tools/call"},[]]`, `5`, `null`, `[null]`, `{}`,
	`{"method":"tools/call"} x`, `{"method":"tools/list"}{"method":"tools/call"}`,
	"{\"method\":\"tools/call\xff\"}",
	`{"params":{"name":"big","arguments":{"x":NaN}},"method":"tools/call"}`,
	`{"method":"tools/call","params":{"arguments":{"limit":1e400}},"params":null}`,
	`{"method":"tools/call","params":{"arguments":{"limit":"100"}},"id":null}`,
	`{jsonrpc:"2.0",id:1,method:tools/call,params:{name:big,arguments:{limit:5000,q:{a:[b,c]}}}}`,
	"/* c */{\"method\"://\n\"tools/call\",\"params\":{\"arguments\":{\"q\":[/*]*/1],\"limit\":9},\"name\":\"big\"}}",
}

// refMessage is how the Go SDK sees a message: encoding/json, last key wins,
// keys matched case-insensitively.
type refMessage struct {
	Method string
	Params struct{ Name string }
}

func refCost(method, name string) int64 {
	if method != ToolsCall {
		return 0
	}
	return max(1, tableCost([]byte(name)))
}

// lastWinsCost costs data as encoding/json reads it; ok is false when
// encoding/json rejects it.
func lastWinsCost(data []byte) (cost int64, ok bool) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		var batch []refMessage
		if json.Unmarshal(data, &batch) != nil {
			return 0, false
		}
		for _, m := range batch {
			cost += refCost(m.Method, m.Params.Name)
		}
		return cost, true
	}
	var m refMessage
	if json.Unmarshal(data, &m) != nil {
		return 0, false
	}
	return refCost(m.Method, m.Params.Name), true
}

// firstWinsCost costs data as a parser that keeps the first of duplicate
// keys reads it (matching keys case-insensitively); ok is false when the
// token stream is not one JSON value.
func firstWinsCost(data []byte) (cost int64, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return 0, false
	}
	switch tok {
	case json.Delim('{'):
		if cost, ok = firstWinsMessage(dec); !ok {
			return 0, false
		}
	case json.Delim('['):
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return 0, false
			}
			if tok != json.Delim('{') {
				if !skipTokens(dec, tok) {
					return 0, false
				}
				continue
			}
			c, ok := firstWinsMessage(dec)
			if !ok {
				return 0, false
			}
			cost += c
		}
		if _, err := dec.Token(); err != nil {
			return 0, false
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, false
	}
	return cost, true
}

// firstWinsMessage reads the members of an object whose '{' was read.
func firstWinsMessage(dec *json.Decoder) (int64, bool) {
	var method, name string
	var haveMethod, haveParams, haveName bool
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return 0, false
		}
		tok, err := dec.Token()
		if err != nil {
			return 0, false
		}
		key, _ := k.(string)
		switch {
		case strings.EqualFold(key, "method") && !haveMethod:
			haveMethod = true
			method, _ = tok.(string)
		case strings.EqualFold(key, "params") && !haveParams && tok == json.Delim('{'):
			haveParams = true
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return 0, false
				}
				tok, err := dec.Token()
				if err != nil {
					return 0, false
				}
				key, _ := k.(string)
				if s, isString := tok.(string); isString && strings.EqualFold(key, "name") && !haveName {
					haveName = true
					name = s
				} else if !skipTokens(dec, tok) {
					return 0, false
				}
			}
			if _, err := dec.Token(); err != nil {
				return 0, false
			}
			continue
		}
		if !skipTokens(dec, tok) {
			return 0, false
		}
	}
	if _, err := dec.Token(); err != nil {
		return 0, false
	}
	return refCost(method, name), true
}

// skipTokens skips the rest of the value that started with tok.
func skipTokens(dec *json.Decoder, tok json.Token) bool {
	depth := 0
	for {
		if d, isDelim := tok.(json.Delim); isDelim {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return true
		}
		var err error
		if tok, err = dec.Token(); err != nil {
			return false
		}
	}
}

func FuzzCost(f *testing.F) {
	for _, s := range sdkBodies {
		f.Add([]byte(s))
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("[" + strings.Join(sdkBodies, ",") + "]"))
	r := new(Request) // reused across inputs, as the handler's pool does
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCost(t, r, data)
	})
}

// FuzzStructuredMessages builds JSON-RPC bodies full of duplicate, case-folded
// and escaped keys from the fuzzer's bytes, so that the reference decoders
// disagree often, and checks them like FuzzCost.
func FuzzStructuredMessages(f *testing.F) {
	for _, s := range []string{"", "\x00\x01\x02", "abcdefghijklmnopqrstuvwxyz", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8"} {
		f.Add([]byte(s))
	}
	r := new(Request)
	f.Fuzz(func(t *testing.T, choices []byte) {
		c := &chooser{b: choices}
		var body strings.Builder
		if c.next(3) == 0 {
			body.WriteString("[")
			for i := range c.next(5) {
				if i > 0 {
					body.WriteString(",")
				}
				if c.next(6) == 0 {
					body.WriteString(c.pick(`1`, `null`, `[]`, `"x"`))
				} else {
					genMessage(c, &body)
				}
			}
			body.WriteString("]")
		} else {
			genMessage(c, &body)
		}
		checkCost(t, r, []byte(body.String()))
	})
}

// chooser turns fuzz bytes into choices.
type chooser struct {
	b []byte
	i int
}

func (c *chooser) next(n int) int {
	if c.i >= len(c.b) {
		return 0
	}
	c.i++
	return int(c.b[c.i-1]) % n
}

func (c *chooser) pick(options ...string) string { return options[c.next(len(options))] }

func (c *chooser) ws() string { return c.pick("", "", "", " ", "\n\t") }

func genMessage(c *chooser, w *strings.Builder) {
	w.WriteString("{" + c.ws())
	for i := range c.next(6) {
		if i > 0 {
			w.WriteString("," + c.ws())
		}
		switch c.next(4) {
		case 0:
			w.WriteString(c.pick(`"method"`, `"Method"`, `"METHOD"`, `"\u006dethod"`, `"meth\u006Fd"`, `"methods"`))
			w.WriteString(c.ws() + ":" + c.ws())
			w.WriteString(c.pick(`"tools/call"`, `"tools/list"`, `"tools\u002fcall"`, `"initialize"`, `"Tools/Call"`, `null`, `5`))
		case 1:
			w.WriteString(c.pick(`"params"`, `"Params"`, `"PARAM\u017f"`, "\"param\u017f\"", `"p\u0061rams"`))
			w.WriteString(c.ws() + ":" + c.ws())
			if c.next(5) == 0 {
				w.WriteString(c.pick(`null`, `5`, `"x"`, `[]`))
				continue
			}
			w.WriteString("{")
			for j := range c.next(5) {
				if j > 0 {
					w.WriteString(",")
				}
				switch c.next(3) {
				case 0:
					w.WriteString(c.pick(`"name"`, `"Name"`, `"NAME"`, `"n\u0061me"`, `"nam\u0065"`))
					w.WriteString(":" + c.pick(`"big"`, `"photo"`, `"echo"`, `"\u0062ig"`, `""`, `"\ud83d\udcf7"`, `null`, `7`))
				case 1:
					w.WriteString(c.pick(`"arguments"`, `"Arguments"`, `"argument\u017f"`))
					w.WriteString(":" + c.pick(`{"limit":10}`, `{"LIMIT":100,"limit":1}`, `{"limit":"100"}`, `{"limit":null}`, `{"limit":1e400}`, `null`, `[1]`, `{"a":{"limit":5}}`))
				default:
					w.WriteString(c.pick(`"_meta":{"progressToken":1}`, `"x":[{"name":"big"}]`))
				}
			}
			w.WriteString("}")
		case 2:
			w.WriteString(c.pick(`"id"`, `"ID"`, `"Id"`) + ":" + c.pick(`1`, `"a"`, `null`, `{"b":[]}`))
		default:
			w.WriteString(c.pick(`"jsonrpc":"2.0"`, `"result":{}`, `"name":"big"`))
		}
		w.WriteString(c.ws())
	}
	w.WriteString("}")
}

// checkCost checks Parse and Cost on data against encoding/json and a
// first-key-wins decoder, and calls every accessor.
func checkCost(t *testing.T, r *Request, data []byte) {
	t.Helper()
	r.Parse(data)
	cost := r.Cost(toolsCallMeter, tableCost)
	exercise(r)

	valid := json.Valid(data)
	if valid && !r.Valid() {
		t.Fatalf("encoding/json accepts what Parse rejects: %q", data)
	}
	if r.Valid() && !valid && !bytes.HasPrefix(data, []byte("\xEF\xBB\xBF")) {
		t.Fatalf("Parse accepts what encoding/json rejects: %q", data)
	}
	if !r.Valid() && cost < 1 {
		t.Fatalf("invalid body costs %d", cost)
	}
	if ref, ok := lastWinsCost(data); ok && cost < ref {
		t.Fatalf("Cost %d < encoding/json reading %d: %q", cost, ref, data)
	}
	if valid {
		if ref, ok := firstWinsCost(data); ok && cost < ref {
			t.Fatalf("Cost %d < first-key-wins reading %d: %q", cost, ref, data)
		}
	}
	checkArg(t, r, data)

	// What Hjson reads is JSON, and an invalid body costs at least that.
	if text, ok := hjsonJSON(nil, data, false); ok {
		if !json.Valid(text) {
			t.Fatalf("the Hjson reading of %q is no JSON: %q", data, text)
		}
		if ref := parse(t, string(text)).Cost(toolsCallMeter, tableCost); !valid && cost < ref {
			t.Fatalf("Cost %d < Hjson reading %d: %q", cost, ref, data)
		}
	}

	// So is what qs reads of a form.
	if text, ok := formJSON(nil, data); ok {
		if !json.Valid(text) {
			t.Fatalf("the form reading of %q is no JSON: %q", data, text)
		}
		if ref := parse(t, string(text)).Cost(toolsCallMeter, tableCost); !valid && cost < ref {
			t.Fatalf("Cost %d < form reading %d: %q", cost, ref, data)
		}
	}

	// A fresh Request agrees with the reused one.
	if again := parse(t, string(data)).Cost(toolsCallMeter, tableCost); again != cost {
		t.Fatalf("reused Request cost %d, fresh %d", cost, again)
	}
}

// exercise calls every accessor on every entry.
func exercise(r *Request) {
	r.Batch()
	for i := range r.Scanned() { // every entry the handler looks at, an invalid body's too
		e := r.Entry(i)
		e.ID()
		e.Notification()
		e.HasMethod(ToolsCall)
		e.Methods(func([]byte) {})
		e.Tools(func([]byte) {})
		e.Arg("limit")
		e.Arg("")
	}
	r.Cost(Meter{All: true}, nil)
}

// checkArg compares Arg("limit") with encoding/json's reading of a single
// message's params.arguments.limit.
func checkArg(t *testing.T, r *Request, data []byte) {
	var m struct {
		Params struct {
			Arguments struct{ Limit json.RawMessage }
		}
	}
	if r.Batch() || r.Len() != 1 || json.Unmarshal(data, &m) != nil {
		return
	}
	raw := string(bytes.TrimSpace(m.Params.Arguments.Limit))
	if raw == "" || raw == "null" {
		return
	}
	max, numeric, present := r.Entry(0).Arg("limit")
	if !present {
		t.Fatalf("Arg(limit) not present, encoding/json reads %s: %q", raw, data)
	}
	if c := raw[0]; c == '-' || '0' <= c && c <= '9' {
		if f, _ := strconv.ParseFloat(raw, 64); max < f {
			t.Fatalf("Arg(limit) max %v < encoding/json reading %v: %q", max, f, data)
		}
	} else if numeric {
		t.Fatalf("Arg(limit) numeric, encoding/json reads %s: %q", raw, data)
	}
}
