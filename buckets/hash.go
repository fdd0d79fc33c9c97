package buckets

import (
	"encoding/binary"
	"net/netip"
)

// HashFingerprint hashes a 16-byte identity fingerprint for [New] and
// [NewGauge].
func HashFingerprint(fp [16]byte) uint64 {
	lo := binary.LittleEndian.Uint64(fp[:8])
	hi := binary.LittleEndian.Uint64(fp[8:])
	return mix(lo ^ mix(hi))
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
	return mix(lo ^ mix(hi^mix(meta)))
}

// mix is the 64-bit finalizer of MurmurHash3: every input bit affects every
// output bit, so the top bits make a good shard index even for weak hashes.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
