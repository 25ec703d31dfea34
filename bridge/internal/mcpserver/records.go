package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
)

// Session records let a Streamable HTTP session outlive the bridge process
// (a crash, an upgrade, `install.sh` run again): each live session has a
// small file in the state directory, and a restarted bridge that gets a
// request with a recorded Mcp-Session-Id carries on with the same session,
// the same tab group and the same pinned browser.
//
// A record holds what the SDK needs to resume a session without a new
// initialize (mcp.ServerSessionState) and what the bridge keeps per
// session; never a token, and never the session id itself: the file is
// named and keyed by the id's SHA-256, so reading the records does not
// give anyone a usable session.
//
// Files are 0600 in a 0700 directory, written to a temporary file and
// renamed into place (a crash leaves the old record or the new one, never
// half of one). A record that is corrupt, truncated, of a future version,
// not a regular file (a symlink), or not the user's own is ignored with a
// logged reason; the bridge starts regardless.

// recordVersion is the format of the record files; a record of another
// version is ignored.
const recordVersion = 1

// maxRecordBytes bounds a record file; a larger one is not read.
const maxRecordBytes = 64 << 10

// sessionRecord is the durable part of a Streamable HTTP session.
type sessionRecord struct {
	Version int `json:"version"`
	// IDHash is the hex SHA-256 of the Mcp-Session-Id.
	IDHash string `json:"idHash"`
	// LinkID is the session's part of its link ids (local-<LinkID>:<n>),
	// which the extension keys its tab group on.
	LinkID  string `json:"linkId"`
	Client  string `json:"client"`
	Browser string `json:"browser,omitempty"` // pinned with select_browser
	// Initialize is what the client sent in initialize; Negotiated the
	// protocol version the bridge answered.
	Initialize *mcp.InitializeParams `json:"initialize"`
	Negotiated string                `json:"negotiated"`
	LogLevel   mcp.LoggingLevel      `json:"logLevel,omitempty"`
	Created    time.Time             `json:"created"`
}

// state is the SDK session state the record resumes.
func (r *sessionRecord) state() *mcp.ServerSessionState {
	return &mcp.ServerSessionState{
		InitializeParams: r.Initialize,
		// A client that made requests after initialize has sent
		// notifications/initialized; the SDK wants it non-nil.
		InitializedParams:         &mcp.InitializedParams{},
		NegotiatedProtocolVersion: r.Negotiated,
		LogLevel:                  r.LogLevel,
	}
}

// hashSessionID is the key of a session's record.
func hashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// recordStore keeps the records in one directory. Records are loaded at
// start into memory (they are small and bounded in number), then written
// through on every change.
type recordStore struct {
	dir string // "" keeps nothing
	max int
	ttl time.Duration // a record untouched for this long is stale (the session timeout)
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]*sessionRecord // loaded, not yet resumed: by IDHash
}

// touchEvery is how often a live session's record has its mtime pushed
// forward, so that a restarted bridge can tell recently used records
// from stale ones without a write per call.
const touchEvery = time.Minute

func newRecordStore(dir string, max int, ttl time.Duration, log *slog.Logger) *recordStore {
	return &recordStore{dir: dir, max: max, ttl: ttl, log: log, pending: make(map[string]*sessionRecord)}
}

func (rs *recordStore) path(hash string) string { return filepath.Join(rs.dir, hash+".json") }

// load reads the records a previous bridge left, dropping stale and bad
// ones, and keeps the newest max of them.
func (rs *recordStore) load() {
	if rs.dir == "" {
		return
	}
	if err := ensurePrivateDir(rs.dir); err != nil {
		rs.log.Warn("session records are off", "dir", rs.dir, "error", err)
		rs.dir = ""
		return
	}
	entries, err := os.ReadDir(rs.dir)
	if err != nil {
		rs.log.Warn("reading session records", "dir", rs.dir, "error", err)
		return
	}
	type found struct {
		rec   *sessionRecord
		mtime time.Time
	}
	var recs []found
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(rs.dir, name)
		if atomicfile.IsTemp(name) || strings.HasPrefix(name, ".tmp-") { // .tmp-: the name before atomicfile
			_ = os.Remove(p) // a write that a crash interrupted
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		rec, mtime, err := readRecord(p)
		if err == nil && rec.IDHash+".json" != name {
			err = errors.New("its name does not match its id")
		}
		if err == nil && rs.ttl > 0 && time.Since(mtime) > rs.ttl {
			err = errBadRecord{fmt.Errorf("unused for %s, longer than the session timeout", time.Since(mtime).Round(time.Second))}
		}
		if err != nil {
			rs.log.Warn("ignoring a session record", "file", p, "reason", err)
			if errors.As(err, new(errBadRecord)) {
				_ = os.Remove(p) // it will never be good; a foreign or linked file is left alone
			}
			continue
		}
		recs = append(recs, found{rec, mtime})
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].mtime.After(recs[j].mtime) })
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, f := range recs {
		if rs.max > 0 && i >= rs.max {
			rs.log.Warn("ignoring a session record beyond the session limit", "file", rs.path(f.rec.IDHash), "limit", rs.max)
			_ = os.Remove(rs.path(f.rec.IDHash))
			continue
		}
		rs.pending[f.rec.IDHash] = f.rec
	}
	if len(rs.pending) > 0 {
		rs.log.Info("session records found; their clients can carry on", "sessions", len(rs.pending))
	}
}

