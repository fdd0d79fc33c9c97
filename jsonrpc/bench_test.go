package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// benchCall is a typical tools/call body of about 300 bytes.
const benchCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_documents",` +
	`"arguments":{"query":"rate limiting for model context protocol servers","limit":10,` +
	`"filters":{"lang":"en","tags":["mcp","caddy","ratelimit"],"since":"2025-01-01"}},` +
	`"_meta":{"progressToken":"a1b2c3d4-e5f6-7890-abcd-ef1234567890"}}}`

func benchParse(b *testing.B, body []byte) {
	b.Helper()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	r := GetRequest()
	defer PutRequest(r)
	r.Parse(body) // warm the Request's buffers
	for b.Loop() {
		r.Parse(body)
		if r.Cost(toolsCallMeter, tableCost) < 1 {
			b.Fatal("tools/call costs nothing")
		}
	}
}

func BenchmarkParseToolsCall(b *testing.B) {
	benchParse(b, []byte(benchCall))
}

func BenchmarkParseBatch32(b *testing.B) {
	benchParse(b, []byte("["+strings.Repeat(benchCall+",", 31)+benchCall+"]"))
}

func BenchmarkParse1MiB(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"upload","arguments":{"text":"`)
	for body.Len() < 512<<10 {
		body.WriteString(`lorem ipsum dolor sit amet, \"quoted\" caf\u00e9 `)
	}
	body.WriteString(`","samples":[`)
	for i := 0; body.Len() < 1<<20-64; i++ {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`{"t":12345,"v":-0.0625e3}`)
	}
	body.WriteString(`]}}}`)
	benchParse(b, body.Bytes())
}

func BenchmarkReadBody(b *testing.B) {
	body := []byte(benchCall)
	rd := bytes.NewReader(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		buf, tooLarge, err := ReadBody(rd, 1<<20)
		if err != nil || tooLarge {
			b.Fatal(err, tooLarge)
		}
		buf.Release()
	}
}

func BenchmarkArg(b *testing.B) {
	r := parse(b, benchCall)
	e := r.Entry(0)
	b.ReportAllocs()
	for b.Loop() {
		if max, _, _ := e.Arg("limit"); max != 10 {
			b.Fatal(max)
		}
	}
}

// BenchmarkBaselineJSONValid calibrates the machine: encoding/json's
// validator alone on the body of BenchmarkParseToolsCall.
func BenchmarkBaselineJSONValid(b *testing.B) {
	body := []byte(benchCall)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkBaselineSkip is the classifier's floor: the scanner Parse uses,
// validating the same body's syntax without reading any member.
func BenchmarkBaselineSkip(b *testing.B) {
	body := []byte(benchCall)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var s scanner
	for b.Loop() {
		if s.skipValue(body, 0) != len(body) || s.soft {
			b.Fatal("invalid")
		}
	}
}
