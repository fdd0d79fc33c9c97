package clientip

import (
	"fmt"
	"net/netip"
	"strings"
)

// Parse parses a client address as Caddy's client_ip placeholder gives it:
// "1.2.3.4", "1.2.3.4:5678", "::1", "[::1]", "[::1]:80" or "fe80::1%eth0".
// The zone is dropped and an IPv4-mapped IPv6 address ("::ffff:1.2.3.4") is
// returned as the IPv4 address. Anything else is an error. Parse does not
// allocate unless it fails.
func Parse(s string) (netip.Addr, error) {
	addr, err := parse(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("clientip: invalid client address %q", s)
	}
	return addr.WithZone("").Unmap(), nil
}

// parse picks the one parser that fits the shape of s, so that a valid address
// never goes through a failed attempt (whose error would allocate).
func parse(s string) (netip.Addr, error) {
	switch {
	case strings.HasPrefix(s, "["): // "[v6]" or "[v6]:port"
		if inner, ok := strings.CutSuffix(s[1:], "]"); ok {
			return netip.ParseAddr(inner)
		}
	case strings.Count(s, ":") != 1: // "v4" or "v6": IPv6 has two colons or more
		return netip.ParseAddr(s)
	}
	ap, err := netip.ParseAddrPort(s) // "v4:port" or "[v6]:port"
	return ap.Addr(), err
}
