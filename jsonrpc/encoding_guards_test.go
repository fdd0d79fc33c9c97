package jsonrpc

import "testing"

// Python's json.detect_encoding reads a two-byte body with a NUL, or a
// UTF-16 byte order mark, as UTF-16 too.
func TestWideEncodingOfTwoBytes(t *testing.T) {
	for _, b := range []string{"\xff\xfe", "\xfe\xff", "5\x00", "\x005"} {
		if !WideEncoding([]byte(b)) {
			t.Errorf("WideEncoding(%q) = false, want true", b)
		}
	}
	if WideEncoding([]byte("{}")) {
		t.Errorf(`WideEncoding("{}") = true`)
	}
}
