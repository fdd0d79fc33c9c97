package mcplimit

import (
	"crypto/subtle"
	"encoding/hex"
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// fpCacheSlots is how many proven identities' fingerprints a zone keeps
// at hand; fpCacheMaxValue bounds the identity values it keeps, so that
// the cache holds at most about 4.5 MB whatever callers send. The bound
// admits a bearer JWT (commonly 700-1000 bytes), whose HMAC costs about
// twice the lookup.
const (
	fpCacheSlots    = 4096
	fpCacheMaxValue = 1024
)

// fpCache remembers the fingerprints of proven identities, so that their
// requests skip the HMAC. It is direct-mapped: a slot holds the last
// identity remembered there, found by a hash under a seed of this process.
// It lives in memory only, never in storage or logs, and a lookup compares
// the whole value, so a value finds only its own fingerprint. A
// fingerprinter owns one: a new key starts an empty cache.
type fpCache struct {
	seed  maphash.Seed
	slots [fpCacheSlots]atomic.Pointer[fpEntry]
}

// fpEntry is one remembered identity value and its fingerprint, also in
// hex, as quota keys spell it. An entry never changes once remembered.
type fpEntry struct {
	value string
	fp    [16]byte
	hex   [32]byte
}

func newFPCache() *fpCache {
	return &fpCache{seed: maphash.MakeSeed()}
}

// slot is where value is remembered.
func (c *fpCache) slot(value string) *atomic.Pointer[fpEntry] {
	return &c.slots[maphash.String(c.seed, value)%fpCacheSlots]
}

// lookup returns the entry remembered for value, or nil. The values are
// compared in constant time, so that timing tells nothing of a remembered
// credential to a caller sending guesses.
func (c *fpCache) lookup(value string) *fpEntry {
	e := c.slot(value).Load()
	if e == nil || len(e.value) != len(value) || subtle.ConstantTimeCompare([]byte(e.value), []byte(value)) != 1 {
		return nil
	}
	return e
}

// remember keeps fp as value's fingerprint, in place of whatever its slot
// held. The value is copied, so that a substring never holds a larger
// header in memory; values longer than fpCacheMaxValue are not kept.
func (c *fpCache) remember(value string, fp [16]byte) {
	if len(value) > fpCacheMaxValue {
		return
	}
	e := &fpEntry{value: strings.Clone(value), fp: fp}
	hex.Encode(e.hex[:], fp[:])
	c.slot(value).Store(e)
}
