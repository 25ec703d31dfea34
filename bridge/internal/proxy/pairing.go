package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
)

// Pairing codes (docs/relay.md, "Pairing"): `browserbridge pair` asks the
// proxy, over the bridge's authenticated relay link (pairing_code), for a
// one-time sign-in code bound to the link's user; a person types it on the
// proxy's OAuth sign-in page (field "code"), whose PairingCode check calls
// RedeemPairingCode. Codes are random (80 bits), stored only as an HMAC
// under a key of this process, single use, short-lived, few per user, and
// guessing them is limited per client address and over the whole proxy.
//
// The proxy-wide bound counts failed checks only (pairingGate): a valid code
// cannot be told from a guess before it is checked, so once the bound is
// reached attempts are not refused but wait their turn, and the turns go
// first to the addresses that have failed least (a person typing a fresh
// code has failed not at all; a guesser's addresses fail all the time).
// Guessing stays bounded in total and slowed, and the owner of a code still
// signs in during a flood (docs/limits.md, "Pairing codes", has the
// arithmetic).
//
// On a cluster (Options.Cluster) the relay link and the sign-in page may be
// on different nodes, so the codes live in a JetStream KV bucket,
// prefix+"_pairing" (pairingShared, below), sealed and under an HMAC key
// derived from the deployment's secret, and a code is used up by compare-and-swap, so it works once
// across all nodes. The limits stay each node's own: the per-user cap of
// unused codes and the per-user issue rate (a user's bridge talks to one
// node at a time), the per-address limit and the proxy-wide bound on
// failed checks. With N nodes the bound on guesses is N times
// AttemptsGlobal: still a bound, since each node counts every attempt it is
// sent.

// PairingOptions configure pairing codes. The zero value of each field but
// MCPURL means the default given.
type PairingOptions struct {
	// MCPURL is the proxy's public MCP endpoint (https://…/mcp), where a
	// remote client starts the sign-in the code is typed into; it is sent
	// with each code for `browserbridge pair` to print.
	MCPURL string
	// TTL is how long a code works. Default DefaultPairingTTL.
	TTL time.Duration
	// MaxPerUser caps the unused codes of one user; asking for one more
	// replaces the oldest. Default DefaultPairingPerUser.
	MaxPerUser int
	// IssuePerMinute caps the codes one user may ask for per minute.
	// Default DefaultPairingIssuePerMinute.
	IssuePerMinute int
	// AttemptsPerIP caps the codes tried per minute from one client address
	// (an IPv4 address, an IPv6 /64). Default DefaultPairingAttemptsPerIP.
	AttemptsPerIP int
	// AttemptsGlobal bounds the failed checks per minute over the whole
	// proxy, whatever the addresses: what bounds a guesser with many. Up to
	// it, a code is checked at once; past it, attempts wait for their turn
	// (a token bucket of AttemptsGlobal a minute, as many at once), the
	// addresses that failed least first. A code that works gives its turn
	// back. Default DefaultPairingAttemptsGlobal.
	AttemptsGlobal int
	// MaxWait bounds how long an attempt waits for its turn; one that waited
	// this long is answered with a sentence to try again (429). Default
	// DefaultPairingMaxWait.
	MaxWait time.Duration
	// MaxWaiting bounds the attempts waiting at once. When it is reached,
	// an attempt from an address that failed less than the worst waiting
	// one takes its place (that one is answered as above); otherwise it is
	// answered so itself. Default DefaultPairingMaxWaiting.
	MaxWaiting int
}

// Defaults of PairingOptions. With 80-bit codes, at most 3 live per user,
// and AttemptsGlobal failed checks a minute on each of 16 nodes, a year of
// guessing at the bound finds a live code of a million users' with a
// chance of about 1 in 8,000,000 (docs/limits.md).
const (
	DefaultPairingTTL            = 5 * time.Minute
	DefaultPairingPerUser        = 3
	DefaultPairingIssuePerMinute = 10
	DefaultPairingAttemptsPerIP  = 10
	DefaultPairingAttemptsGlobal = 6000
	DefaultPairingMaxWait        = 30 * time.Second
	DefaultPairingMaxWaiting     = 4096
)

