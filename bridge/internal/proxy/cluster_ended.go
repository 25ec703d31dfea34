package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Session ends kept for browsers away, cluster-wide (docs/proxy-cluster.md,
// "Per node, cluster-wide"). A browser away when a remote session that
// called it ends may come back on any node (the load balancer picks), so
// its notices are kept in a JetStream bucket, not in one node's memory:
// one entry per browser under USERKEY.EXTKEY (keyed hashes), its value the
// sealed list of notices. A node that authenticates the browser takes the
// entry (a purge at the entry's revision, so that of two takers one gets
// it: no notice is delivered twice); a node that keeps a notice appends to
// the entry at its revision. Bounds: maxEndedPerBrowser notices an entry,
// endedBucketBytes the bucket, endedKeepFor an entry's life. A node's
// memory (sessionend.go) keeps a notice only when the bucket cannot.
const (
	// endedKeepFor is how long a browser's kept notices wait for it: a
	// bridge away longer than that has most likely been restarted with
	// its browser, whose tab groups went with it.
	endedKeepFor = 7 * 24 * time.Hour
	// endedBucketBytes bounds the whole bucket (maxEndedBrowsers browsers
	// of a few kept notices each); past it keeping falls back to memory.
	endedBucketBytes = 16 << 20
	// endedValueBytes bounds one browser's entry (maxEndedPerBrowser
	// notices of a 32-digit key and a client name).
	endedValueBytes = 64 << 10
	// endedTimeout bounds one keep or take on NATS.
	endedTimeout = 5 * time.Second
	// endedRetries bounds the appends lost to another node's write of
	// the same entry at once.
	endedRetries = 4
)

// errEndedFull: the browser's entry holds maxEndedPerBrowser notices.
var errEndedFull = errors.New("too many session ends kept for the browser")

// keptEnded is a browser's entry in the ended bucket. User and Extension
// are checked on reading, besides the seal that binds the value to its
// key, so that no node hands one user's notices to another's browser.
type keptEnded struct {
	User      string                         `json:"user"`
	Extension string                         `json:"extension"`
	Notices   []relaywire.SessionEndedParams `json:"notices"`
}

// endedBucket opens the bucket on first use (and again after a failure:
// it may have been deleted under the node). The zero value is ready.
type endedBucket struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

func (c *clusterNode) endedKV(ctx context.Context) (jetstream.KeyValue, error) {
	b := &c.endedStore
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv != nil {
		return b.kv, nil
	}
	kv, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         c.opts.Prefix + "_ended",
		Description:    "Browser Bridge proxy: session ends kept for browsers away",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       c.opts.Replicas,
		TTL:            endedKeepFor,
		MaxBytes:       endedBucketBytes,
		MaxValueSize:   endedValueBytes,
		LimitMarkerTTL: time.Minute, // purge markers go after a minute
	})
	if err != nil {
		return nil, err
	}
	b.kv = kv
	return kv, nil
}

// endedFailed forgets the bucket's handle after an error other than a
// missing key, so that the next use opens it again.
func (c *clusterNode) endedFailed() {
	c.endedStore.mu.Lock()
	c.endedStore.kv = nil
	c.endedStore.mu.Unlock()
}

// endedKeys are the browser's keys in the bucket: the current secret's
// first, then a rotation's older ones (Keyring.UserKeys).
func (c *clusterNode) endedKeys(user, ext string) []string {
	uks, eks := c.ring.UserKeys(user), c.ring.UserKeys(ext) // NameKey is UserKey
	keys := make([]string, len(uks))
	for i := range uks {
		keys[i] = uks[i] + "." + eks[i]
	}
	return keys
}

// readEnded reads the browser's entry under key: its notices and revision
// (0 when there is none). An entry that does not open, or names another
// user or browser, holds nothing for this one.
func (c *clusterNode) readEnded(ctx context.Context, kv jetstream.KeyValue, key, user, ext string) (keptEnded, uint64, error) {
	rec := keptEnded{User: user, Extension: ext}
	entry, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rec, 0, nil
	}
	if err != nil {
		return rec, 0, err
	}
	var got keptEnded
	if plain, ok := c.openValue("ended", entry); ok && json.Unmarshal(plain, &got) == nil {
		if got.User == user && got.Extension == ext {
			rec = got
		} else {
			c.m.dropped.With("user_mismatch").Inc()
		}
	}
	return rec, entry.Revision(), nil
}

