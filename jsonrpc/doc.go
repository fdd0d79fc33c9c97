// Package jsonrpc classifies MCP (Model Context Protocol) HTTP request bodies,
// which are JSON-RPC 2.0 messages, so that a rate limiter can charge them
// before they reach the backend.
//
// # Readings
//
// A rate limiter and the server behind it parse the same bytes with different
// JSON parsers, and parsers disagree about ambiguous input: duplicate keys
// (encoding/json keeps the last, others keep the first or merge objects), key
// case ("Method" matches the struct field "method" in encoding/json but not in
// JavaScript), escapes, depth limits and leniencies such as NaN. An attacker
// who finds such a differential can make the limiter see a cheap method while
// the backend runs tools/call.
//
// This package therefore never picks one interpretation. For each message
// (an Entry) it collects every reading: every value of every member whose
// decoded key equals "method" under [strings.EqualFold] (which is how
// encoding/json matches struct fields, including the Kelvin sign K and the
// long s ſ), every "params" object, every "name" string inside any of those,
// and every "arguments" object. [Request.Cost] charges an entry the maximum
// over its readings, so a message costs as a tool call whenever any plausible
// parser could read it as one.
//
// # Validity and best effort
//
// [Request.Valid] reports strict JSON (RFC 8259, after an optional UTF-8 BOM)
// with nesting at most [MaxDepth], the same bound as encoding/json. Invalid
// bodies are still scanned as far as possible: nesting beyond MaxDepth, the
// literals NaN, Infinity and -Infinity (accepted by Python), further JSON
// values after the first (accepted by streaming decoders), unquoted keys and
// strings and raw control bytes in strings (kotlinx.serialization's lenient
// mode) and escapes JSON has not (Ruby's json gem) make a body invalid but
// scanning continues; any other syntax error stops it. An invalid body with
// comments, or with single-quoted strings (Jackson's leniencies, see
// Request.Parse), is read again that way, and each reading counts. The cost
// of an invalid body is the cost of everything scanned, and at least 1.
//
// Jackson also reads an overlong UTF-8 sequence as the rune it encodes, and
// with UNWRAP_SINGLE_VALUE_ARRAYS a one-element array as its element: those
// readings are taken too, valid body or not.
//
// # Zero allocation
//
// Parsing is a single forward pass without recursion: the fixed levels
// (batch, message, params) are handled by dedicated code and any other value
// is skipped by an iterative scanner with a bit stack, so no input can
// overflow the goroutine stack. Readings are stored as byte ranges into the
// body; only strings containing escapes or invalid UTF-8 are decoded, into
// an arena owned by the Request. A pooled Request parses and costs typical
// messages without allocating. The price is aliasing: a Request refers to the
// body passed to Parse, and the bytes it hands out alias the body or the arena,
// until the next Reset.
//
// The body is interpreted as UTF-8. A handler in front of a backend that
// honours a Content-Type charset parameter or a Content-Encoding should
// refuse anything but UTF-8 and identity, or the backend may read a
// different message than this package did.
package jsonrpc
