package main

import (
	"os"
	"path/filepath"
	"testing"
)

// readProfile takes each instruction's own cost, not the inclusive cost a
// call line carries, and sums an address listed twice.
func TestReadProfileCountsSelfCostOnly(t *testing.T) {
	profile := `# callgrind format
positions: instr line
events: Ir
fn=a
0x1000 10 5
0x1004 10 7
calls=3 0x2000 20
0x1008 11 900
0x100c 12 2
fn=b
0x2000 20 300
0x1004 10 1
`
	path := filepath.Join(t.TempDir(), "callgrind.out")
	if err := os.WriteFile(path, []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	cost, fnOf, err := readProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]uint64{0x1000: 5, 0x1004: 8, 0x100c: 2, 0x2000: 300}
	if len(cost) != len(want) {
		t.Fatalf("costs %v, want %v (the call's inclusive cost left out)", cost, want)
	}
	for a, c := range want {
		if cost[a] != c {
			t.Errorf("cost of %#x = %d, want %d", a, cost[a], c)
		}
	}
	if fnOf[0x1004] != "a" || fnOf[0x2000] != "b" {
		t.Errorf("functions %v: want 0x1004 in a (where first listed), 0x2000 in b", fnOf)
	}
}
