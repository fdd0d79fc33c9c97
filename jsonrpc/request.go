package jsonrpc

import (
	"math"
	"sync"
)

// Request is the inspection result of one HTTP body: the messages (entries)
// it holds and every reading of their method, params.name, params.arguments
// and id members.
//
// A Request is meant to be reused: take one from GetRequest and return it
// with PutRequest, or call Reset (Parse resets too). It must not be copied
// or shared between goroutines while in use.
//
// Memory stays proportional to what matters, whatever the body: only
// entries with a reading or an id get a record (a few dozen bytes), so a
// batch of a million empty objects costs a bit each.
type Request struct {
	s       scanner
	body    []byte
	kind    uint8
	valid   bool
	count   int      // entries scanned
	objects int      // entries that are objects
	objBits []uint64 // bit i: entry i is an object
	entries []Entry  // records of the entries with readings or an id, in order
	blank   [2]Entry // what Entry returns for others: [0] non-object, [1] object
	methods []text   // method readings of all records, record by record
	tools   []text   // params.name readings
	args    []span   // params.arguments objects, as byte ranges of body
	arena   []byte   // decoded strings that had escapes or invalid UTF-8
	scratch []byte   // temporary decoded keys
	// readings are the readings of an invalid body after the first, in
	// order (see Parse); copies hold the copies of the body they scan.
	readings []reading
	copies   [3][]byte
	// alt holds the readings of an invalid body by other parsers (see
	// Parse): as hjson-js and as hjson-go read it, and as a form, each
	// parsed from the JSON in its altText; their altCount entries
	// follow r's own.
	alt      [3]*Request
	altText  [3][]byte
	altCount int
}

// reading is one reading of an invalid body after the first: what it
// scanned (the body, or a copy of it with comments blanked out), whether
// '...' were strings, and where its records and its finds in r.args
// start: the index of its first record in r.entries and of its first
// arguments object.
type reading struct {
	b       []byte
	single  bool
	entries int
	args    int
}

// Top-level value kinds.
const (
	kindNone   = iota // nothing parsed
	kindObject        // a single message
	kindArray         // a batch
	kindOther         // a string, number or literal
)

// maxBody bounds the bodies Parse scans, so that offsets fit in int32.
// Larger ones are invalid, and cost 1.
const maxBody = math.MaxInt32

// span is a byte range of the body, or an index range of a reading list.
type span struct{ lo, hi int32 }

// text is a string reading: a byte range of the body, or of the arena when
// the string had to be decoded.
type text struct {
	lo, hi  int
	decoded bool
}

// Bounds on what a pooled Request keeps between uses, so that one huge
// body does not pin memory forever.
const (
	keepBytes   = 64 << 10
	keepEntries = 1024
	keepWords   = 1024 // of objBits and of the depth stack: 65536 levels
)

var requestPool = sync.Pool{New: func() any { return new(Request) }}

// GetRequest returns an empty Request from a pool.
func GetRequest() *Request {
	return requestPool.Get().(*Request)
}

// PutRequest resets r and returns it to the pool. Neither r nor anything
// obtained from it may be used afterwards.
func PutRequest(r *Request) {
	if r == nil {
		return
	}
	r.Trim()
	requestPool.Put(r)
}

// Trim resets r and drops the buffers an unusually large body grew, so
// that a Request kept for reuse holds no more than a pooled one.
func (r *Request) Trim() {
	r.Reset()
	if cap(r.arena) > keepBytes {
		r.arena = nil
	}
	if cap(r.scratch) > keepBytes {
		r.scratch = nil
	}
	for i := range r.copies {
		if cap(r.copies[i]) > keepBytes {
			r.copies[i] = nil
		}
	}
	for i, h := range r.alt {
		if cap(r.altText[i]) > keepBytes {
			r.altText[i] = nil
		}
		if h != nil {
			h.Trim()
		}
	}
	if cap(r.entries) > keepEntries {
		r.entries = nil
	}
	if cap(r.methods) > keepEntries || cap(r.tools) > keepEntries || cap(r.args) > keepEntries {
		r.methods, r.tools, r.args = nil, nil, nil
	}
	if cap(r.objBits) > keepWords {
		r.objBits = nil
	}
	if cap(r.s.stack) > keepWords {
		r.s.stack = nil
	}
}

// Reset forgets the last parse, including the reference to its body.
// Entries, IDs and strings obtained before must not be used afterwards.
func (r *Request) Reset() {
	r.s.depth, r.s.soft, r.s.single = 0, false, false
	r.body = nil
	r.kind = kindNone
	r.valid = false
	r.count, r.objects = 0, 0
	r.objBits = r.objBits[:0]
	clear(r.entries) // drop the back pointers
	r.entries = r.entries[:0]
	r.methods = r.methods[:0]
	r.tools = r.tools[:0]
	r.args = r.args[:0]
	r.arena = r.arena[:0]
	clear(r.readings) // drop the references to the body
	r.readings = r.readings[:0]
	if r.altCount > 0 {
		for _, h := range r.alt {
			if h != nil {
				h.Reset()
			}
		}
	}
	r.altCount = 0
}

