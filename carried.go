package mcplimit

import (
	"bytes"
	"io"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// carried holds, in one allocation, what a request takes past the return of
// ServeHTTP and so cannot live in the pooled decision: the reader that hands
// its body on (the transport may read and close it later), and the backing
// array of its RateLimit header value (access logs read headers after the
// handler chain returned).
type carried struct {
	body      bodyReader
	rateLimit [1]string
}

// carry returns d's carried values, allocating them on first use.
func (d *decision) carry() *carried {
	if d.carried == nil {
		d.carried = new(carried)
	}
	return d.carried
}

// bodyReader hands the inspected body on; closing it returns the buffer to
// the pool once the next handler is done with it.
type bodyReader struct {
	bytes.Reader
	buf *jsonrpc.Buffer
}

// Close implements io.Closer.
func (b *bodyReader) Close() error {
	if b.buf != nil {
		b.Reset(nil)
		b.buf.Release()
		b.buf = nil
	}
	return nil
}

var _ io.ReadCloser = (*bodyReader)(nil)
