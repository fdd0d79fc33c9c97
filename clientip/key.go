package clientip

import "net/netip"

// Default prefix lengths for [Key].
const (
	DefaultV4Bits = 32 // one key per IPv4 address
	DefaultV6Bits = 64 // one key per IPv6 /64, what a single host is usually given
)

// Key masks addr to the prefix a client is counted under: IPv4 addresses to
// v4bits, IPv6 addresses to v6bits. A length of 0 (or less) selects the
// default, [DefaultV4Bits] or [DefaultV6Bits], and one beyond the family's
// address length selects the full address; check configuration with
// [ValidPrefix] first. The zone is dropped and an IPv4-mapped address is keyed
// as IPv4. The zero Addr gives the zero Prefix.
func Key(addr netip.Addr, v4bits, v6bits int) netip.Prefix {
	addr = addr.WithZone("").Unmap()
	bits := clamp(v6bits, DefaultV6Bits, 128)
	if addr.Is4() {
		bits = clamp(v4bits, DefaultV4Bits, 32)
	}
	p, _ := addr.Prefix(bits) // cannot fail: bits is in range
	return p
}

// ValidPrefix reports whether bits is a prefix length for the family:
// 0 to 32 for IPv4, 0 to 128 for IPv6 (0 meaning the default, for Key).
func ValidPrefix(bits int, ipv6 bool) bool {
	if ipv6 {
		return 0 <= bits && bits <= 128
	}
	return 0 <= bits && bits <= 32
}

func clamp(bits, def, most int) int {
	if bits <= 0 {
		return def
	}
	return min(bits, most)
}
