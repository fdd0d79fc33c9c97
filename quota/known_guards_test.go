package quota

import (
	"strings"
	"testing"
	"time"
)

// A line with no key before its space, or with a fraction longer than
// nanoseconds, is malformed: LoadKnown skips it.
func TestLoadKnownSkipsALineWithoutKeyOrWithALongFraction(t *testing.T) {
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0), Day)
	st.put(testPrefix+"/known", " 1700000000\nbb 1700000000.1234567891\naa 1700000000.5\n")
	got, err := c.LoadKnown(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (KnownEntry{"aa", 1_700_000_000_500}) {
		t.Errorf("LoadKnown = %+v, want only aa", got)
	}
}

// An entry last used at the very time of a stored forget is dropped from
// the store by a save, not written back under its forget.
func TestSaveKnownDropsAnEntryUsedAtAStoredForgetsTime(t *testing.T) {
	st := newFakeStorage()
	c := newTestCounter(st, newFakeClock(t0), Day)
	st.put(testPrefix+"/known", "!aa 1700000000\naa 1700000000\nbb 1700000000\n")
	if err := c.SaveKnown(t.Context(), []KnownEntry{{"aa", 1_700_000_000_000}, {"cc", 1}}, nil, 0, t0); err != nil {
		t.Fatal(err)
	}
	raw := st.raw(testPrefix + "/known")
	if strings.Contains(raw, "\naa ") || strings.HasPrefix(raw, "aa ") {
		t.Errorf("store = %q, want aa only as its forget", raw)
	}
	_ = time.Second
}