// errBadRecord marks a record that will never be good: its content is
// wrong, or it is stale (as opposed to one that is not ours to read).
type errBadRecord struct{ error }

// readRecord reads and checks one record file.
func readRecord(p string) (*sessionRecord, time.Time, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, time.Time{}, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if err := ownedByUs(fi); err != nil {
		return nil, time.Time{}, err
	}
	if fi.Size() > maxRecordBytes {
		return nil, time.Time{}, errBadRecord{fmt.Errorf("%d bytes, more than a record's %d", fi.Size(), maxRecordBytes)}
	}
	f, err := os.OpenFile(p, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, time.Time{}, err
	}
	var rec sessionRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, time.Time{}, errBadRecord{fmt.Errorf("not a valid record: %v", err)}
	}
	switch {
	case rec.Version > recordVersion:
		return nil, time.Time{}, errBadRecord{fmt.Errorf("written by a newer bridge (record version %d, this bridge reads %d)", rec.Version, recordVersion)}
	case rec.Version != recordVersion:
		return nil, time.Time{}, errBadRecord{fmt.Errorf("record version %d is not one this bridge reads", rec.Version)}
	case len(rec.IDHash) != 64 || strings.Trim(rec.IDHash, "0123456789abcdef") != "":
		return nil, time.Time{}, errBadRecord{errors.New("no valid idHash")}
	case !validLinkID(rec.LinkID):
		return nil, time.Time{}, errBadRecord{errors.New("no valid linkId")}
	case rec.Initialize == nil:
		return nil, time.Time{}, errBadRecord{errors.New("no initialize parameters")}
	}
	return &rec, fi.ModTime(), nil
}

// validLinkID accepts the ids newLinkID makes (and nothing that could
// break a link id or a tab group key).
func validLinkID(s string) bool {
	if len(s) < 16 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// take removes and returns the pending record of a session id, if any.
func (rs *recordStore) take(sessionID string) *sessionRecord {
	h := hashSessionID(sessionID)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rec := rs.pending[h]
	if rec != nil {
		delete(rs.pending, h)
	}
	return rec
}

// pendingRecords lists the records not yet resumed (the extension must
// keep their tab groups).
func (rs *recordStore) pendingRecords() []*sessionRecord {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]*sessionRecord, 0, len(rs.pending))
	for _, r := range rs.pending {
		out = append(out, r)
	}
	return out
}

// expire drops pending records older than the session timeout; it returns
// the dropped ones so their tab groups can be released.
func (rs *recordStore) expire(now time.Time) []*sessionRecord {
	if rs.dir == "" || rs.ttl <= 0 {
		return nil
	}
	rs.mu.Lock()
	var gone []*sessionRecord
	for h, r := range rs.pending {
		fi, err := os.Lstat(rs.path(h))
		if err == nil && now.Sub(fi.ModTime()) <= rs.ttl {
			continue
		}
		delete(rs.pending, h)
		gone = append(gone, r)
	}
	rs.mu.Unlock()
	for _, r := range gone {
		_ = os.Remove(rs.path(r.IDHash))
	}
	return gone
}

// save writes a record atomically.
func (rs *recordStore) save(rec *sessionRecord) {
	if rs.dir == "" {
		return
	}
	data, err := json.Marshal(rec)
	if err == nil && len(data) > maxRecordBytes {
		err = fmt.Errorf("%d bytes, more than a record's %d", len(data), maxRecordBytes)
	}
	if err == nil {
		err = atomicfile.WriteFile(rs.path(rec.IDHash), data, 0o600)
	}
	if err != nil {
		rs.log.Warn("saving a session record; this session will not survive a bridge restart", "error", err)
	}
}

// touch pushes a live record's mtime forward (liveSession.touch decides
// when: at most once a touchEvery).
func (rs *recordStore) touch(hash string, now time.Time) {
	if rs.dir == "" {
		return
	}
	_ = os.Chtimes(rs.path(hash), now, now)
}

// remove deletes a record: its session ended.
func (rs *recordStore) remove(hash string) {
	if rs.dir == "" {
		return
	}
	rs.mu.Lock()
	delete(rs.pending, hash)
	rs.mu.Unlock()
	if err := os.Remove(rs.path(hash)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		rs.log.Warn("removing a session record", "error", err)
	}
}

// ensurePrivateDir creates dir 0700 if needed, and refuses one that is a
// symlink or not the user's own.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (%s)", dir, fi.Mode().Type())
	}
	return ownedByUs(fi)
}
