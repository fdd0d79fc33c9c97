package quota

import "context"

// Storage is the subset of certmagic.Storage the Counter uses; a
// certmagic.Storage satisfies it as is.
type Storage interface {
	// Lock acquires the named lock, blocking until it is free or ctx ends.
	Lock(ctx context.Context, name string) error
	// Unlock releases the named lock.
	Unlock(ctx context.Context, name string) error
	// Store writes value at key, replacing it atomically.
	Store(ctx context.Context, key string, value []byte) error
	// Load reads key; it returns an error wrapping fs.ErrNotExist when the
	// key is absent.
	Load(ctx context.Context, key string) ([]byte, error)
	// Delete removes key.
	Delete(ctx context.Context, key string) error
	// List returns the keys under path.
	List(ctx context.Context, path string, recursive bool) ([]string, error)
}
