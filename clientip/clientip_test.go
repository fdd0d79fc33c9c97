package clientip

import (
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means an error
	}{
		{"a bare IPv4 address parses", "1.2.3.4", "1.2.3.4"},
		{"an IPv4 address with a port parses without it", "1.2.3.4:5678", "1.2.3.4"},
		{"a bare IPv6 address parses", "::1", "::1"},
		{"a bracketed IPv6 address parses", "[::1]", "::1"},
		{"a bracketed IPv6 address with a port parses without it", "[2001:db8::1]:80", "2001:db8::1"},
		{"an IPv6 zone is dropped", "fe80::1%eth0", "fe80::1"},
		{"an IPv6 zone is dropped behind brackets and a port", "[fe80::1%eth0]:443", "fe80::1"},
		{"an IPv4-mapped IPv6 address becomes IPv4", "::ffff:1.2.3.4", "1.2.3.4"},
		{"an IPv4-mapped IPv6 address with a port becomes IPv4", "[::ffff:1.2.3.4]:8080", "1.2.3.4"},
		{"the empty string is an error", "", ""},
		{"a host name is an error", "example.com", ""},
		{"a host name with a port is an error", "example.com:80", ""},
		{"an out-of-range octet is an error", "1.2.3.256", ""},
		{"a missing port is an error", "1.2.3.4:", ""},
		{"an unbracketed IPv6 address with a port is an error", "::1:80:", ""},
		{"a zone on IPv4 is an error", "1.2.3.4%eth0", ""},
		{"surrounding spaces are an error", " 1.2.3.4", ""},
		{"an unclosed bracket is an error", "[::1", ""},
		{"a prefix is an error", "10.0.0.0/8", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(tt.want) {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		name           string
		a, b           string
		v4bits, v6bits int
		same           bool
		wantA          string
	}{
		{"two addresses in one /64 share a key", "2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", 0, 0, true, "2001:db8:1:2::/64"},
		{"addresses in different /64s have different keys", "2001:db8:1:2::1", "2001:db8:1:3::1", 0, 0, false, "2001:db8:1:2::/64"},
		{"a /56 configuration groups /64s of one /56", "2001:db8:1:2::1", "2001:db8:1:ff::1", 0, 56, true, "2001:db8:1::/56"},
		{"a /56 configuration separates /56s", "2001:db8:1:2::1", "2001:db8:1:100::1", 0, 56, false, "2001:db8:1::/56"},
		{"a /128 configuration keys each IPv6 address", "2001:db8::1", "2001:db8::2", 0, 128, false, "2001:db8::1/128"},
		{"each IPv4 address has its own key by default", "1.2.3.4", "1.2.3.5", 0, 0, false, "1.2.3.4/32"},
		{"a /24 configuration groups an IPv4 subnet", "1.2.3.4", "1.2.3.200", 24, 0, true, "1.2.3.0/24"},
		{"the IPv6 prefix does not apply to IPv4", "1.2.3.4", "1.2.3.5", 0, 8, false, "1.2.3.4/32"},
		{"a mapped IPv4 address shares the IPv4 key", "::ffff:1.2.3.4", "1.2.3.4", 0, 0, true, "1.2.3.4/32"},
		{"an IPv4 address and its mapped form never fall under the IPv6 prefix", "::ffff:1.2.3.4", "::ffff:1.2.3.5", 0, 64, false, "1.2.3.4/32"},
		{"zones do not split a key", "fe80::1%eth0", "fe80::1%eth1", 0, 0, true, "fe80::/64"},
		{"lengths beyond the family select the full address", "1.2.3.4", "1.2.3.5", 99, 0, false, "1.2.3.4/32"},
		{"negative lengths select the default", "2001:db8::1", "2001:db8::2", -1, -1, true, "2001:db8::/64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka := Key(netip.MustParseAddr(tt.a), tt.v4bits, tt.v6bits)
			kb := Key(netip.MustParseAddr(tt.b), tt.v4bits, tt.v6bits)
			if (ka == kb) != tt.same {
				t.Fatalf("Key(%s) = %v, Key(%s) = %v; same = %v, want %v", tt.a, ka, tt.b, kb, ka == kb, tt.same)
			}
			if want := netip.MustParsePrefix(tt.wantA); ka != want {
				t.Fatalf("Key(%s) = %v, want %v", tt.a, ka, want)
			}
		})
	}
	if got := Key(netip.Addr{}, 0, 0); got != (netip.Prefix{}) {
		t.Errorf("Key(zero Addr) = %v, want the zero Prefix", got)
	}
}

func TestValidPrefix(t *testing.T) {
	tests := []struct {
		name string
		bits int
		ipv6 bool
		want bool
	}{
		{"0 (the default) is valid for IPv4", 0, false, true},
		{"32 is valid for IPv4", 32, false, true},
		{"33 is out of range for IPv4", 33, false, false},
		{"negative lengths are out of range", -1, false, false},
		{"0 (the default) is valid for IPv6", 0, true, true},
		{"56 is valid for IPv6", 56, true, true},
		{"128 is valid for IPv6", 128, true, true},
		{"129 is out of range for IPv6", 129, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidPrefix(tt.bits, tt.ipv6); got != tt.want {
				t.Fatalf("ValidPrefix(%d, ipv6=%v) = %v, want %v", tt.bits, tt.ipv6, got, tt.want)
			}
		})
	}
}

func BenchmarkParseAndKey(b *testing.B) {
	for _, in := range []string{"203.0.113.7", "[2001:db8:1:2::1]:443"} {
		b.Run(in, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				addr, _ := Parse(in)
				Key(addr, 0, 0)
			}
		})
	}
}

func TestParseAndKeyDoNotAllocate(t *testing.T) {
	for _, in := range []string{"203.0.113.7", "203.0.113.7:443", "2001:db8::1", "[2001:db8::1]:443", "::ffff:1.2.3.4"} {
		t.Run("parsing and keying "+in+" does not allocate", func(t *testing.T) {
			allocs := testing.AllocsPerRun(1000, func() {
				addr, err := Parse(in)
				if err != nil {
					t.Fatal(err)
				}
				Key(addr, 0, 0)
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per call, want 0", allocs)
			}
		})
	}
}
