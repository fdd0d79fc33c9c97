package jsonrpc

import (
	"encoding/binary"
	"testing"
	"unicode/utf16"
)

func TestWideEncoding(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
	// encode writes s in UTF-16 (width 2) or UTF-32 (width 4) in order,
	// after a byte order mark if bom.
	encode := func(s string, width int, order binary.AppendByteOrder, bom bool) []byte {
		var b []byte
		put := func(u rune) {
			if width == 2 {
				b = order.AppendUint16(b, uint16(u))
			} else {
				b = order.AppendUint32(b, uint32(u))
			}
		}
		if bom {
			put(0xFEFF)
		}
		for _, r := range s {
			if width == 2 {
				for _, u := range utf16.Encode([]rune{r}) {
					put(rune(u))
				}
			} else {
				put(r)
			}
		}
		return b
	}
	le, be := binary.LittleEndian, binary.BigEndian
	tests := []struct {
		name string
		body []byte
		want bool
	}{
		{"UTF-8", []byte(msg), false},
		{"UTF-8 with BOM", append([]byte{0xEF, 0xBB, 0xBF}, msg...), false},
		{"UTF-8 after whitespace", []byte(" \n" + msg), false},
		{"UTF-8 batch", []byte("[" + msg + "]"), false},
		{"empty", nil, false},
		{"one byte", []byte("{"), false},
		{"UTF-16LE", encode(msg, 2, le, false), true},
		{"UTF-16LE with BOM", encode(msg, 2, le, true), true},
		{"UTF-16BE", encode(msg, 2, be, false), true},
		{"UTF-16BE with BOM", encode(msg, 2, be, true), true},
		{"UTF-16LE after a space", encode(" "+msg, 2, le, false), true},
		{"UTF-32LE", encode(msg, 4, le, false), true},
		{"UTF-32LE with BOM", encode(msg, 4, le, true), true},
		{"UTF-32BE", encode(msg, 4, be, false), true},
		{"UTF-32BE with BOM", encode(msg, 4, be, true), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WideEncoding(tt.body); got != tt.want {
				t.Errorf("WideEncoding(% x...) = %v, want %v", tt.body[:min(len(tt.body), 8)], got, tt.want)
			}
		})
	}
}