// keepEnded keeps a notice for the user's browser ext in the bucket; false
// when the bucket could not take it (NATS away, the bucket full), and the
// caller keeps it in its memory. A notice over the browser's bound is
// dropped (true: memory would not take it either).
func (c *clusterNode) keepEnded(user, ext string, p relaywire.SessionEndedParams) bool {
	ctx, cancel := context.WithTimeout(context.Background(), endedTimeout)
	defer cancel()
	err := c.appendEnded(ctx, user, ext, p)
	switch {
	case err == nil:
		return true
	case errors.Is(err, errEndedFull):
		c.s.log.Debug("a session's end is not kept for its browser, away: too many kept", "user", user, "extension", ext)
		return true
	default:
		c.s.log.Info("proxy cluster: a session's end for a browser away is kept in this node's memory only", "node", c.opts.Node, "err", err)
		return false
	}
}

func (c *clusterNode) appendEnded(ctx context.Context, user, ext string, p relaywire.SessionEndedParams) error {
	if c.down.Load() {
		return errors.New("the cluster's message bus (NATS) is unreachable")
	}
	kv, err := c.endedKV(ctx)
	if err != nil {
		c.endedFailed()
		return err
	}
	key := c.endedKeys(user, ext)[0]
	for range endedRetries {
		rec, rev, err := c.readEnded(ctx, kv, key, user, ext)
		if err != nil {
			c.endedFailed()
			return err
		}
		for _, q := range rec.Notices {
			if q.Key == p.Key {
				return nil // kept already
			}
		}
		if len(rec.Notices) >= maxEndedPerBrowser {
			return errEndedFull
		}
		rec.Notices = append(rec.Notices, p)
		plain, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		sealed := c.sealValue(kv, key, plain)
		if rev == 0 {
			_, err = kv.Create(ctx, key, sealed)
		} else {
			_, err = kv.Update(ctx, key, sealed, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			c.endedFailed()
			return err
		}
		// Another node wrote the entry meanwhile: read it again.
	}
	return errors.New("the browser's kept session ends changed under every attempt")
}

// takeEnded returns and forgets the notices kept in the bucket for the
// user's browser ext (under the current secret's key and a rotation's
// older ones). Of two nodes taking at once, one gets each entry.
func (c *clusterNode) takeEnded(user, ext string) []relaywire.SessionEndedParams {
	if c.down.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), endedTimeout)
	defer cancel()
	kv, err := c.endedKV(ctx)
	if err != nil {
		c.endedFailed()
		c.s.log.Info("proxy cluster: the session ends kept for a browser could not be read", "node", c.opts.Node, "err", err)
		return nil
	}
	var out []relaywire.SessionEndedParams
	for _, key := range c.endedKeys(user, ext) {
		rec, rev, err := c.readEnded(ctx, kv, key, user, ext)
		if err != nil {
			c.endedFailed()
			c.s.log.Info("proxy cluster: the session ends kept for a browser could not be read", "node", c.opts.Node, "err", err)
			return out
		}
		if rev == 0 {
			continue
		}
		if err := kv.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Minute)); err != nil {
			// Another node took it (the browser's other connection), or
			// NATS failed: that node delivers, or the entry waits.
			continue
		}
		out = append(out, rec.Notices...)
	}
	return out
}

// settleKept closes the gap between keeping a notice and the browser
// coming back: if it authenticated meanwhile, here or on another node, its
// notices are taken and delivered there. A notice passed on from a settle
// is not settled again on arrival, so that two nodes whose views of
// presence differ for a moment do not pass it back and forth.
func (c *clusterNode) settleKept(user, ext string) {
	if e := c.s.localExtension(user, ext); e != nil {
		if e.kind == relaywire.ExtensionKindBrowser {
			for _, p := range c.takeEnded(user, ext) {
				e.c.Send(sessionEndedMsg(p))
			}
		}
		return
	}
	pe, ok := c.lookup(user, ext)
	if !ok || pe.Kind != relaywire.ExtensionKindBrowser {
		return
	}
	for _, p := range c.takeEnded(user, ext) {
		if !c.passEnded(pe.Node, user, ext, p, true) && !c.keepEnded(user, ext, p) && !c.s.ended.add(ext, p) {
			c.s.log.Debug("a session's end is not kept for its browser, away: too many kept", "user", user, "extension", ext)
		}
	}
}

// localExtension is this node's extension ext of user, or nil.
func (s *Server) localExtension(user, ext string) *extension {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.users[user]; u != nil {
		return u.exts[ext]
	}
	return nil
}
