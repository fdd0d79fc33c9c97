package mcplimit

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/caddyserver/certmagic"
)

// swapStorage lets a zone, which outlives config loads, always use the
// storage of the config in force (the global `storage` option).
type swapStorage struct {
	cur atomic.Pointer[certmagic.Storage]
}

func (s *swapStorage) set(st certmagic.Storage) { s.cur.Store(&st) }

func (s *swapStorage) get() certmagic.Storage { return *s.cur.Load() }

// Lock implements quota.Storage.
func (s *swapStorage) Lock(ctx context.Context, name string) error { return s.get().Lock(ctx, name) }

// Unlock implements quota.Storage.
func (s *swapStorage) Unlock(ctx context.Context, name string) error {
	return s.get().Unlock(ctx, name)
}

// Store implements quota.Storage.
func (s *swapStorage) Store(ctx context.Context, key string, value []byte) error {
	return s.get().Store(ctx, key, value)
}

// Load implements quota.Storage.
func (s *swapStorage) Load(ctx context.Context, key string) ([]byte, error) {
	return s.get().Load(ctx, key)
}

// Delete implements quota.Storage.
func (s *swapStorage) Delete(ctx context.Context, key string) error {
	return s.get().Delete(ctx, key)
}

// List implements quota.Storage.
func (s *swapStorage) List(ctx context.Context, path string, recursive bool) ([]string, error) {
	return s.get().List(ctx, path, recursive)
}

// sameStorage reports whether a and b are the same storage: the same
// value, or values that describe themselves alike (certmagic's
// FileStorage does, by its path). A storage module that does neither
// counts as another storage at every config load, which costs only a
// confirmation of the fingerprint key in it.
func sameStorage(a, b certmagic.Storage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.ValueOf(a).Comparable() && a == b {
		return true
	}
	as, aok := a.(fmt.Stringer)
	bs, bok := b.(fmt.Stringer)
	return aok && bok && fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) && as.String() == bs.String()
}
