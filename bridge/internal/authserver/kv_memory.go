package authserver

import (
	"context"
	"sync"
	"time"
)

// memoryKV is the KV in memory: one node, lost on restart. Tests, and
// deployments that accept signing in again after a restart.
type memoryKV struct {
	mu      sync.Mutex
	now     func() time.Time
	rev     uint64
	buckets map[string]map[string]memoryEntry
}

// memorySweepEvery is how many writes pass between sweeps of expired
// entries: entries nobody reads again (an access token left to expire)
// would otherwise stay in memory for good.
const memorySweepEvery = 1024

var _ KV = (*memoryKV)(nil)

type memoryEntry struct {
	value   []byte
	rev     uint64
	expires time.Time // zero: never
}

// NewMemoryKV returns an empty in-memory KV; now is its clock (nil:
// time.Now).
func NewMemoryKV(now func() time.Time) KV {
	if now == nil {
		now = time.Now
	}
	return &memoryKV{now: now, buckets: map[string]map[string]memoryEntry{}}
}

// live returns the key's entry if it has not expired, dropping it if it has.
func (m *memoryKV) live(bucket, key string) (memoryEntry, bool) {
	e, ok := m.buckets[bucket][key]
	if !ok {
		return e, false
	}
	if !e.expires.IsZero() && !m.now().Before(e.expires) {
		delete(m.buckets[bucket], key)
		return e, false
	}
	return e, true
}

func (m *memoryKV) put(bucket, key string, value []byte, ttl time.Duration) uint64 {
	b := m.buckets[bucket]
	if b == nil {
		b = map[string]memoryEntry{}
		m.buckets[bucket] = b
	}
	m.rev++
	if m.rev%memorySweepEvery == 0 {
		m.sweep()
	}
	e := memoryEntry{value: append([]byte(nil), value...), rev: m.rev}
	if ttl > 0 {
		e.expires = m.now().Add(ttl)
	}
	b[key] = e
	return e.rev
}

// sweep drops every expired entry.
func (m *memoryKV) sweep() {
	now := m.now()
	for _, b := range m.buckets {
		for k, e := range b {
			if !e.expires.IsZero() && !now.Before(e.expires) {
				delete(b, k)
			}
		}
	}
}

func (m *memoryKV) Get(_ context.Context, bucket, key string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.live(bucket, key)
	if !ok {
		return nil, 0, ErrNotFound
	}
	return append([]byte(nil), e.value...), e.rev, nil
}

func (m *memoryKV) Create(_ context.Context, bucket, key string, value []byte, ttl time.Duration) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live(bucket, key); ok {
		return 0, ErrExists
	}
	return m.put(bucket, key, value, ttl), nil
}

func (m *memoryKV) Update(_ context.Context, bucket, key string, value []byte, revision uint64, ttl time.Duration) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.live(bucket, key)
	if !ok {
		return 0, ErrNotFound
	}
	if e.rev != revision {
		return 0, ErrConflict
	}
	return m.put(bucket, key, value, ttl), nil
}

func (m *memoryKV) Delete(_ context.Context, bucket, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.buckets[bucket], key)
	return nil
}

func (m *memoryKV) Count(_ context.Context, bucket string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.buckets[bucket] {
		if _, ok := m.live(bucket, k); ok {
			n++
		}
	}
	return n, nil
}

func (m *memoryKV) List(_ context.Context, bucket string) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]byte
	for k := range m.buckets[bucket] {
		if e, ok := m.live(bucket, k); ok {
			out = append(out, append([]byte(nil), e.value...))
		}
	}
	return out, nil
}

func (m *memoryKV) Close() error { return nil }
