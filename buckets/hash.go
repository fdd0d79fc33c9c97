package buckets

import (
	"encoding/binary"
	"net/netip"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/stripe"
)

// HashFingerprint hashes a 16-byte identity fingerprint for [New] and
// [NewGauge].
func HashFingerprint(fp [16]byte) uint64 {
	lo := binary.LittleEndian.Uint64(fp[:8])
	hi := binary.LittleEndian.Uint64(fp[8:])
	return stripe.Mix(lo ^ stripe.Mix(hi))
}

// HashPrefix hashes a client address prefix for [New] and [NewGauge]. All 128
// address bits count, so prefixes whose low bits are masked to zero, such as
// /64s, still spread.
func HashPrefix(p netip.Prefix) uint64 {
	a := p.Addr().As16()
	lo := binary.LittleEndian.Uint64(a[:8])
	hi := binary.LittleEndian.Uint64(a[8:])
	meta := uint64(p.Bits()+1) << 1
	if p.Addr().Is4() {
		meta |= 1
	}
	return stripe.Mix(lo ^ stripe.Mix(hi^stripe.Mix(meta)))
}
