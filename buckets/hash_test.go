package buckets

import (
	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/stripe"
	"net/netip"
	"testing"
)

func TestHashesSpreadOverShards(t *testing.T) {
	const keys = 6400
	tests := []struct {
		name string
		hash func(i int) uint64
	}{
		{"fingerprints spread over every shard", func(i int) uint64 { return HashFingerprint(fp(i)) }},
		{"/64 prefixes, whose low 64 bits are zero, spread over every shard", func(i int) uint64 {
			a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(i >> 8), byte(i)}
			return HashPrefix(netip.PrefixFrom(netip.AddrFrom16(a), 64))
		}},
		{"IPv4 /32s spread over every shard", func(i int) uint64 {
			return HashPrefix(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32))
		}},
		{"a weak hash is mixed by the Set", func(i int) uint64 { return uint64(i) << 40 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(1<<20, func(i int) uint64 { return tt.hash(i) })
			seen := make(map[int]int)
			for i := range keys {
				seen[s.shardIndex(i)]++
			}
			if len(seen) != stripe.Max {
				t.Fatalf("%d keys landed in %d of %d shards", keys, len(seen), stripe.Max)
			}
		})
	}
}

func TestHashPrefixTellsFamiliesAndLengthsApart(t *testing.T) {
	tests := []struct {
		name string
		a, b netip.Prefix
	}{
		{"an IPv4 prefix and its mapped IPv6 form hash apart",
			netip.MustParsePrefix("1.2.3.4/32"), netip.PrefixFrom(netip.MustParseAddr("::ffff:1.2.3.4"), 32)},
		{"one address under two lengths hashes apart",
			netip.MustParsePrefix("2001:db8::/56"), netip.MustParsePrefix("2001:db8::/64")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if HashPrefix(tt.a) == HashPrefix(tt.b) {
				t.Fatalf("HashPrefix(%v) == HashPrefix(%v)", tt.a, tt.b)
			}
		})
	}
}
