package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
)

// revocations keeps the ids of revoked credentials until each credential
// would have expired anyway; after that the token's own expiry refuses
// it. Safe for concurrent use.
type revocations interface {
	revoke(ctx context.Context, id string, until time.Time) error
	isRevoked(ctx context.Context, id string) (bool, error)
}

var (
	_ revocations = (*revokedFile)(nil)
	_ revocations = (*revokedShared)(nil)
)

// revokedFile keeps revocations in memory and, if path is set, in a JSON
// file ({"id": "RFC 3339 expiry"}), written whole (to a temporary file
// renamed over it) on each revocation: a proxy alone remembers them across
// restarts.
type revokedFile struct {
	path string
	now  func() time.Time

	mu  sync.Mutex
	ids map[string]time.Time
}

// openRevokedFile reads path ("" keeps revocations in memory only); a
// missing file is an empty list.
func openRevokedFile(path string, now func() time.Time) (*revokedFile, error) {
	r := &revokedFile{path: path, now: now, ids: make(map[string]time.Time)}
	if path == "" {
		return r, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the revoked credentials file: %w", err)
	}
	if err := json.Unmarshal(data, &r.ids); err != nil {
		return nil, fmt.Errorf("the revoked credentials file %s is not the JSON object this proxy writes: %w", path, err)
	}
	return r, nil
}

func (r *revokedFile) revoke(_ context.Context, id string, until time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, exp := range r.ids {
		if !now.Before(exp) {
			delete(r.ids, k)
		}
	}
	r.ids[id] = until.UTC()
	if r.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(r.ids, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(r.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the revoked credentials file: %w", err)
	}
	return nil
}

func (r *revokedFile) isRevoked(_ context.Context, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	exp, ok := r.ids[id]
	return ok && r.now().Before(exp), nil
}

// revokedShared keeps a cluster's revocations in the JetStream bucket
// prefix_revoked: an empty entry under each id, with a server-side TTL
// until the credential's expiry. An entry only ever refuses a credential,
// so it is not sealed: what NATS could forge is a refusal.
type revokedShared struct {
	conn     *nats.Conn
	bucket   string
	replicas int

	mu sync.Mutex // held while connecting to the bucket
	kv jetstream.KeyValue
}

func newRevokedShared(c *ClusterOptions) *revokedShared {
	return &revokedShared{conn: c.Conn, bucket: c.Prefix + "_revoked", replicas: c.Replicas}
}

func (r *revokedShared) open(ctx context.Context) (jetstream.KeyValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	js, err := jetstream.New(r.conn)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         r.bucket,
		Description:    "browserbridge revoked bridge credentials (ids), shared by the proxy's nodes",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       r.replicas,
		LimitMarkerTTL: time.Minute, // needed for per-entry TTLs
	})
	if err != nil {
		return nil, fmt.Errorf("revoked credentials: the JetStream bucket %s: %w", r.bucket, err)
	}
	r.kv = kv
	return kv, nil
}

func (r *revokedShared) revoke(ctx context.Context, id string, until time.Time) error {
	kv, err := r.open(ctx)
	if err != nil {
		return err
	}
	left := time.Until(until)
	if left <= 0 {
		return nil // expired already: refused by its expiry
	}
	_, err = kv.Create(ctx, id, nil, jetstream.KeyTTL(pairingStoreTTL(left)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return err
}

func (r *revokedShared) isRevoked(ctx context.Context, id string) (bool, error) {
	kv, err := r.open(ctx)
	if err != nil {
		return false, err
	}
	_, err = kv.Get(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
