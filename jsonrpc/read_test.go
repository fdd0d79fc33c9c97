package jsonrpc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadBodyLimit(t *testing.T) {
	const max = 1000
	for _, c := range []struct {
		name     string
		size     int
		max      int64
		tooLarge bool
	}{
		{"empty", 0, max, false},
		{"one_below_max", max - 1, max, false},
		{"exactly_max_is_ok", max, max, false},
		{"max_plus_one_is_too_large", max + 1, max, true},
		{"far_beyond_max", 10 * max, max, true},
		{"max_zero_empty_ok", 0, 0, false},
		{"max_zero_one_byte_too_large", 1, 0, true},
		{"negative_max_is_zero", 1, -5, true},
	} {
		body := bytes.Repeat([]byte("x"), c.size)
		readers := map[string]io.Reader{
			"whole":    bytes.NewReader(body),
			"one_byte": iotest.OneByteReader(bytes.NewReader(body)),
			"data_eof": iotest.DataErrReader(bytes.NewReader(body)),
			"half":     iotest.HalfReader(bytes.NewReader(body)),
		}
		for rn, rd := range readers {
			t.Run(c.name+"/"+rn, func(t *testing.T) {
				b, tooLarge, err := ReadBody(rd, c.max)
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if tooLarge != c.tooLarge {
					t.Fatalf("tooLarge = %v, want %v", tooLarge, c.tooLarge)
				}
				defer b.Release()
				if tooLarge {
					if want := body[:limit(c.max)+1]; !bytes.Equal(b.Bytes(), want) {
						t.Errorf("a too-large body: holds %d bytes, want its first %d", len(b.Bytes()), len(want))
					}
					return
				}
				if !bytes.Equal(b.Bytes(), body) {
					t.Errorf("read %d bytes, want %d", len(b.Bytes()), len(body))
				}
			})
		}
	}
}

// limit is the max ReadBody reads by: a negative one is 0.
func limit(m int64) int {
	if m < 0 {
		return 0
	}
	return int(m)
}

// countingReader counts bytes handed out, to check ReadBody stops at max+1.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadBodyIgnoresDeclaredLengthAndStopsAtMaxPlusOne(t *testing.T) {
	cr := &countingReader{r: strings.NewReader(strings.Repeat("y", 1<<20))}
	if _, tooLarge, err := ReadBody(cr, 5000); !tooLarge || err != nil {
		t.Fatalf("tooLarge %v err %v", tooLarge, err)
	}
	if cr.n != 5001 {
		t.Errorf("read %d bytes from a too-large body, want max+1 = 5001", cr.n)
	}
}

func TestReadBodyPropagatesErrors(t *testing.T) {
	boom := errors.New("boom")
	for name, rd := range map[string]io.Reader{
		"immediate":  iotest.ErrReader(boom),
		"after_data": io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(boom)),
		"timeout":    iotest.TimeoutReader(strings.NewReader(strings.Repeat("z", 4096))),
	} {
		t.Run(name, func(t *testing.T) {
			b, tooLarge, err := ReadBody(rd, 1<<20)
			defer b.Release()
			want, read := boom, ""
			switch name {
			case "timeout":
				// Its first read fills what the buffer had room for,
				// which depends on the pooled buffer ReadBody got.
				n := min(max(len(b.Bytes()), 1), 4096)
				want, read = iotest.ErrTimeout, strings.Repeat("z", n)
			case "after_data":
				read = "partial"
			}
			if !errors.Is(err, want) || tooLarge || string(b.Bytes()) != read {
				t.Errorf("ReadBody = (%q, %v, %v), want (%q, false, %v)", b.Bytes(), tooLarge, err, read, want)
			}
		})
	}
	b, _, err := ReadBody(iotest.ErrReader(nil), 10) // (0, nil) forever
	if !errors.Is(err, io.ErrNoProgress) || len(b.Bytes()) != 0 {
		t.Errorf("reader without progress: (%q, %v), want io.ErrNoProgress", b.Bytes(), err)
	}
	b.Release()
	var nilBuf *Buffer
	nilBuf.Release() // must not panic
}

func TestReadBodyReusesBuffers(t *testing.T) {
	body := strings.Repeat("q", 300)
	for range 3 {
		b, _, err := ReadBody(strings.NewReader(body), 1<<20)
		if err != nil || string(b.Bytes()) != body {
			t.Fatalf("err %v, body %q", err, b.Bytes())
		}
		b.Release()
	}
}
