package jsonrpc

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// Naming the arrays of a key nested 20,000 levels deep costs the key's
// length, not its length squared: a name per level spelling the whole
// path before it allocated 6 GB for this 60 KB body (and more than a
// minute of work for a 1 MiB one); the walk allocates about 10 MB.
func TestFormArraysOfADeepKeyCostItsLength(t *testing.T) {
	body := []byte("method=tools/call&params" + strings.Repeat("[0]", 20000) + "=big")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, ok := formJSON(nil, body)
	runtime.ReadMemStats(&after)
	if !ok || !bytes.HasSuffix(out, []byte(`"big"`+strings.Repeat("]", 20000)+"}")) {
		t.Fatalf("formJSON of the deep key = %.40s…, %v", out, ok)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("formJSON of a %d-byte body allocated %d bytes", len(body), n)
	}
}