// Why RedeemPairingCode refused a code; each error's text is a sentence
// for the person who typed it.
var (
	ErrPairingUnknown = errors.New("that pairing code is not known here: check it, or run `browserbridge pair` again for a new one")
	ErrPairingExpired = errors.New("that pairing code has expired: run `browserbridge pair` again for a new one")
	ErrPairingUsed    = errors.New("that pairing code was already used, and each works once: run `browserbridge pair` again for a new one")
	// ErrPairingLimited wraps the two rate limits' errors.
	ErrPairingLimited = errors.New("too many pairing codes tried")
	errPairingPerIP   = fmt.Errorf("%w from your network: wait a minute, then try again", ErrPairingLimited)
	errPairingGlobal  = fmt.Errorf("%w on this proxy right now, and yours waited its turn in vain: wait a minute, then try again", ErrPairingLimited)
	errPairingQueued  = fmt.Errorf("%w from your network: %d of its attempts already wait their turn; wait for their answers, then try again", ErrPairingLimited, maxWaitingPerAddress)
	// ErrPairingUnavailable: on a cluster, the codes' store (NATS) did not
	// answer; nothing is wrong with the code.
	ErrPairingUnavailable = errors.New("pairing codes cannot be checked right now (the proxy's shared store does not answer): try again in a minute")
	// errPairingOff: ConfigurePairing was never called.
	errPairingOff = errors.New("this proxy does not hand out pairing codes: its operator has not set up its sign-in page (browserbridge-proxy serve --public-url)")
)

// pairingWindow is the period of the rate limits.
const pairingWindow = time.Minute

// ConfigurePairing turns pairing codes on with the options; until it is
// called, pairing_code is refused and every code is unknown. Call it before
// serving (again later only to change MCPURL: the codes and counts are
// kept).
func (s *Server) ConfigurePairing(opts PairingOptions) {
	s.configureCodes(s.pairing, opts)
}

// configureCodes turns the codes of p on with opts (defaults filled in).
func (s *Server) configureCodes(p *pairing, opts PairingOptions) {
	if opts.TTL <= 0 {
		opts.TTL = DefaultPairingTTL
	}
	if opts.MaxPerUser <= 0 {
		opts.MaxPerUser = DefaultPairingPerUser
	}
	if opts.IssuePerMinute <= 0 {
		opts.IssuePerMinute = DefaultPairingIssuePerMinute
	}
	if opts.AttemptsPerIP <= 0 {
		opts.AttemptsPerIP = DefaultPairingAttemptsPerIP
	}
	if opts.AttemptsGlobal <= 0 {
		opts.AttemptsGlobal = DefaultPairingAttemptsGlobal
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultPairingMaxWait
	}
	if opts.MaxWaiting <= 0 {
		opts.MaxWaiting = DefaultPairingMaxWaiting
	}
	p.mu.Lock()
	if p.perIP == nil || opts.AttemptsPerIP != p.opts.AttemptsPerIP {
		p.perIP = perMinute(opts.AttemptsPerIP, s.opts.Now)
	}
	if p.issued == nil || opts.IssuePerMinute != p.opts.IssuePerMinute {
		p.issued = perMinute(opts.IssuePerMinute, s.opts.Now)
	}
	p.opts, p.on = opts, true
	p.gate.configure(opts.AttemptsGlobal, opts.MaxWaiting, &p.mu, s.opts.Now)
	if c := s.opts.Cluster; c != nil && c.Conn != nil && p.shared == nil {
		p.shared = newPairingShared(c, p.label)
	}
	p.mu.Unlock()
}

// RedeemPairingCode checks a code typed on the sign-in page, from the
// client address clientIP ("" if unknown: such attempts share one count),
// and returns the user it is bound to: the user whose bridge asked for it,
// never anyone else. The code is then used up. Each attempt counts against
// the per-address limit before it is checked, so parallel guesses cannot
// slip past it; then it takes a turn of the proxy-wide bound on failed
// checks (pairingGate), waiting for one if need be, and gives it back if
// the code works. The error is ErrPairingUnknown, ErrPairingExpired,
// ErrPairingUsed, one wrapping ErrPairingLimited, one wrapping
// relaywire.ErrPairingCodeFormat, or, on a cluster whose store does not
// answer, ErrPairingUnavailable.
func (s *Server) RedeemPairingCode(code, clientIP string) (userID string, err error) {
	return s.redeemCode(s.pairing, code, clientIP)
}

