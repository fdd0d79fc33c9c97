package known

import (
	"sync"
	"sync/atomic"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/stripe"
)

// none is the null entry index.
const none = -1

// shard holds the entries of the keys that hash to it, in a slice linked into
// a doubly linked list from most (head) to least (tail) recently used.
// Indexes instead of pointers keep the list free of allocations per entry and
// the map's values free of pointers.
type shard[K comparable] struct {
	mu      sync.Mutex
	index   map[K]int32
	entries []entry[K]
	free    int32         // first unused entry, chained through next
	head    int32         // most recently used
	tail    int32         // least recently used
	count   *atomic.Int64 // the Set's number of entries
	clock   stripe.Clock
	_       [64]byte // keeps neighbouring shards off each other's cache line
}

type entry[K comparable] struct {
	key        K
	last       int64 // last use, in ns since the shard's epoch
	prev, next int32
}

func (sh *shard[K]) init(count *atomic.Int64) {
	sh.index = make(map[K]int32)
	sh.count = count
	sh.free, sh.head, sh.tail = none, none, none
}

// add stores key, last used at last, right after entry at (or at the head
// when at is none), and returns its index.
func (sh *shard[K]) add(key K, last int64, at int32) int32 {
	i := sh.free
	if i != none {
		sh.free = sh.entries[i].next
	} else {
		i = int32(len(sh.entries))
		sh.entries = append(sh.entries, entry[K]{})
	}
	sh.entries[i] = entry[K]{key: key, last: last}
	sh.index[key] = i
	sh.count.Add(1)
	sh.link(i, at)
	return i
}

// remove drops entry i.
func (sh *shard[K]) remove(i int32) {
	e := &sh.entries[i]
	delete(sh.index, e.key)
	sh.count.Add(-1)
	sh.unlink(i)
	*e = entry[K]{next: sh.free} // zero the key: it may hold pointers
	sh.free = i
}

// touch records a use of entry i at at and makes it the most recent.
func (sh *shard[K]) touch(i int32, at int64) {
	e := &sh.entries[i]
	e.last = max(e.last, at)
	if sh.head != i {
		sh.unlink(i)
		sh.link(i, none)
	}
}

// link inserts the unlinked entry i after entry at, or at the head when at is
// none.
func (sh *shard[K]) link(i, at int32) {
	e := &sh.entries[i]
	e.prev = at
	if at == none {
		e.next, sh.head = sh.head, i
	} else {
		e.next, sh.entries[at].next = sh.entries[at].next, i
	}
	if e.next == none {
		sh.tail = i
	} else {
		sh.entries[e.next].prev = i
	}
}

func (sh *shard[K]) unlink(i int32) {
	e := &sh.entries[i]
	if e.prev == none {
		sh.head = e.next
	} else {
		sh.entries[e.prev].next = e.next
	}
	if e.next == none {
		sh.tail = e.prev
	} else {
		sh.entries[e.next].prev = e.prev
	}
	e.prev, e.next = none, none
}

// compact rebuilds the entries slice and the map at their live size, to give
// back the memory of a larger past (Go maps never shrink on their own).
func (sh *shard[K]) compact() {
	entries := make([]entry[K], 0, len(sh.index))
	index := make(map[K]int32, len(sh.index))
	for i := sh.head; i != none; i = sh.entries[i].next {
		e := sh.entries[i]
		n := int32(len(entries))
		index[e.key] = n
		entries = append(entries, entry[K]{key: e.key, last: e.last, prev: n - 1, next: n + 1})
	}
	sh.head, sh.tail, sh.free = none, none, none
	if n := int32(len(entries)); n > 0 {
		entries[n-1].next = none
		sh.head, sh.tail = 0, n-1
	}
	sh.entries, sh.index = entries, index
}
