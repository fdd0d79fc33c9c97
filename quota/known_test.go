package quota

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

func TestSaveKnown(t *testing.T) {
	now := time.Unix(10_000, 0)
	tests := []struct {
		rule    string
		stored  string // "" = absent
		adds    map[string]int64
		forgets map[string]int64
		ttl     time.Duration
		want    map[string]int64
	}{
		{
			rule: "absent store gets the adds",
			adds: map[string]int64{"aa": 9000, "bb": 9500},
			want: map[string]int64{"aa": 9000, "bb": 9500},
		},
		{
			rule:   "add keeps the later last use",
			stored: "aa 9000\nbb 9500\n",
			adds:   map[string]int64{"aa": 9100, "bb": 9400},
			want:   map[string]int64{"aa": 9100, "bb": 9500},
		},
		{
			rule:    "forget deletes an entry not used after the forget",
			stored:  "aa 9000\nbb 9500\n",
			forgets: map[string]int64{"aa": 9000, "bb": 9600},
			want:    map[string]int64{},
		},
		{
			rule:    "forget is ignored for an entry used after it",
			stored:  "aa 9000\n",
			forgets: map[string]int64{"aa": 8000, "zz": 9999},
			want:    map[string]int64{"aa": 9000},
		},
		{
			rule:    "an add is newer than the forgets of its call, even in the same second",
			stored:  "aa 9400\ncc 9500\n",
			adds:    map[string]int64{"aa": 9500, "bb": 9900},
			forgets: map[string]int64{"aa": 9500, "bb": 9500, "cc": 9500},
			want:    map[string]int64{"aa": 9500, "bb": 9900},
		},
		{
			rule:   "ttl drops entries last used before now-ttl",
			stored: "old 8999\nedge 9000\nnew 9999\n",
			ttl:    1000 * time.Second,
			want:   map[string]int64{"edge": 9000, "new": 9999},
		},
		{
			rule:   "zero ttl keeps everything",
			stored: "old 1\n",
			want:   map[string]int64{"old": 1},
		},
		{
			rule:   "an unsorted store with a key twice keeps its later use",
			stored: "bb 5\naa 9\nbb 7\n",
			adds:   map[string]int64{"cc": 3, "aa": 8},
			want:   map[string]int64{"aa": 9, "bb": 7, "cc": 3},
		},
		{
			rule:   "malformed lines and invalid adds are dropped",
			stored: "aa 9000\ngarbage\nbb notanumber\n",
			adds:   map[string]int64{"bad key": 9000, "": 1},
			want:   map[string]int64{"aa": 9000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			st := newFakeStorage()
			if tt.stored != "" {
				st.put(testPrefix+"/known", tt.stored)
			}
			c := newTestCounter(st, newFakeClock(now))
			if err := c.SaveKnown(t.Context(), entriesOf(tt.adds), millis(tt.forgets), tt.ttl, now); err != nil {
				t.Fatal(err)
			}
			if held := st.heldLocks(); len(held) != 0 {
				t.Errorf("locks held: %v", held)
			}
			loaded, err := c.LoadKnown(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, e := range loaded {
				got[e.Key] = e.Last / 1000
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("known = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKnownStorageErrors(t *testing.T) {
	tests := []struct {
		rule string
		op   string
		save bool // SaveKnown, else LoadKnown
	}{
		{"save: lock fails", "Lock", true},
		{"save: load fails", "Load", true},
		{"save: store fails", "Store", true},
		{"save: unlock fails", "Unlock", true},
		{"load: load fails", "Load", false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			st := newFakeStorage()
			c := newTestCounter(st, newFakeClock(t0))
			st.setFail(tt.op, errDown)
			var err error
			if tt.save {
				err = c.SaveKnown(t.Context(), []KnownEntry{{"aa", 1}}, nil, 0, t0)
			} else {
				_, err = c.LoadKnown(t.Context())
			}
			if !errors.Is(err, errDown) {
				t.Errorf("err = %v, want %v", err, errDown)
			}
			if held := st.heldLocks(); len(held) != 0 {
				t.Errorf("locks held: %v", held)
			}
		})
	}
}

func TestKnownWithoutStorage(t *testing.T) {
	c := New(Config{})
	if err := c.SaveKnown(t.Context(), []KnownEntry{{"aa", 1}}, nil, 0, t0); err != nil {
		t.Fatal(err)
	}
	if m, err := c.LoadKnown(t.Context()); err != nil || len(m) != 0 {
		t.Errorf("LoadKnown = %v, %v", m, err)
	}
}

func TestSaveKnownSkipsUnchangedStore(t *testing.T) {
	tests := []struct {
		rule    string
		adds    []KnownEntry
		forgets map[string]int64
	}{
		{"an older use", []KnownEntry{{"aa", 8_000_000}}, nil},
		{"a forget already stored", nil, map[string]int64{"zz": 100_000}},
		{"an older forget of a key stored as forgotten", nil, map[string]int64{"zz": 50_000}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			st := newFakeStorage()
			st.put(testPrefix+"/known", "!zz 100\naa 9000\n")
			c := newTestCounter(st, newFakeClock(t0))
			st.takeOps()
			if err := c.SaveKnown(t.Context(), tt.adds, tt.forgets, 0, t0); err != nil {
				t.Fatal(err)
			}
			if ops, _ := st.takeOps(); ops["Store"] != 0 || ops["Lock"] != 1 || ops["Unlock"] != 1 {
				t.Errorf("ops = %v, want no Store", ops)
			}
		})
	}
}

// entriesOf turns a test's map of adds, in seconds, into SaveKnown's
// slice, in milliseconds.
func entriesOf(m map[string]int64) []KnownEntry {
	var out []KnownEntry
	for k, v := range m {
		out = append(out, KnownEntry{k, v * 1000})
	}
	return out
}

// millis turns a test's map of forgets, in seconds, into milliseconds.
func millis(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = v * 1000
	}
	return out
}

// Last uses are kept to the millisecond, so a restart keeps their order
// within a second; a store of whole seconds (written by earlier versions)
// reads as it is.
func TestKnownKeepsMilliseconds(t *testing.T) {
	st := newFakeStorage()
	st.put(testPrefix+"/known", "!old 1700000000\nold 1699999999\nsec 1700000005\nbad 17.x\nbad2 17.\n")
	c := newTestCounter(st, newFakeClock(t0))
	adds := []KnownEntry{{"a", 1_700_000_010_001}, {"b", 1_700_000_010_020}, {"c", 1_700_000_010_300}, {"d", 1_700_000_011_000}}
	if err := c.SaveKnown(t.Context(), adds, map[string]int64{"gone": 1_700_000_009_999}, 0, t0); err != nil {
		t.Fatal(err)
	}
	data, _ := st.Load(t.Context(), testPrefix+"/known")
	if want := "!gone 1700000009.999\n!old 1700000000\na 1700000010.001\nb 1700000010.020\nc 1700000010.300\nd 1700000011\nsec 1700000005\n"; string(data) != want {
		t.Fatalf("stored %q, want %q", data, want)
	}
	loaded, err := c.LoadKnown(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range loaded {
		got[e.Key] = e.Last
	}
	want := map[string]int64{"a": 1_700_000_010_001, "b": 1_700_000_010_020, "c": 1_700_000_010_300, "d": 1_700_000_011_000, "sec": 1_700_000_005_000}
	if !maps.Equal(got, want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
}

func TestSaveKnownWritesSortedLines(t *testing.T) {
	st := newFakeStorage()
	st.put(testPrefix+"/known", "bb 5\naa 9\n")
	c := newTestCounter(st, newFakeClock(t0))
	if err := c.SaveKnown(t.Context(), []KnownEntry{{"cc", 3000}, {"ab", 1000}, {"cc", 4000}}, nil, 0, t0); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Load(t.Context(), testPrefix+"/known")
	if want := "aa 9\nab 1\nbb 5\ncc 4\n"; string(got) != want {
		t.Errorf("stored %q, want %q", got, want)
	}
}

// A forget is kept in the store: another instance that still holds the
// identity, last used before the forget, does not write it back; one
// proven again after the forget does. The forget goes once the ttl has
// passed.
func TestSavedForgetOutlivesOtherInstancesCopies(t *testing.T) {
	st := newFakeStorage()
	a, b := newTestCounter(st, newFakeClock(t0)), newTestCounter(st, newFakeClock(t0))
	forgetAt := t0.UnixMilli()
	if err := a.SaveKnown(t.Context(), []KnownEntry{{"xx", forgetAt - 100_000}, {"yy", forgetAt - 100_000}}, nil, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveKnown(t.Context(), []KnownEntry{{"yy", forgetAt - 100_000}}, map[string]int64{"xx": forgetAt}, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	// b last saw xx before the forget, and saves its own set.
	if err := b.SaveKnown(t.Context(), []KnownEntry{{"xx", forgetAt - 10_000}, {"yy", forgetAt - 10_000}}, nil, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	got, err := a.LoadKnown(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Key != "yy" {
		t.Fatalf("known after another instance's save: %v, want only yy (xx was forgotten)", got)
	}
	// Proven again after the forget, on b: it is known again.
	if err := b.SaveKnown(t.Context(), []KnownEntry{{"xx", forgetAt + 5000}}, nil, time.Hour, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.LoadKnown(t.Context()); len(got) != 2 {
		t.Fatalf("known after a proof following the forget: %v, want xx and yy", got)
	}
	// Past the ttl, and forgetsKeptAtLeast, the forget goes.
	if err := b.SaveKnown(t.Context(), nil, nil, time.Hour, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if data, _ := st.Load(t.Context(), testPrefix+"/known"); !strings.Contains(string(data), "!xx") {
		t.Fatalf("a forget within forgetsKeptAtLeast is gone: %q", data)
	}
	if err := b.SaveKnown(t.Context(), nil, nil, time.Hour, t0.Add(forgetsKeptAtLeast+time.Minute)); err != nil {
		t.Fatal(err)
	}
	if data, _ := st.Load(t.Context(), testPrefix+"/known"); strings.Contains(string(data), "!xx") {
		t.Fatalf("a forget older than the ttl and forgetsKeptAtLeast is still stored: %q", data)
	}
}

// A forget saved by an instance with a short ttl outlives the copy of an
// instance whose ttl is longer (a rolling change of known_ttl): that
// one's save, after the short ttl has passed, does not write the
// identity, last used before the forget, back.
func TestForgetOutlivesTheCopyOfAnInstanceWithALongerTTL(t *testing.T) {
	st := newFakeStorage()
	a, b := newTestCounter(st, newFakeClock(t0)), newTestCounter(st, newFakeClock(t0))
	at := t0.UnixMilli()
	if err := a.SaveKnown(t.Context(), nil, map[string]int64{"xx": at}, 10*time.Second, t0); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(20 * time.Second)
	if err := a.SaveKnown(t.Context(), []KnownEntry{{"yy", later.UnixMilli()}}, nil, 10*time.Second, later); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveKnown(t.Context(), []KnownEntry{{"xx", at - 1500}}, nil, time.Minute, later); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.LoadKnown(t.Context()); len(got) != 1 || got[0].Key != "yy" {
		t.Fatalf("known %v, want only yy: xx was forgotten after its last use", got)
	}
}

// A caller's own older forget does not shield its entry from a newer
// forget another instance stored: the entry, used before that forget,
// goes.
func TestStoredForgetBeatsACallersOlderOne(t *testing.T) {
	st := newFakeStorage()
	a, b := newTestCounter(st, newFakeClock(t0)), newTestCounter(st, newFakeClock(t0))
	at := t0.UnixMilli()
	if err := a.SaveKnown(t.Context(), nil, map[string]int64{"xx": at}, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	// b forgot xx at at-200, proved it again at at-100, and saves now.
	if err := b.SaveKnown(t.Context(), []KnownEntry{{"xx", at - 100_000}}, map[string]int64{"xx": at - 200_000}, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.LoadKnown(t.Context()); len(got) != 0 {
		t.Fatalf("known %v, want none: xx was last used before a's forget", got)
	}
	if data, _ := st.Load(t.Context(), testPrefix+"/known"); strings.Contains("\n"+string(data), "\nxx ") {
		t.Fatalf("stored %q: the copy used before the forget was written back", data)
	}
	// A file holding both (written by a version that kept them) loads
	// without the entry too.
	st.put(testPrefix+"/known", "!xx 100\nxx 90\nyy 90\n")
	if got, _ := a.LoadKnown(t.Context()); len(got) != 1 || got[0].Key != "yy" {
		t.Fatalf("known %v, want only yy", got)
	}
}

// SaveKnown deletes every stored entry of forgets whose last use is not
// after the forget time, one used in the forget's very millisecond
// included: the store keeps the forget alone.
func TestSaveKnownDeletesAnEntryUsedAtTheForgetTime(t *testing.T) {
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0))
	if err := c.SaveKnown(t.Context(), []KnownEntry{{"aa", 5000}}, nil, 0, t0); err != nil {
		t.Fatal(err)
	}
	if err := c.SaveKnown(t.Context(), nil, map[string]int64{"aa": 5000}, 0, t0); err != nil {
		t.Fatal(err)
	}
	if got, want := st.raw(testPrefix+"/known"), "!aa 5\n"; got != want {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// A forget is stored so that a restart never loads it back as proven:
// an entry stored beside a forget of its own last use loads as
// forgotten.
func TestLoadKnownDropsAnEntryUsedAtItsForgetTime(t *testing.T) {
	st := newFakeStorage()
	st.put(testPrefix+"/known", "!aa 5\naa 5\n")
	c := newTestCounter(st, newFakeClock(t0))
	if got, err := c.LoadKnown(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("LoadKnown = %v, %v; want nothing: aa was forgotten at its last use", got, err)
	}
}
