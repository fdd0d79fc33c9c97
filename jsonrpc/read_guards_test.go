package jsonrpc

import (
	"io"
	"strings"
	"testing"
)

// emptyReader returns (0, nil) forever and counts its calls.
type emptyReader struct{ n int }

func (c *emptyReader) Read([]byte) (int, error) { c.n++; return 0, nil }

func TestReadBodyGivesUpAfterMaxEmptyReads(t *testing.T) {
	c := &emptyReader{}
	b, _, err := ReadBody(c, 100)
	defer b.Release()
	if err != io.ErrNoProgress || c.n != maxEmptyReads {
		t.Errorf("err %v after %d reads, want ErrNoProgress after %d", err, c.n, maxEmptyReads)
	}
}

// stutterReader returns a byte, then (0, nil), in turn, n bytes in all.
type stutterReader struct {
	n     int
	empty bool
}

func (s *stutterReader) Read(p []byte) (int, error) {
	if s.empty = !s.empty; s.empty {
		return 0, nil
	}
	if s.n == 0 {
		return 0, io.EOF
	}
	s.n--
	p[0] = 'x'
	return 1, nil
}

// Only consecutive empty reads count: progress resets the count.
func TestReadBodyEmptyReadsMustBeConsecutive(t *testing.T) {
	b, tooLarge, err := ReadBody(&stutterReader{n: 3 * maxEmptyReads}, 1<<20)
	defer b.Release()
	if err != nil || tooLarge || len(b.Bytes()) != 3*maxEmptyReads {
		t.Errorf("ReadBody = %d bytes, %v, %v; want %d bytes", len(b.Bytes()), tooLarge, err, 3*maxEmptyReads)
	}
}

// grow never gives more capacity than the limit.
func TestGrowStopsAtTheLimit(t *testing.T) {
	if c := cap(grow(nil, 11)); c != 11 {
		t.Errorf("cap(grow(nil, 11)) = %d, want 11", c)
	}
}

// Release drops a buffer beyond maxPooledBuffer rather than pool it.
func TestReleaseDropsAHugeBuffer(t *testing.T) {
	b := &Buffer{b: make([]byte, 0, maxPooledBuffer+1)}
	b.Release()
	if cap(b.b) != 0 {
		t.Errorf("cap after Release = %d, want 0", cap(b.b))
	}
}

// A reused pooled buffer larger than max+1 is still read only to max+1.
func TestReadBodyPooledBufferStopsAtMaxPlusOne(t *testing.T) {
	for range 10 {
		big, _, _ := ReadBody(strings.NewReader(strings.Repeat("x", 4096)), 4096)
		big.Release()
		b, tooLarge, _ := ReadBody(strings.NewReader(strings.Repeat("y", 4096)), 10)
		n := len(b.Bytes())
		b.Release()
		if !tooLarge || n != 11 {
			t.Fatalf("ReadBody = %d bytes, tooLarge %v; want 11, true", n, tooLarge)
		}
	}
}
