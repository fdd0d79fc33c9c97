package jsonrpc

import (
	"io"
	"sync"
)

// Buffer is a pooled body buffer filled by ReadBody.
type Buffer struct {
	b []byte
}

// Bytes returns the body. It must not be used after Release.
func (b *Buffer) Bytes() []byte { return b.b }

// Release returns b to the pool. Neither b nor its Bytes may be used
// afterwards (nor a Request that parsed them, until it is Reset).
// Release of a nil Buffer does nothing.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	if cap(b.b) > maxPooledBuffer {
		b.b = nil
	}
	b.b = b.b[:0]
	bufferPool.Put(b)
}

const (
	minBufferSize   = 512
	maxPooledBuffer = 4 << 20
	// maxEmptyReads bounds consecutive (0, nil) reads, as bufio does.
	maxEmptyReads = 100
)

var bufferPool = sync.Pool{New: func() any { return new(Buffer) }}

// ReadBody reads r to EOF into a pooled Buffer, but at most max bytes.
//
// It never trusts a declared length: it reads until EOF or until it holds
// max+1 bytes. tooLarge is true when r has more than max bytes; then the
// caller should answer 413 and forward nothing. On a read error err is
// that error. Either way b holds what was read (the body's beginning,
// which may still name the request's id, see LeadingID). The caller owns
// b and must Release it. A negative max is treated as 0.
func ReadBody(r io.Reader, max int64) (b *Buffer, tooLarge bool, err error) {
	if max < 0 {
		max = 0
	}
	// limit is the capacity we may need: max+1 bytes detect a larger body.
	limit := max
	if limit < 1<<62 {
		limit++
	}
	b = bufferPool.Get().(*Buffer)
	buf := b.b[:0]
	empty := 0
	for {
		if len(buf) == cap(buf) {
			buf = grow(buf, limit)
		}
		end := cap(buf)
		if int64(end) > limit {
			end = int(limit)
		}
		n, rerr := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			b.b = buf
			return b, true, nil
		}
		switch {
		case rerr == io.EOF:
			b.b = buf
			return b, false, nil
		case rerr != nil:
			b.b = buf
			return b, false, rerr
		case n == 0:
			if empty++; empty >= maxEmptyReads {
				b.b = buf
				return b, false, io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
}

// grow returns buf with more capacity, doubling but never beyond limit.
func grow(buf []byte, limit int64) []byte {
	c := int64(max(2*cap(buf), minBufferSize))
	if c > limit {
		c = limit
	}
	if c <= int64(cap(buf)) { // cannot happen: len(buf) <= max < limit
		c = int64(cap(buf)) + 1
	}
	nb := make([]byte, len(buf), c)
	copy(nb, buf)
	return nb
}
