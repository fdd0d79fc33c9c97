package mcplimit

import (
	"testing"

	"github.com/caddyserver/certmagic"
)

// Two storage modules of different types that describe themselves alike
// are still two storages: the description is compared only between values
// of one type.
type (
	sameNameA struct{ certmagic.Storage }
	sameNameB struct{ certmagic.Storage }
)

func (sameNameA) String() string { return "shared" }
func (sameNameB) String() string { return "shared" }

func TestSameStorageTellsTypesApartThatDescribeThemselvesAlike(t *testing.T) {
	if sameStorage(sameNameA{}, sameNameB{}) {
		t.Fatal("storages of two types with one description: sameStorage = true, want false")
	}
	if !sameStorage(&sameNameA{}, &sameNameA{}) {
		t.Fatal("two values of one type with one description: sameStorage = false, want true")
	}
}
