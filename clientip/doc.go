// Package clientip turns the client address Caddy reports into the key a
// per-client rate limit is counted under.
//
// [Parse] reads the value of Caddy's client_ip placeholder, in any of the
// shapes it takes (with or without a port, bracketed or not, with an IPv6
// zone), and normalizes it: the zone is dropped and an IPv4-mapped IPv6
// address becomes the IPv4 address it carries, so that one client has one
// address however it connected.
//
// [Key] then masks the address to a prefix. An IPv4 address usually stands
// for one host (/32, or shorter to group a NAT pool), but an IPv6 host is
// normally handed a whole /64, inside which it can pick a fresh address for
// every request. Keying IPv6 clients by full address would let one host mint
// 2^64 separate budgets; keying them by /64 (the default) gives that host one.
// Providers that delegate /56 or /48 to a customer call for shorter prefixes.
//
// [ValidPrefix] checks configured prefix lengths so that configuration errors
// surface with a message instead of a silent clamp.
package clientip
