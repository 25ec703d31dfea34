package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// Pairing codes (docs/relay.md, "Pairing"): `browserbridge pair` asks the
// proxy, over the bridge's authenticated relay link (pairing_code), for a
// one-time sign-in code bound to the link's user; a person types it on the
// proxy's OAuth sign-in page (field "code"), whose PairingCode check calls
// RedeemPairingCode. Codes are random (60 bits), stored only as an HMAC
// under a key of this process, single use, short-lived, few per user, and
// guessing them is limited per client address and over the whole proxy.

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
	// AttemptsGlobal caps the codes tried per minute over the whole proxy,
	// whatever the addresses: what bounds a guesser with many. Default
	// DefaultPairingAttemptsGlobal.
	AttemptsGlobal int
}

// Defaults of PairingOptions. With 60-bit codes, a few per user and
// AttemptsGlobal guesses a minute, a year of guessing at the limit finds a
// code of a million users' with a chance of about 1 in 4,000,000.
const (
	DefaultPairingTTL            = 5 * time.Minute
	DefaultPairingPerUser        = 3
	DefaultPairingIssuePerMinute = 10
	DefaultPairingAttemptsPerIP  = 10
	DefaultPairingAttemptsGlobal = 600
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
	errPairingGlobal  = fmt.Errorf("%w on this proxy right now: wait a minute, then try again", ErrPairingLimited)
	errPairingFormat  = relaywire.ErrPairingCodeFormat
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
	p := s.pairingStore(true)
	p.mu.Lock()
	p.opts, p.on = opts, true
	p.mu.Unlock()
}

// RedeemPairingCode checks a code typed on the sign-in page, from the
// client address clientIP ("" if unknown: such attempts share one count),
// and returns the user it is bound to: the user whose bridge asked for it,
// never anyone else. The code is then used up. Each attempt counts against
// the limits before it is checked, so parallel guesses cannot slip past
// them; the error is ErrPairingUnknown, ErrPairingExpired, ErrPairingUsed,
// one wrapping ErrPairingLimited, or relaywire.ErrPairingCodeFormat.
func (s *Server) RedeemPairingCode(code, clientIP string) (userID string, err error) {
	p := s.pairingStore(false)
	if p == nil {
		return "", ErrPairingUnknown
	}
	now := s.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return "", ErrPairingUnknown
	}
	p.sweepLocked(now)
	// Per address first: one address over its limit must not use up
	// everyone's.
	key := ipKey(clientIP)
	w := p.perIP[key]
	if w == nil {
		w = &window{}
		p.perIP[key] = w
	}
	if !w.allow(now, p.opts.AttemptsPerIP) {
		s.m.refused.With("pairing_ip_limit").Inc()
		return "", errPairingPerIP
	}
	if !p.global.allow(now, p.opts.AttemptsGlobal) {
		s.m.refused.With("pairing_global_limit").Inc()
		return "", errPairingGlobal
	}
	canonical, err := relaywire.NormalizePairingCode(code)
	if err != nil {
		s.m.refused.With("pairing_format").Inc()
		return "", errPairingFormat
	}
	ent := p.codes[p.hash(canonical)]
	switch {
	case ent == nil:
		s.m.refused.With("pairing_unknown").Inc()
		return "", ErrPairingUnknown
	case ent.used:
		s.m.refused.With("pairing_used").Inc()
		return "", ErrPairingUsed
	case !now.Before(ent.expires):
		s.m.refused.With("pairing_expired").Inc()
		return "", ErrPairingExpired
	}
	ent.used = true
	p.forgetUnusedLocked(ent)
	s.log.Info("pairing code redeemed", "user", ent.user)
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
	p := s.pairingStore(false)
	if p == nil {
		return relaywire.PairingCodeResult{}, relaywire.Errorf(relaywire.CodeMethodNotFound, "%s", errPairingOff)
	}
	now := s.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return relaywire.PairingCodeResult{}, relaywire.Errorf(relaywire.CodeMethodNotFound, "%s", errPairingOff)
	}
	p.sweepLocked(now)
	w := p.issued[userID]
	if w == nil {
		w = &window{}
		p.issued[userID] = w
	}
	if !w.allow(now, p.opts.IssuePerMinute) {
		return relaywire.PairingCodeResult{}, relaywire.Errorf(relaywire.CodeRateLimited,
			"too many pairing codes asked for: at most %d a minute for one user; wait a minute", p.opts.IssuePerMinute)
	}
	canonical := newPairingCode()
	h := p.hash(canonical)
	for p.codes[h] != nil { // 2^-60; but a collision must never bind a code to two users
		canonical = newPairingCode()
		h = p.hash(canonical)
	}
	ent := &pairEntry{hash: h, user: userID, expires: now.Add(p.opts.TTL)}
	p.codes[h] = ent
	unused := append(p.unused[userID], ent)
	for len(unused) > p.opts.MaxPerUser {
		delete(p.codes, unused[0].hash) // replaced: unknown from now on
		unused = unused[1:]
	}
	p.unused[userID] = unused
	s.log.Info("pairing code issued", "user", userID, "expires", ent.expires.UTC().Format(time.RFC3339))
	return relaywire.PairingCodeResult{
		Code:       relaywire.FormatPairingCode(canonical),
		ExpiresAt:  ent.expires.UTC().Format(time.RFC3339),
		TTLSeconds: int(p.opts.TTL / time.Second),
		UserID:     userID,
		MCPURL:     p.opts.MCPURL,
	}, nil
}