// redeemCode is RedeemPairingCode for the codes of p.
func (s *Server) redeemCode(p *pairing, code, clientIP string) (userID string, err error) {
	key := httpguard.ClientKey(clientIP)
	canonical, shared, err := s.admitPairingAttempt(p, code, key, s.opts.Now())
	if err != nil {
		return "", err
	}
	if err := s.pairingTurn(p, key); err != nil {
		return "", err
	}
	userID, err = s.checkPairingCode(p, canonical, shared)
	p.mu.Lock()
	if err == nil || errors.Is(err, ErrPairingUnavailable) {
		p.gate.giveBack(s.opts.Now()) // no guess failed
	} else {
		p.gate.failed(key, s.opts.Now())
	}
	p.mu.Unlock()
	return userID, err
}

// pairingTurn takes a turn of the proxy-wide bound for an attempt from the
// address key: at once if one is free and nobody waits, else in the queue,
// for at most MaxWait.
func (s *Server) pairingTurn(p *pairing, key string) error {
	p.mu.Lock()
	w, err := p.gate.enter(key, s.opts.Now())
	maxWait := p.opts.MaxWait
	p.mu.Unlock()
	if err != nil {
		s.m.refused.With(p.label + "_global_limit").Inc()
		return err
	}
	if w == nil {
		return nil
	}
	s.m.refused.With(p.label + "_queued").Inc()
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case err := <-w.turn:
		if err != nil {
			s.m.refused.With(p.label + "_global_limit").Inc()
		}
		return err
	case <-t.C:
	}
	p.mu.Lock()
	granted := p.gate.leave(w)
	p.mu.Unlock()
	if granted {
		return <-w.turn
	}
	s.m.refused.With(p.label + "_global_limit").Inc()
	return errPairingGlobal
}

// checkPairingCode uses up the code, in this process or in the cluster's
// store, and counts why it failed.
func (s *Server) checkPairingCode(p *pairing, canonical string, shared *pairingShared) (userID string, err error) {
	now := s.opts.Now()
	var h [32]byte
	if shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), pairingStoreTimeout)
		userID, h, err = shared.redeem(ctx, canonical, now)
		cancel()
		if err == nil {
			p.mu.Lock()
			p.forgetUnusedHashLocked(userID, h) // if it was issued here
			p.mu.Unlock()
		}
	} else {
		userID, err = p.redeemLocal(canonical, now)
	}
	switch {
	case errors.Is(err, ErrPairingUnknown):
		s.m.refused.With(p.label + "_unknown").Inc()
	case errors.Is(err, ErrPairingUsed):
		s.m.refused.With(p.label + "_used").Inc()
	case errors.Is(err, ErrPairingExpired):
		s.m.refused.With(p.label + "_expired").Inc()
	case err != nil:
		s.m.refused.With(p.label + "_store").Inc()
		s.log.Error(p.what+" store", "err", err)
		return "", ErrPairingUnavailable
	default:
		s.log.Info(p.what+" redeemed", "user", userID)
		return userID, nil
	}
	return "", err
}

// admitPairingAttempt counts an attempt from the address key against its
// limit and returns the code's canonical form, and the shared store on a
// cluster (nil: codes are in p). What is not a code at all is refused here:
// it can match nothing, so it takes no turn of the proxy-wide bound.
func (s *Server) admitPairingAttempt(p *pairing, code, key string, now time.Time) (string, *pairingShared, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return "", nil, ErrPairingUnknown
	}
	p.sweepLocked(now)
	if !p.perIP.Allow(key) {
		s.m.refused.With(p.label + "_ip_limit").Inc()
		return "", nil, errPairingPerIP
	}
	canonical, err := relaywire.NormalizePairingCode(code)
	if err != nil {
		s.m.refused.With(p.label + "_format").Inc()
		return "", nil, err
	}
	return canonical, p.shared, nil
}

