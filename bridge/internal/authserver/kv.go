package authserver

import (
	"context"
	"errors"
	"time"
)

// Buckets of the store.
const (
	bucketClients  = "clients"  // client id -> Client
	bucketRequests = "requests" // request id -> AuthRequest
	bucketCodes    = "codes"    // sha256(code) -> Code
	bucketFamilies = "families" // family id -> Family
	bucketRefresh  = "refresh"  // sha256(refresh token) -> family id
	bucketAccess   = "access"   // sha256(access token) -> accessEntry
)

// ErrNotFound: no live entry under that key.
var ErrNotFound = errors.New("not found")

// ErrExists: Create found a live entry under that key.
var ErrExists = errors.New("already exists")

// ErrConflict: Update's revision is no longer the entry's.
var ErrConflict = errors.New("changed concurrently")

// KV is the authorization server's state, shaped like JetStream KV so a
// cluster can put it there: every bucket is a flat key space; every entry
// has a revision that moves on each write, and an expiry after which it
// reads as missing.
type KV interface {
	// Get returns the value and its revision, or ErrNotFound.
	Get(ctx context.Context, bucket, key string) (value []byte, revision uint64, err error)
	// Create stores value only if the key has no live entry (ErrExists).
	Create(ctx context.Context, bucket, key string, value []byte, ttl time.Duration) (revision uint64, err error)
	// Update replaces the entry only if its revision is still revision
	// (ErrConflict; ErrNotFound when it is gone).
	Update(ctx context.Context, bucket, key string, value []byte, revision uint64, ttl time.Duration) (uint64, error)
	// Delete removes the entry; deleting a missing key is not an error.
	Delete(ctx context.Context, bucket, key string) error
	// Count returns the number of live entries in a bucket.
	Count(ctx context.Context, bucket string) (int, error)
	// List returns the values of every live entry in a bucket, in no
	// particular order: linear in the bucket's size, for rebuilding an
	// index of what the bucket holds (each value names its own key).
	List(ctx context.Context, bucket string) ([][]byte, error)
	// Close releases the store.
	Close() error
}
