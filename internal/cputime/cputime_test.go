package cputime

import "testing"

func TestProcessAdvancesWithWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		t.Skip("CPU time is not reported on this platform")
	}
	x := 0
	for i := range 50_000_000 {
		x ^= i
	}
	after, _ := Process()
	if after <= before {
		t.Fatalf("CPU time %v then %v after a busy loop (%d)", before, after, x)
	}
}