// redeemLocal uses up a code kept in this process.
func (p *pairing) redeemLocal(canonical string, now time.Time) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ent := p.codes[p.hash(canonical)]
	switch {
	case ent == nil:
		return "", ErrPairingUnknown
	case ent.used:
		return "", ErrPairingUsed
	case !now.Before(ent.expires):
		return "", ErrPairingExpired
	}
	ent.used = true
	p.forgetUnusedLocked(ent)
	return ent.user, nil
}

// pairingCode answers an extension's pairing_code with a new code bound to
// its user.
func (h *extHandler) pairingCode(m *relaywire.Message) {
	res, err := h.s.issuePairingCode(h.ext.user.id)
	if err != nil {
		h.c.answer(m.ID, err, "pairing_code")
		return
	}
	h.c.Send(relaywire.AppendResult(nil, m.ID, relaywire.MarshalParams(res)))
}

// issuePairingCode makes a code for the user.
func (s *Server) issuePairingCode(userID string) (relaywire.PairingCodeResult, *relaywire.Error) {
	return s.issueCode(s.pairing, userID)
}

// issueCode makes a code of p for the user.
func (s *Server) issueCode(p *pairing, userID string) (relaywire.PairingCodeResult, *relaywire.Error) {
	now := s.opts.Now()
	opts, shared, rerr := p.admitIssue(userID, now)
	if rerr != nil {
		return relaywire.PairingCodeResult{}, rerr
	}
	var canonical string
	ent := &pairEntry{user: userID, expires: now.Add(opts.TTL)}
	if shared == nil {
		p.mu.Lock()
		canonical = newPairingCode()
		ent.hash = p.hash(canonical)
		for p.codes[ent.hash] != nil { // 2^-80; but a collision must never bind a code to two users
			canonical = newPairingCode()
			ent.hash = p.hash(canonical)
		}
		p.codes[ent.hash] = ent
		p.addUnusedLocked(ent, opts.MaxPerUser)
		p.mu.Unlock()
	} else {
		// The store is asked without the lock: a slow NATS must not hold
		// up redemptions on this node.
		ctx, cancel := context.WithTimeout(context.Background(), pairingStoreTimeout)
		defer cancel()
		var err error
		canonical, ent.hash, err = shared.issue(ctx, userID, now, opts.TTL)
		if err != nil {
			s.log.Error(p.what+" store", "err", err)
			return relaywire.PairingCodeResult{}, relaywire.Errorf(relaywire.CodeInternalError, "%s", ErrPairingUnavailable)
		}
		p.mu.Lock()
		replaced := p.addUnusedLocked(ent, opts.MaxPerUser)
		p.mu.Unlock()
		for _, h := range replaced {
			// A replaced code that stays (NATS failed just now) still
			// expires with its lifetime.
			if err := shared.dropUnused(ctx, h); err != nil {
				s.log.Warn(p.what+" store: dropping a replaced code", "err", err)
			}
		}
	}
	s.log.Info(p.what+" issued", "user", userID, "expires", ent.expires.UTC().Format(time.RFC3339))
	return relaywire.PairingCodeResult{
		Code:       relaywire.FormatPairingCode(canonical),
		ExpiresAt:  ent.expires.UTC().Format(time.RFC3339),
		TTLSeconds: int(opts.TTL / time.Second),
		UserID:     userID,
		MCPURL:     opts.MCPURL,
	}, nil
}

// admitIssue counts a code asked for by the user against its rate, and
// returns the options and the shared store (nil: codes are in p).
func (p *pairing) admitIssue(userID string, now time.Time) (PairingOptions, *pairingShared, *relaywire.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return PairingOptions{}, nil, relaywire.Errorf(relaywire.CodeMethodNotFound, "%s", p.off)
	}
	p.sweepLocked(now)
	if !p.issued.Allow(userID) {
		return PairingOptions{}, nil, relaywire.Errorf(relaywire.CodeRateLimited,
			"too many %ss asked for: at most %d a minute for one user; wait a minute", p.what, p.opts.IssuePerMinute)
	}
	return p.opts, p.shared, nil
}

