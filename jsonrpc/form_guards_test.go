package jsonrpc

import (
	"strings"
	"testing"
)

// A key nested deeper than qs reads (formDepth) ends in one segment
// holding the rest, as qs takes it. Read to its end, the 20,000 levels of
// this 60 KB body allocated 6 GB before arrays were named by a walk, and
// 10 MB after; a million-bracket body of 1 MiB took half a second and
// 290 MB to read.
func TestFormKeyDeeperThanQsReadsEndsInOneSegment(t *testing.T) {
	body := []byte("method=tools/call&params" + strings.Repeat("[0]", 20000) + "=big")
	out, ok := formJSON(nil, body)
	want := `{"method":"tools/call","params":` + strings.Repeat("[", formDepth) +
		`{"` + strings.Repeat("[0]", 20000-formDepth) + `":"big"}` + strings.Repeat("]", formDepth) + "}"
	if !ok || string(out) != want {
		t.Fatalf("formJSON of the deep key = %.80s…, %v; want %.80s…", out, ok, want)
	}
}
