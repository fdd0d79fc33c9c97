package clientip

import "testing"

// A negative length is out of range for IPv6 as for IPv4: configuration
// checked with ValidPrefix rejects it rather than taking the default.
func TestValidPrefixRejectsANegativeIPv6Length(t *testing.T) {
	if ValidPrefix(-1, true) {
		t.Error("ValidPrefix(-1, ipv6=true) = true, want false")
	}
}
