package mcplimit

import "testing"

// Tool names make quota keys that round-trip and hold no space or newline,
// which would end the key of a stored quota line.
func TestToolQuotaKeysEscapeTheName(t *testing.T) {
	d := &decision{}
	fp := [16]byte{1, 2, 3}
	for _, name := range []string{"echo", "photo tool", "50% off", "two\nlines", "a/b", "%20", "café"} {
		key := d.quotaKey("t/", []byte(name), fp)
		for _, c := range key {
			if c == ' ' || c == '\n' {
				t.Fatalf("key %q of tool %q holds a space or newline", key, name)
			}
		}
		if got := toolOfKey(key); got != name {
			t.Fatalf("toolOfKey(%q) = %q, want %q", key, got, name)
		}
	}
	if key := string(d.quotaKey("t/", []byte("echo"), fp)); key != "t/echo/01020300000000000000000000000000" {
		t.Fatalf("a plain tool name changed its key: %q", key)
	}
}
