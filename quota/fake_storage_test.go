package quota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"
)

// fakeStorage is an in-memory Storage with per-name locks, operation counts
// and switches to inject errors, latency (a hook that may block on channels),
// junk names and "vanishing" objects that List returns but that do not exist.
type fakeStorage struct {
	mu      sync.Mutex
	objects map[string][]byte
	locks   map[string]chan struct{}
	ops     map[string]int
	written int64
	fail    map[string]error // op name, or "*" for every op, → injected error
	junk    []string         // full names List returns besides the objects
	vanish  []string         // full names List returns; Load/Delete: not exist
	stuck   bool             // an Unlock that fails keeps the lock, as a file it could not remove
	hook    func(op, key string)
}

func newFakeStorage() *fakeStorage {
	return &fakeStorage{
		objects: map[string][]byte{},
		locks:   map[string]chan struct{}{},
		ops:     map[string]int{},
		fail:    map[string]error{},
	}
}

// begin counts op, runs the hook and returns the injected error, if any.
func (s *fakeStorage) begin(op, key string) error {
	s.mu.Lock()
	s.ops[op]++
	hook := s.hook
	err := s.fail[op]
	if err == nil {
		err = s.fail["*"]
	}
	s.mu.Unlock()
	if hook != nil {
		hook(op, key)
	}
	return err
}

func (s *fakeStorage) lockChan(name string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.locks[name]
	if ch == nil {
		ch = make(chan struct{}, 1)
		s.locks[name] = ch
	}
	return ch
}

func (s *fakeStorage) Lock(ctx context.Context, name string) error {
	if err := s.begin("Lock", name); err != nil {
		return err
	}
	select {
	case s.lockChan(name) <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock releases the lock even when it reports an injected error, like a
// lock that goes stale, unless stuck is set. A lock not held is an error
// wrapping fs.ErrNotExist, as for a lock file that is gone.
func (s *fakeStorage) Unlock(_ context.Context, name string) error {
	err := s.begin("Unlock", name)
	s.mu.Lock()
	stuck := s.stuck
	s.mu.Unlock()
	if err != nil && stuck {
		return err
	}
	select {
	case <-s.lockChan(name):
	default:
		if err == nil {
			err = fmt.Errorf("unlock %s: not locked: %w", name, fs.ErrNotExist)
		}
	}
	return err
}

// Store keeps value without copying it, so benchmarks measure the Counter.
func (s *fakeStorage) Store(_ context.Context, key string, value []byte) error {
	if err := s.begin("Store", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = value
	s.written += int64(len(value))
	return nil
}

func (s *fakeStorage) Load(_ context.Context, key string) ([]byte, error) {
	if err := s.begin("Load", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.objects[key]
	if !ok || contains(s.vanish, key) {
		return nil, fmt.Errorf("load %s: %w", key, fs.ErrNotExist)
	}
	return v, nil
}

func (s *fakeStorage) Delete(_ context.Context, key string) error {
	if err := s.begin("Delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; !ok || contains(s.vanish, key) {
		return fmt.Errorf("delete %s: %w", key, fs.ErrNotExist)
	}
	delete(s.objects, key)
	return nil
}

func (s *fakeStorage) List(_ context.Context, dir string, recursive bool) ([]string, error) {
	if err := s.begin("List", dir); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for k := range s.objects {
		rest, ok := strings.CutPrefix(k, dir+"/")
		if ok && (recursive || !strings.Contains(rest, "/")) {
			names = append(names, k)
		}
	}
	names = append(names, s.junk...)
	names = append(names, s.vanish...)
	if len(names) == 0 {
		return nil, fmt.Errorf("list %s: %w", dir, fs.ErrNotExist)
	}
	sort.Strings(names)
	return names, nil
}

// setFail injects err for op ("*" for all ops); nil restores it.
func (s *fakeStorage) setFail(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.fail, op)
		return
	}
	s.fail[op] = err
}

func (s *fakeStorage) setHook(h func(op, key string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

// takeOps returns the operation counts and bytes written since the last
// call, and resets them.
func (s *fakeStorage) takeOps() (map[string]int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops, written := s.ops, s.written
	s.ops, s.written = map[string]int{}, 0
	return ops, written
}

// raw returns the object at key as stored.
func (s *fakeStorage) raw(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.objects[key])
}

func (s *fakeStorage) put(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = []byte(value)
}

// counts parses the object at key; nil when absent.
func (s *fakeStorage) counts(key string) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.objects[key]
	if !ok {
		return nil
	}
	m, _ := parseCounts(v, 0)
	return m
}

func (s *fakeStorage) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.objects[key]
	return ok
}

// heldLocks returns the names currently locked.
func (s *fakeStorage) heldLocks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var held []string
	for name, ch := range s.locks {
		if len(ch) > 0 {
			held = append(held, name)
		}
	}
	return held
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// fakeClock is a settable Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var errDown = errors.New("storage down")

const testPrefix = "mcp_ratelimit/z"

// t0 is a fixed test time: 2026-11-30 12:00 UTC.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// newTestCounter returns a Counter on st with clock clk for periods.
func newTestCounter(st Storage, clk *fakeClock, periods ...Period) *Counter {
	return New(Config{Storage: st, Prefix: testPrefix, Clock: clk.Now, Periods: periods, LockTimeout: 5 * time.Second})
}

// objKey returns the storage key of the period of kind p containing t.
func objKey(p Period, t time.Time) string {
	return testPrefix + "/quota/" + objectName(p, p.Start(t))
}

// add charges n for key in period p with no practical limit.
func add(c *Counter, key string, p Period, n int64, now time.Time) bool {
	_, ok := c.TryAdd([]Item{{Key: []byte(key), Period: p, Limit: 1 << 60, N: n}}, now)
	return ok
}
