package redisstore

import (
	"strconv"
	"testing"
	"time"
)

// A full short-circuit map makes room for a refusal by dropping a level
// an admission left, which only ever sharpens a wait, and never drops a
// refusal for such a level: a flood of refused calls must stay local.
func TestAFullMapKeepsRefusalsOverWhatAdmissionsLeft(t *testing.T) {
	s := &Store{over: map[overKey]overEntry{}, clock: time.Now}
	now := time.Now()
	until := now.Add(time.Minute)
	for i := range maxOver {
		it := Item{Kind: Bucket, Key: "seen/" + strconv.Itoa(i), Rate: 1, Burst: 1, N: 1}
		s.rememberLocked(&it, now, until, 0, true)
	}
	refused := Item{Kind: Bucket, Key: "refused", Rate: 1, Burst: 1, N: 1}
	s.remember(&refused, now, until, 0)
	if _, ok := s.over[overKeyOf(&refused)]; !ok || len(s.over) != maxOver {
		t.Fatalf("a refusal on a map full of admissions' levels: remembered %v, %d entries; want it in place of one of them", ok, len(s.over))
	}
	late := Item{Kind: Bucket, Key: "seen/late", Rate: 1, Burst: 1, N: 1}
	var levels []overKey
	for k, e := range s.over {
		if e.seen {
			levels = append(levels, k)
		}
	}
	for _, k := range levels[1:] { // the map holds refusals only, but for one level
		delete(s.over, k)
		s.over[overKey{kind: Bucket, key: "refused/" + k.key}] = overEntry{until: until, recheck: until}
	}
	s.mu.Lock()
	s.rememberLocked(&late, now, until, 0, true)
	s.mu.Unlock()
	if _, ok := s.over[overKeyOf(&late)]; ok {
		t.Fatal("a level an admission left took a refusal's place")
	}
	if n := s.Remembered(); n != maxOver-1 {
		t.Fatalf("Remembered() = %d, want the %d refusals", n, maxOver-1)
	}
}
