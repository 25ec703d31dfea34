// Package jetstreamkv is the authorization server's state (authserver.KV)
// in JetStream key-value buckets: the state a cluster of proxies shares, so
// that any node can finish a sign-in another began. It is a package of its
// own so that only the programs that speak NATS link nats.go: authserver,
// and with it the browserbridge command, does not.
package jetstreamkv

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
)

// store is the KV in JetStream key-value buckets. Each authserver bucket is
// one JetStream bucket, prefix+"_oauth_"+bucket, made on first use
// (CreateOrUpdateKeyValue, so every node may race to make it); revisions
// are the stream's sequence numbers, which only grow.
//
// Sealing. Every value is sealed with the cluster's keyring (clusterseal),
// bound to its bucket and key and to the time the NATS server stored it:
// a NATS client without the deployment's secret reads nothing of the OAuth
// state and can write nothing that opens (a made-up access token, a family
// or a code moved to another key, an old entry written back). What does
// not open reads as missing.
//
// Expiry. nats.go v1.55 has a per-key TTL on Create (KeyTTL) but none on
// Update, which even drops the TTL a key had; and the server counts TTLs in
// whole seconds on its own clock. So an entry's expiry lives in two places:
//   - in a 9-byte envelope before the value (version, Unix nanoseconds, 0:
//     never), which readers check against this KV's clock: an expired entry
//     reads as missing to the nanosecond, as on the other stores, and Create
//     may take its key over by compare-and-swap;
//   - as the message's server-side TTL (Nats-TTL, rounded up to a second,
//     plus one), set on Create and, by publishing to the key's subject with
//     the expected last sequence as kv.Update itself does, on Update too, so
//     the server removes what nobody reads again (an access token left to
//     expire) and nothing with a TTL lives on in the bucket.
//
// The bucket has no MaxAge: every entry the authserver writes has a TTL,
// and an entry with none (ttl 0) must, by the KV contract, never expire.
// Deletes purge the key with a marker that itself expires (kvMarkerTTL), and
// markers of expired keys do too (LimitMarkerTTL), so no tombstone stays
// either. Nodes' clocks are assumed to agree within seconds: the envelope's
// expiry is the writer's clock, judged by the reader's.
type store struct {
	js       jetstream.JetStream
	ring     *clusterseal.Keyring
	prefix   string
	replicas int
	now      func() time.Time

	mu      sync.Mutex
	buckets map[string]jetstream.KeyValue
}

var _ authserver.KV = (*store)(nil)

const (
	// kvMarkerTTL is how long a deleted or expired key's marker stays: long
	// enough for watchers to see it, short enough not to pile up.
	kvMarkerTTL = time.Minute
	// kvEnvelopeLen is the envelope's size: a version byte and the expiry.
	kvEnvelopeLen = 9
	kvEnvelopeV1  = 1
	// kvMaxPlainKey bounds the keys stored as they are; longer ones (a
	// client id is the client's own text) are hashed, keeping subjects
	// well under NATS's limits.
	kvMaxPlainKey = 128
)

