package mcplimit

import (
	"testing"

	"github.com/caddyserver/certmagic"
)

// plainStorage is a storage module that does not describe itself;
// listStorage one whose values cannot be compared.
type (
	plainStorage struct{ certmagic.Storage }
	listStorage  struct {
		certmagic.Storage
		_ []string
	}
	// holderStorage compares as a type but not always as a value.
	holderStorage struct {
		certmagic.Storage
		of any
	}
)

// A config load makes a new storage value even when the storage stays:
// values that describe themselves alike are one storage.
func TestSameStorage(t *testing.T) {
	a := &certmagic.FileStorage{Path: "/a"}
	for _, tt := range []struct {
		rule string
		x, y certmagic.Storage
		want bool
	}{
		{"one value", a, a, true},
		{"file storage at one path", a, &certmagic.FileStorage{Path: "/a"}, true},
		{"file storage at another path", a, &certmagic.FileStorage{Path: "/b"}, false},
		{"a module that does not describe itself", &plainStorage{}, &plainStorage{}, false},
		{"values that cannot be compared", listStorage{}, listStorage{}, false},
		{"values holding what cannot be compared", holderStorage{of: []int{1}}, holderStorage{of: []int{1}}, false},
		{"no storage either side", nil, nil, true},
		{"no storage on one side", a, nil, false},
	} {
		if got := sameStorage(tt.x, tt.y); got != tt.want {
			t.Errorf("%s: sameStorage = %v, want %v", tt.rule, got, tt.want)
		}
	}
}
