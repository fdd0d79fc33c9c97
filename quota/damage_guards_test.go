package quota

import "testing"

// An older copy of the object put back, so old that its last push is
// before every push the object's history (historyLen pushes) kept when it
// was last read, is a rollback too: the Counter keeps the counts it read,
// and does not adopt the old copy's lower ones.
func TestObjectPutBackFromBeforeTheKeptHistoryIsDamage(t *testing.T) {
	p := newDamagePair()
	add(p.a, "k", Day, 1, t0)
	if err := p.a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	old := p.st.raw(p.key)
	for i := range historyLen + 4 {
		add(p.b, "k", Day, 1, t0)
		if err := p.b.Flush(t.Context()); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if err := p.a.Flush(t.Context()); err != nil { // reads the long history
		t.Fatal(err)
	}
	want := int64(historyLen + 5)
	if got := p.a.Used([]byte("k"), Day, t0); got != want {
		t.Fatalf("Used before the rollback = %d, want %d", got, want)
	}
	p.st.put(p.key, old)
	if err := p.a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.a.Used([]byte("k"), Day, t0); got != want {
		t.Errorf("Used after the object was put back from before its kept history = %d, want %d (kept)", got, want)
	}
	if len(p.da) == 0 || p.da[0].restored {
		t.Errorf("damage reported = %+v, want a read finding it", p.da)
	}
}

// The lineages an object had before its present one are remembered up to
// keepRetired: an object emptied and repaired over and over does not grow
// its Counter's memory.
func TestRetiredLineagesAreBounded(t *testing.T) {
	p := newDamagePair()
	add(p.a, "k", Day, 1, t0)
	for i := range keepRetired + 4 {
		if err := p.a.Flush(t.Context()); err != nil { // pushes, or repairs
			t.Fatalf("round %d: %v", i, err)
		}
		p.st.put(p.key, "") // emptied: the next read finds it damaged
		if err := p.a.Flush(t.Context()); err != nil {
			t.Fatalf("round %d, read: %v", i, err)
		}
	}
	p.a.mu.Lock()
	defer p.a.mu.Unlock()
	b := p.a.latest[Day]
	if b == nil || len(b.retired) == 0 || len(b.retired) > keepRetired {
		t.Fatalf("retired lineages = %d, want 1 to %d", len(b.retired), keepRetired)
	}
}