// beginEntry counts a new entry and, for an object, opens its record,
// whose readings start at the current ends of the reading lists.
func (r *Request) beginEntry(object bool) {
	idx := r.count
	r.count++
	w := idx >> 6
	for len(r.objBits) <= w {
		r.objBits = append(r.objBits, 0)
	}
	if !object {
		return
	}
	r.objects++
	r.objBits[w] |= 1 << (idx & 63)
	r.entries = append(r.entries, Entry{
		r:       r,
		object:  true,
		index:   int32(idx),
		methods: span{lo: int32(len(r.methods))},
		tools:   span{lo: int32(len(r.tools))},
		args:    span{lo: int32(len(r.args))},
	})
}

// endEntry closes the record opened last: its readings end at the current
// ends of the lists. A record without readings or id is dropped; Entry
// returns a shared blank one instead.
func (r *Request) endEntry() {
	e := &r.entries[len(r.entries)-1]
	e.methods.hi, e.tools.hi, e.args.hi = int32(len(r.methods)), int32(len(r.tools)), int32(len(r.args))
	if !e.hasID && e.methods.lo == e.methods.hi && e.tools.lo == e.tools.hi && e.args.lo == e.args.hi {
		*e = Entry{}
		r.entries = r.entries[:len(r.entries)-1]
	}
}

// Valid reports whether the body is syntactically valid JSON, after an
// optional UTF-8 byte order mark, with nesting at most MaxDepth.
func (r *Request) Valid() bool { return r.valid }

// Batch reports whether the body is valid and its top-level value is an
// array (a JSON-RPC batch).
func (r *Request) Batch() bool { return r.valid && r.kind == kindArray }

// Len returns the number of entries: 1 for a valid body that is an object,
// the number of elements for a valid array, and 0 otherwise.
func (r *Request) Len() int {
	if !r.valid {
		return 0
	}
	return r.count
}

// Scanned returns the number of entries scanned, whether the body is valid
// or not: for an invalid body, the entries of every value Parse could scan,
// which a lenient or streaming parser may still run, in every reading of
// it. Entry accepts 0 <= i < Scanned().
func (r *Request) Scanned() int { return r.count + r.altCount }

// Largest returns the number of JSON-RPC messages (requests,
// notifications and responses) of the reading of the body that holds the
// most: as many as a backend may run, which a bound on batch sizes bounds.
// Other entries, such as the elements of a REST body's array, are none.
// It is at most Scanned.
func (r *Request) Largest() int {
	if r.oneReading() {
		return messages(r.entries)
	}
	return int(r.mostOver(func(records []Entry) int64 { return int64(messages(records)) }))
}

// messages returns how many of the entries whose records are records are
// JSON-RPC messages.
func messages(records []Entry) int {
	n := 0
	for i := range records {
		if records[i].message() {
			n++
		}
	}
	return n
}

// oneReading reports whether the body was read one way only, as every
// valid body is.
func (r *Request) oneReading() bool { return len(r.readings) == 0 && r.altCount == 0 }

// mostOver returns the most f gives over the readings of the body, each
// given as the records of its entries: the first reading, each further
// one (see Parse) and the readings by other parsers (r.alt).
func (r *Request) mostOver(f func(records []Entry) int64) int64 {
	var most int64
	for _, h := range r.alt {
		if altRead(h) {
			most = max(most, f(h.entries))
		}
	}
	entries := 0
	for _, rd := range r.readings {
		most = max(most, f(r.entries[entries:rd.entries]))
		entries = rd.entries
	}
	return max(most, f(r.entries[entries:]))
}

// altRead reports whether h is another parser's reading of this body holding
// entries: a Request that read none, or none since the last Reset, holds
// none.
func altRead(h *Request) bool { return h != nil && h.count > 0 }

// Entry returns entry i, 0 <= i < Scanned(). It is valid until the next
// Reset. Entries without any reading (such as non-objects) may share a
// pointer.
func (r *Request) Entry(i int) *Entry {
	if uint(i) >= uint(r.count) {
		if i >= r.count && i-r.count < r.altCount {
			i -= r.count
			for _, h := range r.alt {
				if !altRead(h) {
					continue
				}
				if i < h.count {
					return h.Entry(i)
				}
				i -= h.count
			}
		}
		panic("jsonrpc: Entry index out of range")
	}
	if len(r.entries) == r.count {
		return &r.entries[i]
	}
	// Binary search for the record of entry i.
	lo, hi := 0, len(r.entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(r.entries[m].index) < i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(r.entries) && int(r.entries[lo].index) == i {
		return &r.entries[lo]
	}
	if r.objBits[i>>6]&(1<<(i&63)) != 0 {
		return &r.blank[1]
	}
	return &r.blank[0]
}

// bytes returns the contents of a string reading.
func (r *Request) bytes(t text) []byte {
	if t.decoded {
		return r.arena[t.lo:t.hi]
	}
	return r.body[t.lo:t.hi]
}