// addUnusedLocked adds ent to its user's unused codes and replaces the
// oldest beyond max: they are unknown from now on. It returns their
// hashes, for the shared store to drop.
func (p *pairing) addUnusedLocked(ent *pairEntry, max int) [][32]byte {
	unused := append(p.unused[ent.user], ent)
	var replaced [][32]byte
	for len(unused) > max {
		delete(p.codes, unused[0].hash)
		replaced = append(replaced, unused[0].hash)
		unused = unused[1:]
	}
	p.unused[ent.user] = unused
	return replaced
}

// newPairingCode returns PairingCodeLength random symbols of
// relaywire.PairingAlphabet: 80 bits of crypto/rand, 5 to a symbol.
func newPairingCode() string {
	var b [relaywire.PairingCodeBits / 8]byte
	rand.Read(b[:])
	var out [relaywire.PairingCodeLength]byte
	for i := range out {
		bit := 5 * i
		v := uint(b[bit/8])<<8 | uint(byteAt(b[:], bit/8+1))
		out[i] = relaywire.PairingAlphabet[v>>(11-bit%8)&31]
	}
	return string(out[:])
}

func byteAt(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// pairing is the state of one kind of one-time code of a Server: the
// pairing codes of sign-ins, and the enrolment codes of bridges
// (enrol.go), each with its own codes, limits and store.
type pairing struct {
	key   [32]byte // HMAC key: codes are stored as HMAC-SHA-256(key, code)
	what  string   // "pairing code", for logs and sentences
	label string   // "pairing": the metrics' refusal label prefix, the cluster bucket's suffix
	off   error    // why issuing is refused before configureCodes

	mu        sync.Mutex
	on        bool
	opts      PairingOptions
	codes     map[[32]byte]*pairEntry    // live, used and expired codes, by hash
	unused    map[string][]*pairEntry    // each user's unused codes, oldest first
	issued    *httpguard.Limiter[string] // codes asked for, per user
	perIP     *httpguard.Limiter[string] // codes tried, per client address
	gate      pairingGate                // the proxy-wide bound on failed checks
	lastSweep time.Time
	shared    *pairingShared // on a cluster: where the codes are; nil: in codes
}

type pairEntry struct {
	hash    [32]byte
	user    string
	expires time.Time
	used    bool
}

func (p *pairing) hash(canonical string) [32]byte {
	m := hmac.New(sha256.New, p.key[:])
	m.Write([]byte(canonical))
	var h [32]byte
	copy(h[:], m.Sum(nil))
	return h
}

// forgetUnusedLocked takes ent off its user's unused codes.
func (p *pairing) forgetUnusedLocked(ent *pairEntry) {
	list := p.unused[ent.user]
	for i, e := range list {
		if e == ent {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.unused, ent.user)
	} else {
		p.unused[ent.user] = list
	}
}

// forgetUnusedHashLocked takes the code with hash h off user's unused
// codes, if this node issued it.
func (p *pairing) forgetUnusedHashLocked(user string, h [32]byte) {
	for _, e := range p.unused[user] {
		if e.hash == h {
			p.forgetUnusedLocked(e)
			return
		}
	}
}

// sweepLocked, at most once a window, forgets codes expired for longer
// than their lifetime (until then they are kept to tell "expired" or
// "used" from "unknown").
func (p *pairing) sweepLocked(now time.Time) {
	if now.Sub(p.lastSweep) < pairingWindow {
		return
	}
	p.lastSweep = now
	for h, e := range p.codes {
		if now.Sub(e.expires) > p.opts.TTL {
			delete(p.codes, h)
		}
	}
	for u, list := range p.unused {
		kept := list[:0]
		for _, e := range list {
			if now.Before(e.expires) {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(p.unused, u)
		} else {
			p.unused[u] = kept
		}
	}
	p.gate.sweep(now)
}

// pairingMaxKeys bounds the addresses and users each per-minute limit
// keeps; past it, the one seen longest ago starts afresh (the proxy-wide
// bound on failed checks still holds for it).
const pairingMaxKeys = 100_000

// perMinute is a limit of n events a minute per key (bursts of n).
func perMinute(n int, now func() time.Time) *httpguard.Limiter[string] {
	return httpguard.NewLimiter[string](float64(n)/pairingWindow.Seconds(), n, 0, pairingMaxKeys, now)
}

// newPairing returns pairing state that is off until ConfigurePairing: a
// Server holds one from New.
func newPairing() *pairing {
	return newCodes("pairing code", "pairing", errPairingOff)
}

// newCodes returns the state of one kind of code, off until
// configureCodes.
func newCodes(what, label string, off error) *pairing {
	p := &pairing{what: what, label: label, off: off, codes: make(map[[32]byte]*pairEntry), unused: make(map[string][]*pairEntry)}
	rand.Read(p.key[:])
	return p
}

// pairingStoreTimeout bounds each use of the shared store, so a NATS that
// does not answer turns into ErrPairingUnavailable, not a hung sign-in.
const pairingStoreTimeout = 5 * time.Second

// pairingShared keeps the codes of a cluster in a JetStream KV bucket,
// prefix+"_pairing": under the hex HMAC of each code, its user, expiry and
// used flag (pairingRecord), sealed with the cluster's keyring (bound to
// its key: docs/proxy-cluster.md, "Trust"). The HMAC key is derived from
// the deployment's secret (Keyring.PairingKeys): codes are stored under
// the sealing secret's and looked up under each, so a code issued before a
// rotation still works. Entries carry a server-side TTL of two lifetimes,
// so the bucket empties itself; the expiry in the record, on the proxy's
// clock, is what decides.
type pairingShared struct {
	conn     *nats.Conn
	ring     *clusterseal.Keyring
	bucket   string
	replicas int

	mu sync.Mutex // held while connecting to the bucket: one attempt at a time
	kv jetstream.KeyValue
	js jetstream.JetStream
}

// pairingRecord is a code's entry in the store.
type pairingRecord struct {
	User    string    `json:"user"`
	Expires time.Time `json:"expires"`
	// Forget is when the code reads as unknown rather than expired or used
	// (one lifetime after it expires, as in memory).
	Forget time.Time `json:"forget"`
	Used   bool      `json:"used"`
}

// newPairingShared takes the cluster's options with their defaults (New
// set them); the bucket is prefix_label.
func newPairingShared(c *ClusterOptions, label string) *pairingShared {
	return &pairingShared{conn: c.Conn, ring: c.Keyring, bucket: c.Prefix + "_" + label, replicas: c.Replicas}
}

// open returns the bucket, making it on first use; a failure is retried at
// the next call.
func (ps *pairingShared) open(ctx context.Context) (jetstream.KeyValue, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.kv != nil {
		return ps.kv, nil
	}
	if ps.js == nil {
		js, err := jetstream.New(ps.conn)
		if err != nil {
			return nil, err
		}
		ps.js = js
	}
	kv, err := ps.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         ps.bucket,
		Description:    "browserbridge one-time codes (HMACs), shared by the proxy's nodes",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       ps.replicas,
		LimitMarkerTTL: time.Minute, // needed for per-entry TTLs; markers go after a minute
	})
	if err != nil {
		return nil, fmt.Errorf("pairing codes: the JetStream bucket %s: %w", ps.bucket, err)
	}
	ps.kv = kv
	return kv, nil
}

