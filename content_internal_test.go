package mcplimit

import "testing"

func TestForeignCharset(t *testing.T) {
	tests := []struct {
		cts     []string
		charset string
		foreign bool
	}{
		{nil, "", false},
		{[]string{"application/json"}, "", false},
		{[]string{"application/json;"}, "", false},
		{[]string{"APPLICATION/JSON; CHARSET=UTF-8"}, "", false},
		{[]string{`application/json; charset="utf-8"`}, "", false},
		{[]string{"application/json;charset=utf8"}, "", false},
		{[]string{"text/plain; charset=us-ascii"}, "us-ascii", true},
		{[]string{"application/json; charset=utf-7"}, "utf-7", true},
		{[]string{"application/json; charset = utf-16"}, "utf-16", true},
		{[]string{`application/json; charset=""`}, "", true},
		// A charset hidden in a quoted parameter before the real one.
		{[]string{`application/json; x="a;charset=utf-8"; charset=utf-7`}, "utf-7", true},
		// Duplicates: some parsers take the first, others the last.
		{[]string{"application/json; charset=utf-8; charset=utf-7"}, "utf-7", true},
		{[]string{"application/json; charset=utf-7; charset=utf-8"}, "utf-7", true},
		// Extended notation, and a second Content-Type field.
		{[]string{"application/json; charset*=utf-7''"}, "utf-7", true},
		// RFC 2231: the value follows the second quote, %-encoded; a
		// parameter may be continued (charset*0=).
		{[]string{"application/json; charset*=UTF-8''utf-16"}, "utf-16", true},
		{[]string{"application/json; charset*=utf-8''utf%2D7"}, "utf-7", true},
		{[]string{"application/json; charset*0=utf-16"}, "utf-16", true},
		{[]string{"application/json; charset*0*=utf-8''latin1"}, "latin1", true},
		{[]string{"application/json; charset*=UTF-8''utf-8"}, "", false},
		{[]string{"application/json; charset*=utf-8'en'UTF-8"}, "", false},
		{[]string{"application/json", "application/json; charset=latin1"}, "latin1", true},
	}
	for _, tt := range tests {
		if got, foreign := foreignCharset(tt.cts); got != tt.charset || foreign != tt.foreign {
			t.Errorf("foreignCharset(%q) = %q, %v; want %q, %v", tt.cts, got, foreign, tt.charset, tt.foreign)
		}
	}
}

func TestBodyEncoding(t *testing.T) {
	tests := []struct {
		values  []string
		coding  string
		encoded bool
	}{
		{nil, "", false},
		{[]string{""}, "", false},
		{[]string{"identity"}, "", false},
		{[]string{"IDENTITY"}, "", false},
		{[]string{"gzip"}, "gzip", true},
		{[]string{"identity, gzip"}, "gzip", true},
		{[]string{"", "gzip"}, "gzip", true},
		{[]string{"identity", "br"}, "br", true},
	}
	for _, tt := range tests {
		if got, encoded := bodyEncoding(tt.values); got != tt.coding || encoded != tt.encoded {
			t.Errorf("bodyEncoding(%q) = %q, %v; want %q, %v", tt.values, got, encoded, tt.coding, tt.encoded)
		}
	}
}