var (
	// jsNameRe: what a bucket name (and so the prefix) may hold.
	jsNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// plainKeyRe: keys stored as they are. Others are stored as "=" and the
	// base64url of their SHA-256: "=" never begins a plain key, so the two
	// never meet.
	plainKeyRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// New returns a KV in js's key-value buckets named prefix+"_oauth_"+bucket
// ([A-Za-z0-9_-] only), each with replicas copies (0: 1); now is its clock
// (nil: time.Now), as authserver.NewMemoryKV's and OpenBoltKV's; ring seals
// the values (required: the cluster's keyring). js must be
// the default JetStream API of its connection (jetstream.New), not one of a
// domain or another API prefix: updates are published to the keys' subjects
// directly. Close leaves js and its connection open.
func New(js jetstream.JetStream, ring *clusterseal.Keyring, prefix string, replicas int, now func() time.Time) (authserver.KV, error) {
	return newStore(js, ring, prefix, replicas, now)
}

func newStore(js jetstream.JetStream, ring *clusterseal.Keyring, prefix string, replicas int, now func() time.Time) (*store, error) {
	if js == nil {
		return nil, errors.New("jetstreamkv: New needs a JetStream context")
	}
	if ring == nil {
		return nil, errors.New("jetstreamkv: New needs the cluster's keyring: the OAuth state is sealed with the deployment's secret")
	}
	if !jsNameRe.MatchString(prefix) {
		return nil, fmt.Errorf("jetstreamkv: the JetStream bucket prefix %q may hold only letters, digits, '_' and '-'", prefix)
	}
	if o := js.Options(); o.Domain != "" || (o.APIPrefix != "" && o.APIPrefix != jetstream.DefaultAPIPrefix) {
		return nil, errors.New("jetstreamkv: the OAuth state needs the default JetStream API (jetstream.New), not a domain or API prefix")
	}
	if replicas <= 0 {
		replicas = 1
	}
	if now == nil {
		now = time.Now
	}
	return &store{js: js, ring: ring, prefix: prefix, replicas: replicas, now: now, buckets: map[string]jetstream.KeyValue{}}, nil
}

// bucketName is the JetStream bucket of an authserver bucket.
func (k *store) bucketName(bucket string) (string, error) {
	name := k.prefix + "_oauth_" + bucket
	if !jsNameRe.MatchString(bucket) {
		return "", fmt.Errorf("jetstreamkv: %q is not a valid bucket name", bucket)
	}
	return name, nil
}

// bucket returns the JetStream bucket, making it on first use.
func (k *store) bucket(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	k.mu.Lock()
	kv := k.buckets[bucket]
	k.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	name, err := k.bucketName(bucket)
	if err != nil {
		return nil, err
	}
	kv, err = k.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         name,
		Description:    "browserbridge OAuth state: " + bucket,
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       k.replicas,
		LimitMarkerTTL: kvMarkerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("jetstreamkv: making the JetStream bucket %s: %w", name, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if prev := k.buckets[bucket]; prev != nil {
		return prev, nil
	}
	k.buckets[bucket] = kv
	return kv, nil
}

// jsKey maps a key to one JetStream accepts, one to one.
func jsKey(key string) string {
	if len(key) <= kvMaxPlainKey && plainKeyRe.MatchString(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "=" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// seal wraps value in the envelope with its expiry and seals it for the
// key (its JetStream bucket and key).
func (k *store) seal(kv jetstream.KeyValue, key string, value []byte, ttl time.Duration) []byte {
	out := make([]byte, kvEnvelopeLen+len(value))
	out[0] = kvEnvelopeV1
	if ttl > 0 {
		binary.BigEndian.PutUint64(out[1:], uint64(k.now().Add(ttl).UnixNano()))
	}
	copy(out[kvEnvelopeLen:], value)
	return k.ring.SealValue(kv.Bucket()+"/"+key, out)
}

// open returns a stored entry's own bytes, and false when it does not
// open with the keyring, has expired or is not an envelope of ours.
func (k *store) open(e jetstream.KeyValueEntry) ([]byte, bool) {
	v, err := k.ring.OpenValue("oauth", e.Bucket()+"/"+e.Key(), e.Value(), e.Created())
	if err != nil || len(v) < kvEnvelopeLen || v[0] != kvEnvelopeV1 {
		return nil, false
	}
	if exp := int64(binary.BigEndian.Uint64(v[1:])); exp != 0 && k.now().UnixNano() >= exp {
		return nil, false
	}
	return v[kvEnvelopeLen:], true
}

// serverTTL is the message TTL for an entry's ttl: whole seconds (the
// server's unit, at least one), rounded up with one to spare so the server
// never removes an entry the envelope still holds live. 0: none.
func serverTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	return (ttl+time.Second-1)/time.Second*time.Second + time.Second
}

// isWrongLastSeq reports a failed compare-and-swap: JetStream reports it as
// 10071, or 10164 on replicated streams.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// get returns the key's live value and revision, or authserver.ErrNotFound.
func (k *store) get(ctx context.Context, kv jetstream.KeyValue, key string) ([]byte, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, authserver.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("jetstreamkv: reading %s from JetStream: %w", kv.Bucket(), err)
	}
	v, ok := k.open(e)
	if !ok {
		return nil, e.Revision(), authserver.ErrNotFound
	}
	return v, e.Revision(), nil
}

// swap writes data under key if the key's last revision is still revision,
// with the message TTL for ttl: kv.Update, plus the TTL it lacks.
func (k *store) swap(ctx context.Context, kv jetstream.KeyValue, key string, data []byte, revision uint64, ttl time.Duration) (uint64, error) {
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(revision)}
	if st := serverTTL(ttl); st > 0 {
		opts = append(opts, jetstream.WithMsgTTL(st))
	}
	ack, err := k.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + kv.Bucket() + "." + key, Data: data}, opts...)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

func (k *store) Get(ctx context.Context, bucket, key string) ([]byte, uint64, error) {
	kv, err := k.bucket(ctx, bucket)
	if err != nil {
		return nil, 0, err
	}
	v, rev, err := k.get(ctx, kv, jsKey(key))
	if err != nil {
		return nil, 0, err
	}
	return v, rev, nil
}