func pairingHash(key []byte, canonical string) [32]byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(canonical))
	var h [32]byte
	copy(h[:], m.Sum(nil))
	return h
}

// sealRecord and openRecord seal a code's record under its key.
func (ps *pairingShared) sealRecord(name string, rec pairingRecord) ([]byte, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return ps.ring.SealValue(ps.bucket+"/"+name, raw), nil
}

func (ps *pairingShared) openRecord(e jetstream.KeyValueEntry) (pairingRecord, error) {
	var rec pairingRecord
	raw, err := ps.ring.OpenValue("pairing", ps.bucket+"/"+e.Key(), e.Value(), e.Created())
	if err != nil {
		return rec, fmt.Errorf("pairing codes: a code's entry does not open with this deployment's secret: %w", err)
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("pairing codes: a code's entry is corrupt: %w", err)
	}
	return rec, nil
}

// issue stores a new code for user, valid for ttl from now.
func (ps *pairingShared) issue(ctx context.Context, user string, now time.Time, ttl time.Duration) (string, [32]byte, error) {
	kv, err := ps.open(ctx)
	if err != nil {
		return "", [32]byte{}, err
	}
	key := ps.ring.PairingKeys()[0]
	for {
		canonical := newPairingCode()
		h := pairingHash(key, canonical)
		name := hex.EncodeToString(h[:])
		rec, err := ps.sealRecord(name, pairingRecord{User: user, Expires: now.Add(ttl), Forget: now.Add(2 * ttl)})
		if err != nil {
			return "", [32]byte{}, err
		}
		_, err = kv.Create(ctx, name, rec, jetstream.KeyTTL(pairingStoreTTL(2*ttl)))
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // 2^-80; but a collision must never bind a code to two users
		}
		if err != nil {
			return "", [32]byte{}, fmt.Errorf("pairing codes: storing a code: %w", err)
		}
		return canonical, h, nil
	}
}

