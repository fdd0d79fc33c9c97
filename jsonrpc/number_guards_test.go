package jsonrpc

import (
	"math"
	"strings"
	"testing"
)

// A long zero is zero whatever its exponent.
func TestLongZeroIsZero(t *testing.T) {
	raw := "0." + strings.Repeat("0", 900) + "e99999999999999999999"
	if f := numberValue([]byte(raw)); f != 0 {
		t.Errorf("numberValue(0.000…e999…) = %v, want 0", f)
	}
}

// An integer literal past the largest double is +Inf, and no panic.
func TestArgIntegerPastTheLargestDouble(t *testing.T) {
	r := parse(t, `{"method":"tools/call","params":{"name":"search","arguments":{"limit":1`+strings.Repeat("0", 400)+`}}}`)
	if max, numeric, present := r.Entry(0).Arg("limit"); !math.IsInf(max, 1) || !numeric || !present {
		t.Errorf("Arg = (%v, %v, %v), want (+Inf, true, true)", max, numeric, present)
	}
}