func (k *store) Create(ctx context.Context, bucket, key string, value []byte, ttl time.Duration) (uint64, error) {
	kv, err := k.bucket(ctx, bucket)
	if err != nil {
		return 0, err
	}
	jk := jsKey(key)
	data := k.seal(kv, jk, value, ttl)
	var opts []jetstream.KVCreateOpt
	if st := serverTTL(ttl); st > 0 {
		opts = append(opts, jetstream.KeyTTL(st))
	}
	// A few rounds: the key may be deleted or taken over between the
	// refused Create and the read after it.
	for range 4 {
		rev, err := kv.Create(ctx, jk, data, opts...)
		if err == nil {
			return rev, nil
		}
		if !isWrongLastSeq(err) {
			return 0, fmt.Errorf("jetstreamkv: writing %s to JetStream: %w", kv.Bucket(), err)
		}
		// The key has an entry: live (ErrExists), or expired by the
		// envelope before the server removed it, which is free to take.
		_, cur, err := k.get(ctx, kv, jk)
		switch {
		case err == nil:
			return 0, authserver.ErrExists
		case !errors.Is(err, authserver.ErrNotFound):
			return 0, err
		case cur == 0:
			continue // gone since: Create again
		}
		rev, err = k.swap(ctx, kv, jk, data, cur, ttl)
		if err == nil {
			return rev, nil
		}
		if !isWrongLastSeq(err) {
			return 0, fmt.Errorf("jetstreamkv: writing %s to JetStream: %w", kv.Bucket(), err)
		}
	}
	return 0, authserver.ErrExists
}

func (k *store) Update(ctx context.Context, bucket, key string, value []byte, revision uint64, ttl time.Duration) (uint64, error) {
	kv, err := k.bucket(ctx, bucket)
	if err != nil {
		return 0, err
	}
	// Read first: an entry the envelope says expired must not be brought
	// back by an update at its revision before the server removes it.
	jk := jsKey(key)
	if _, cur, err := k.get(ctx, kv, jk); err != nil {
		return 0, err
	} else if cur != revision {
		return 0, authserver.ErrConflict
	}
	rev, err := k.swap(ctx, kv, jk, k.seal(kv, jk, value, ttl), revision, ttl)
	if err == nil {
		return rev, nil
	}
	if !isWrongLastSeq(err) {
		return 0, fmt.Errorf("jetstreamkv: writing %s to JetStream: %w", kv.Bucket(), err)
	}
	// It moved on since the read (ErrConflict), or went (ErrNotFound).
	if _, _, err := k.get(ctx, kv, jk); err != nil {
		return 0, err
	}
	return 0, authserver.ErrConflict
}

func (k *store) Delete(ctx context.Context, bucket, key string) error {
	kv, err := k.bucket(ctx, bucket)
	if err != nil {
		return err
	}
	// Purge, not Delete: it drops the value at once and leaves a marker
	// that expires, where Delete's marker would stay for good.
	if err := kv.Purge(ctx, jsKey(key), jetstream.PurgeTTL(kvMarkerTTL)); err != nil {
		return fmt.Errorf("jetstreamkv: deleting from %s in JetStream: %w", kv.Bucket(), err)
	}
	return nil
}

// Count reads every live entry of the bucket (see live): linear in the
// bucket's size, fine for its one use, the registration limit
// (MaxClients, a thousand by default).
func (k *store) Count(ctx context.Context, bucket string) (int, error) {
	live, err := k.live(ctx, bucket)
	return len(live), err
}

// List returns the values of the bucket's live entries (see live).
func (k *store) List(ctx context.Context, bucket string) ([][]byte, error) {
	live, err := k.live(ctx, bucket)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(live))
	for _, v := range live {
		out = append(out, v)
	}
	return out, nil
}

// live reads the last value of each key of the bucket (a watch that ends
// once caught up) and returns the live ones by key.
func (k *store) live(ctx context.Context, bucket string) (map[string][]byte, error) {
	kv, err := k.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("jetstreamkv: listing %s in JetStream: %w", kv.Bucket(), err)
	}
	defer w.Stop()
	// By key: a key written during the watch may come twice, and only its
	// last value counts.
	live := map[string][]byte{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("jetstreamkv: listing %s in JetStream: the watch ended early", kv.Bucket())
			}
			if e == nil { // caught up
				return live, nil
			}
			if v, l := k.open(e); l && e.Operation() == jetstream.KeyValuePut {
				live[e.Key()] = v
			} else {
				delete(live, e.Key())
			}
		}
	}
}

// Close forgets the buckets; js and its connection stay open (they are the
// caller's).
func (k *store) Close() error {
	k.mu.Lock()
	k.buckets = map[string]jetstream.KeyValue{}
	k.mu.Unlock()
	return nil
}