// redeem uses up the code: read, check, then mark it used at the revision
// read, so that of two nodes redeeming it at once exactly one succeeds.
func (ps *pairingShared) redeem(ctx context.Context, canonical string, now time.Time) (string, [32]byte, error) {
	kv, err := ps.open(ctx)
	if err != nil {
		return "", [32]byte{}, err
	}
	// Under each secret's key, the sealing one's first: a code issued by
	// a node that sealed with another secret of the ring is found too.
	var h [32]byte
	var e jetstream.KeyValueEntry
	for i, key := range ps.ring.PairingKeys() {
		hk := pairingHash(key, canonical)
		if i == 0 {
			h = hk
		}
		got, err := kv.Get(ctx, hex.EncodeToString(hk[:]))
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return "", h, fmt.Errorf("pairing codes: reading a code: %w", err)
		}
		h, e = hk, got
		break
	}
	if e == nil {
		return "", h, ErrPairingUnknown
	}
	name := e.Key()
	rec, err := ps.openRecord(e)
	if err != nil {
		return "", h, err
	}
	switch {
	case !now.Before(rec.Forget):
		return "", h, ErrPairingUnknown
	case rec.Used:
		return "", h, ErrPairingUsed
	case !now.Before(rec.Expires):
		return "", h, ErrPairingExpired
	}
	rec.Used = true
	raw, err := ps.sealRecord(name, rec)
	if err != nil {
		return "", h, err
	}
	// kv.Update would drop the entry's TTL (nats.go has none on Update), so
	// the used mark is published to the key's subject with the expected
	// revision, as Update does, and the TTL that is left.
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(e.Revision())}
	if left := rec.Forget.Sub(now); left > 0 {
		opts = append(opts, jetstream.WithMsgTTL(pairingStoreTTL(left)))
	}
	if _, err := ps.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + ps.bucket + "." + name, Data: raw}, opts...); err != nil {
		if pairingCASFailed(err) {
			return "", h, ErrPairingUsed // another node marked it first (or replaced it: then it is gone for good)
		}
		return "", h, fmt.Errorf("pairing codes: using a code: %w", err)
	}
	return rec.User, h, nil
}

// dropUnused deletes a replaced code, unless it was used meanwhile (a used
// code keeps answering "used").
func (ps *pairingShared) dropUnused(ctx context.Context, h [32]byte) error {
	kv, err := ps.open(ctx)
	if err != nil {
		return err
	}
	name := hex.EncodeToString(h[:])
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec, err := ps.openRecord(e); err == nil && rec.Used {
		return nil
	}
	err = kv.Purge(ctx, name, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(time.Minute))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return nil // used meanwhile
	}
	return err
}

// pairingStoreTTL is a server-side TTL for d: whole seconds (the server's unit),
// rounded up, plus one so the server never drops what the record still
// holds live.
func pairingStoreTTL(d time.Duration) time.Duration {
	return (d+time.Second-1)/time.Second*time.Second + time.Second
}

// pairingCASFailed reports a failed compare-and-swap: JetStream's code 10071,
// or 10164 on replicated streams.
func pairingCASFailed(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}
