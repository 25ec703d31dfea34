package mcphttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
)

// A SessionRecord is what a restarted server needs to re-open a
// Streamable HTTP session: the route it was opened on, whom it belongs to
// and the client's initialize params, sent again to the target.
type SessionRecord struct {
	Route string `json:"route"`
	// Owner is the authenticated subject the session was opened for (""
	// when the endpoint authenticates no one): only the same subject
	// re-opens it.
	Owner string          `json:"owner,omitempty"`
	Init  json.RawMessage `json:"init"`
	// Note is the target's own state kept with the session
	// (Session.Remember); absent when it kept none.
	Note json.RawMessage `json:"note,omitempty"`
	// LastUsed is when the session was last used (pushed forward at
	// most once a minute while in use, and at shutdown).
	LastUsed time.Time `json:"lastUsed"`
}

// A SessionStore keeps session records across restarts of a Server
// (Server.Persist). Its methods are safe for concurrent use; an error is
// logged by the Server, whose session then simply does not survive a
// restart.
type SessionStore interface {
	// Put records the sessions (id → record), replacing earlier records.
	Put(recs map[string]SessionRecord) error
	// Get returns the record of session id, if any and not expired.
	Get(id string) (SessionRecord, bool)
	// Delete forgets session id.
	Delete(id string) error
}

// FileStoreOptions configure a FileStore. Zero values are documented.
type FileStoreOptions struct {
	// TTL is how long a record outlives its session's last use: the
	// session timeout. 0 means 30 minutes.
	TTL time.Duration
	// MaxRecords bounds the file: beyond it the least recently used
	// records are dropped. 0 means 4096.
	MaxRecords int
	// MaxInitBytes bounds one record's initialize params and note (a
	// client's params are well under 1 KiB); a session with bigger ones is
	// not recorded. 0 means 16 KiB.
	MaxInitBytes int
	// Logger; nil discards.
	Logger *slog.Logger
}

// A FileStore is a SessionStore in one JSON file, rewritten whole
// (atomically: a temporary file renamed over it, mode 0600) after each
// change, by one writer that coalesces the changes made while it writes.
// Records are keyed by the SHA-256 of the session id, so the file holds
// no session id a reader of it could use. Expired records are dropped
// when read and at each write.
type FileStore struct {
	path string
	opts FileStoreOptions
	log  *slog.Logger

	mu      sync.Mutex
	recs    map[string]SessionRecord // SHA-256 of the id (hex) → record
	dirty   bool
	writing bool
	closed  bool
	idle    *sync.Cond // signalled when a write ends
	lastErr error
}

var _ SessionStore = (*FileStore)(nil)

// storeFile is the file's format.
type storeFile struct {
	Version  int                      `json:"version"`
	Sessions map[string]SessionRecord `json:"sessions"`
}

const storeFileVersion = 1

// OpenFileStore opens the records in path (created at the first write).
// A file that cannot be read is an error; one that is not a session
// records file (corrupt, truncated, another version) is ignored, with a
// logged sentence: the sessions it held end, their clients initialize
// again, and its next write replaces it.
func OpenFileStore(path string, opts FileStoreOptions) (*FileStore, error) {
	if opts.TTL <= 0 {
		opts.TTL = 30 * time.Minute
	}
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = 4096
	}
	if opts.MaxInitBytes <= 0 {
		opts.MaxInitBytes = 16 << 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	st := &FileStore{path: path, opts: opts, log: opts.Logger, recs: map[string]SessionRecord{}}
	st.idle = sync.NewCond(&st.mu)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("reading the session records %s: %w", path, err)
	}
	var f storeFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || f.Version != storeFileVersion {
		why := fmt.Sprintf("version %d, not %d", f.Version, storeFileVersion)
		if err != nil {
			why = err.Error()
		}
		st.log.Warn("the session records file is not readable as one ("+why+"): it is ignored, so the sessions of before the restart end and their clients must initialize again; it is replaced at the next write", "file", path)
		return st, nil
	}
	now := time.Now()
	for k, rec := range f.Sessions {
		if st.live(rec, now) && len(k) == sha256.Size*2 {
			st.recs[k] = rec
		}
	}
	return st, nil
}

func (st *FileStore) live(rec SessionRecord, now time.Time) bool {
	return rec.Route != "" && now.Sub(rec.LastUsed) < st.opts.TTL
}

func hashID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// Put records the sessions and schedules a write.
func (st *FileStore) Put(recs map[string]SessionRecord) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return errors.New("the session records file is closed")
	}
	var tooBig int
	for id, rec := range recs {
		if len(rec.Init)+len(rec.Note) > st.opts.MaxInitBytes {
			tooBig++
			continue
		}
		st.recs[hashID(id)] = rec
	}
	st.changedLocked()
	if tooBig > 0 {
		return fmt.Errorf("%d session(s) not recorded: their initialize params (and note) exceed %d bytes", tooBig, st.opts.MaxInitBytes)
	}
	return st.lastErr
}

// Get returns session id's record unless it expired.
func (st *FileStore) Get(id string) (SessionRecord, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, ok := st.recs[hashID(id)]
	if !ok || !st.live(rec, time.Now()) {
		return SessionRecord{}, false
	}
	return rec, true
}

// Delete forgets session id and schedules a write.
func (st *FileStore) Delete(id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	k := hashID(id)
	if _, ok := st.recs[k]; !ok || st.closed {
		return nil
	}
	delete(st.recs, k)
	st.changedLocked()
	return st.lastErr
}

// changedLocked marks the records changed and starts the writer unless it
// runs (it then writes again when done).
func (st *FileStore) changedLocked() {
	st.dirty = true
	if !st.writing {
		st.writing = true
		go st.writeLoop()
	}
}

// writeLoop writes until nothing changed during the last write.
func (st *FileStore) writeLoop() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.dirty {
		st.dirty = false
		data := st.snapshotLocked()
		st.mu.Unlock()
		err := atomicfile.WriteFile(st.path, data, 0o600)
		st.mu.Lock()
		if err != nil && st.lastErr == nil {
			st.log.Warn("writing the session records; sessions opened now may not survive a restart", "file", st.path, "err", err)
		}
		st.lastErr = err
	}
	st.writing = false
	st.idle.Broadcast()
}

// snapshotLocked drops expired records and those beyond the bound (least
// recently used first) and encodes the rest.
func (st *FileStore) snapshotLocked() []byte {
	now := time.Now()
	for k, rec := range st.recs {
		if !st.live(rec, now) {
			delete(st.recs, k)
		}
	}
	if over := len(st.recs) - st.opts.MaxRecords; over > 0 {
		keys := make([]string, 0, len(st.recs))
		for k := range st.recs {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return st.recs[keys[i]].LastUsed.Before(st.recs[keys[j]].LastUsed) })
		for _, k := range keys[:over] {
			delete(st.recs, k)
		}
	}
	data, _ := json.Marshal(storeFile{Version: storeFileVersion, Sessions: st.recs})
	return data
}

// Flush waits for the writes scheduled so far and returns the last
// write's error.
func (st *FileStore) Flush() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.writing {
		st.idle.Wait()
	}
	return st.lastErr
}

// Close writes what is pending; later changes are refused. It is safe to
// call twice.
func (st *FileStore) Close() error {
	err := st.Flush()
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	return err
}