// newPairingCode returns PairingCodeLength random symbols of
// relaywire.PairingAlphabet: 60 bits of crypto/rand, 5 to a symbol.
func newPairingCode() string {
	var b [8]byte
	rand.Read(b[:])
	v := binary.BigEndian.Uint64(b[:])
	var out [relaywire.PairingCodeLength]byte
	for i := range out {
		out[i] = relaywire.PairingAlphabet[v&31]
		v >>= 5
	}
	return string(out[:])
}

// pairing is the pairing state of one Server.
type pairing struct {
	key [32]byte // HMAC key: codes are stored as HMAC-SHA-256(key, code)

	mu        sync.Mutex
	on        bool
	opts      PairingOptions
	codes     map[[32]byte]*pairEntry // live, used and expired codes, by hash
	unused    map[string][]*pairEntry // each user's unused codes, oldest first
	issued    map[string]*window      // codes asked for, per user
	perIP     map[string]*window      // codes tried, per client address
	global    window                  // codes tried, in all
	lastSweep time.Time
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

// sweepLocked, at most once a window, forgets codes expired for longer
// than their lifetime (until then they are kept to tell "expired" or
// "used" from "unknown") and idle rate-limit windows.
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
	for _, m := range []map[string]*window{p.issued, p.perIP} {
		for k, w := range m {
			if now.Sub(w.start) >= pairingWindow {
				delete(m, k)
			}
		}
	}
}

// window counts events in fixed windows of pairingWindow.
type window struct {
	start time.Time
	n     int
}

// allow counts one event at now and reports whether it is within max for
// its window.
func (w *window) allow(now time.Time, max int) bool {
	if now.Sub(w.start) >= pairingWindow || now.Before(w.start) {
		w.start, w.n = now, 0
	}
	w.n++
	return w.n <= max
}

// ipKey groups client addresses as the listener does: an IPv4 address, an
// IPv6 /64 (one subscriber's); anything unparsable counts as itself.
func ipKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		if ap, err2 := netip.ParseAddrPort(ip); err2 == nil {
			a, err = ap.Addr(), nil
		}
	}
	if err != nil {
		return "?" + ip
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// pairingStores holds each Server's pairing state, keyed weakly so that a
// Server that is dropped (tests make many) takes its state with it. It
// stands in for a field of Server, which lives in server.go.
var pairingStores sync.Map // weak.Pointer[Server] → *pairing

// pairingStore returns s's pairing state, making it if create is set
// (else nil when there is none).
func (s *Server) pairingStore(create bool) *pairing {
	k := weak.Make(s)
	if v, ok := pairingStores.Load(k); ok {
		return v.(*pairing)
	}
	if !create {
		return nil
	}
	p := &pairing{codes: make(map[[32]byte]*pairEntry), unused: make(map[string][]*pairEntry),
		issued: make(map[string]*window), perIP: make(map[string]*window)}
	rand.Read(p.key[:])
	v, loaded := pairingStores.LoadOrStore(k, p)
	if !loaded {
		runtime.AddCleanup(s, func(k weak.Pointer[Server]) { pairingStores.Delete(k) }, k)
	}
	return v.(*pairing)
}
