package jsonrpc

import (
	"encoding/binary"
	"testing"
	"unicode/utf16"
)

func TestWideEncoding(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
	utf16le := func(s string, bom bool) []byte {
		var b []byte
		if bom {
			b = append(b, 0xFF, 0xFE)
		}
		for _, u := range utf16.Encode([]rune(s)) {
			b = binary.LittleEndian.AppendUint16(b, u)
		}
		return b
	}
	utf16be := func(s string, bom bool) []byte {
		var b []byte
		if bom {
			b = append(b, 0xFE, 0xFF)
		}
		for _, u := range utf16.Encode([]rune(s)) {
			b = binary.BigEndian.AppendUint16(b, u)
		}
		return b
	}
	utf32 := func(s string, order binary.AppendByteOrder, bom bool) []byte {
		var b []byte
		if bom {
			b = order.AppendUint32(b, 0xFEFF)
		}
		for _, r := range s {
			b = order.AppendUint32(b, uint32(r))
		}
		return b
	}
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
		{"UTF-16LE", utf16le(msg, false), true},
		{"UTF-16LE with BOM", utf16le(msg, true), true},
		{"UTF-16BE", utf16be(msg, false), true},
		{"UTF-16BE with BOM", utf16be(msg, true), true},
		{"UTF-16LE after a space", utf16le(" "+msg, false), true},
		{"UTF-32LE", utf32(msg, binary.LittleEndian, false), true},
		{"UTF-32LE with BOM", utf32(msg, binary.LittleEndian, true), true},
		{"UTF-32BE", utf32(msg, binary.BigEndian, false), true},
		{"UTF-32BE with BOM", utf32(msg, binary.BigEndian, true), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WideEncoding(tt.body); got != tt.want {
				t.Errorf("WideEncoding(% x...) = %v, want %v", tt.body[:min(len(tt.body), 8)], got, tt.want)
			}
		})
	}
}
