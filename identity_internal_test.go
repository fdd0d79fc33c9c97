package mcplimit

import (
	"strings"
	"testing"
)

func TestCanonicalCredentials(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Bearer abc", "Bearer abc"},
		{"bearer abc", "Bearer abc"},
		{"BEARER abc", "Bearer abc"},
		{"bEaReR abc", "Bearer abc"},
		{"Bearer  abc", "Bearer abc"},
		{" Bearer abc ", "Bearer abc"},
		{"Bearer\tabc", "Bearer abc"},
		{"Bearer\u00a0abc", "Bearer abc"},
		{"Bearer AbC", "Bearer AbC"},                 // the token keeps its case
		{"Basic dXNlcjpwYXNz", "Basic dXNlcjpwYXNz"}, // so does base64
		{"abcDEF", "abcDEF"},                         // a lone token is not a scheme
		{" abcDEF ", "abcDEF"},                       // only trimmed
		{"Digest a=1,  b=2", "Digest a=1, b=2"},      // parameters: whitespace only
		{"", ""},
		{"   ", ""},
	}
	for _, tt := range tests {
		if got := canonicalCredentials(tt.in); got != tt.want {
			t.Errorf("canonicalCredentials(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// The fast path agrees with the slow one.
		if isCanonicalCredentials(tt.in) && tt.in != tt.want {
			t.Errorf("%q taken as canonical, but canonical is %q", tt.in, tt.want)
		}
		if got := canonicalCredentials(tt.want); got != tt.want {
			t.Errorf("not idempotent: %q -> %q", tt.want, got)
		}
	}
	if !isCanonicalCredentials("Bearer " + strings.Repeat("x", 40)) {
		t.Error("a canonical bearer value takes the slow path")
	}
}

// FuzzCanonicalCredentials checks that the fast path never keeps a value
// the slow path would change, and that canonical values are fixed points.
func FuzzCanonicalCredentials(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  abc", " x ", "Basic a\tb", "Bearer\u00a0abc", "BEARER", "a  b  c", "Bearer\x00abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields := strings.Fields(s)
		if len(fields) > 1 {
			fields[0] = capitalized(fields[0])
		}
		want := strings.Join(fields, " ")
		if got := canonicalCredentials(s); got != want {
			t.Fatalf("canonicalCredentials(%q) = %q, want %q", s, got, want)
		}
		if got := canonicalCredentials(want); got != want {
			t.Fatalf("not a fixed point: %q -> %q", want, got)
		}
	})
}
