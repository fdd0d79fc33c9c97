package mcplimit

import (
	"context"
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
