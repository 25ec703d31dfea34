package authserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// boltKV is the KV in a bbolt file: one node, surviving restarts. Each
// bucket is a bbolt bucket; a value is stored behind a 16-byte header
// holding its revision (the bucket's sequence at its write, so revisions
// only grow) and its expiry (Unix nanoseconds, 0: never). Expired
// entries read as missing and are swept on open and every
// boltSweepEvery.
type boltKV struct {
	db  *bolt.DB
	now func() time.Time

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ KV = (*boltKV)(nil)

const (
	boltHeaderLen  = 16
	boltSweepEvery = 10 * time.Minute
	// boltLockWait is how long opening waits for another process to let
	// go of the file.
	boltLockWait = 5 * time.Second
)

// OpenBoltKV opens (creating it, mode 0600) the bbolt file at path as a
// KV; now is its clock (nil: time.Now). Only one process may have the
// file open. Close it when done.
func OpenBoltKV(path string, now func() time.Time) (KV, error) {
	if now == nil {
		now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: boltLockWait})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("authserver: the state file %s is held open by another process (is another gateway or proxy running with it?)", path)
		}
		return nil, fmt.Errorf("authserver: opening the state file %s: %w", path, err)
	}
	// The file may predate this run with a looser mode; what it holds is
	// hashed, but who signed in and which clients exist is nobody else's.
	if runtime.GOOS != "windows" {
		if err := os.Chmod(path, 0o600); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("authserver: making the state file %s private: %w", path, err)
		}
	}
	kv := &boltKV{db: db, now: now, stop: make(chan struct{}), done: make(chan struct{})}
	if err := kv.sweep(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("authserver: sweeping the state file %s: %w", path, err)
	}
	go kv.sweepLoop()
	return kv, nil
}

func (k *boltKV) sweepLoop() {
	defer close(k.done)
	t := time.NewTicker(boltSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
			_ = k.sweep() // a failed sweep is retried at the next tick; reads still skip expired entries
		}
	}
}

// sweep deletes every expired entry.
func (k *boltKV) sweep() error {
	now := k.now()
	return k.db.Update(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			var dead [][]byte
			err := b.ForEach(func(key, v []byte) error {
				if _, _, ok := boltDecode(v, now); !ok {
					dead = append(dead, append([]byte(nil), key...))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, key := range dead {
				if err := b.Delete(key); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func boltEncode(rev uint64, expires time.Time, value []byte) []byte {
	out := make([]byte, boltHeaderLen+len(value))
	binary.BigEndian.PutUint64(out, rev)
	if !expires.IsZero() {
		binary.BigEndian.PutUint64(out[8:], uint64(expires.UnixNano()))
	}
	copy(out[boltHeaderLen:], value)
	return out
}

// boltDecode returns a stored value's revision and value, and false when
// it has expired (or is too short to be an entry).
func boltDecode(v []byte, now time.Time) (uint64, []byte, bool) {
	if len(v) < boltHeaderLen {
		return 0, nil, false
	}
	if exp := int64(binary.BigEndian.Uint64(v[8:])); exp != 0 && now.UnixNano() >= exp {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(v), v[boltHeaderLen:], true
}

// put writes value under key with the bucket's next sequence as revision.
func (k *boltKV) put(b *bolt.Bucket, key string, value []byte, ttl time.Duration) (uint64, error) {
	rev, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	var expires time.Time
	if ttl > 0 {
		expires = k.now().Add(ttl)
	}
	return rev, b.Put([]byte(key), boltEncode(rev, expires, value))
}

func (k *boltKV) Get(ctx context.Context, bucket, key string) ([]byte, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var (
		out []byte
		rev uint64
	)
	err := k.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return ErrNotFound
		}
		r, v, ok := boltDecode(b.Get([]byte(key)), k.now())
		if !ok {
			return ErrNotFound
		}
		out, rev = append([]byte(nil), v...), r // bbolt's slices die with the transaction
		return nil
	})
	return out, rev, err
}

func (k *boltKV) Create(ctx context.Context, bucket, key string, value []byte, ttl time.Duration) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rev uint64
	err := k.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		if _, _, ok := boltDecode(b.Get([]byte(key)), k.now()); ok {
			return ErrExists
		}
		rev, err = k.put(b, key, value, ttl)
		return err
	})
	return rev, err
}

func (k *boltKV) Update(ctx context.Context, bucket, key string, value []byte, revision uint64, ttl time.Duration) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rev uint64
	err := k.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return ErrNotFound
		}
		cur, _, ok := boltDecode(b.Get([]byte(key)), k.now())
		if !ok {
			return ErrNotFound
		}
		if cur != revision {
			return ErrConflict
		}
		var err error
		rev, err = k.put(b, key, value, ttl)
		return err
	})
	return rev, err
}

func (k *boltKV) Delete(ctx context.Context, bucket, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return k.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.Delete([]byte(key))
	})
}

func (k *boltKV) Count(ctx context.Context, bucket string) (int, error) {
	live, err := k.List(ctx, bucket)
	return len(live), err
}

func (k *boltKV) List(ctx context.Context, bucket string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out [][]byte
	err := k.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		now := k.now()
		return b.ForEach(func(_, v []byte) error {
			if _, val, ok := boltDecode(v, now); ok {
				out = append(out, append([]byte(nil), val...)) // bbolt's slices die with the transaction
			}
			return nil
		})
	})
	return out, err
}

// Close stops the sweeper and closes the file; it is safe to call twice.
func (k *boltKV) Close() error {
	k.closeOnce.Do(func() {
		close(k.stop)
		<-k.done
		k.closeErr = k.db.Close()
	})
	return k.closeErr
}
