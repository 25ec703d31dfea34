// Package clusterseal seals what the nodes of a proxy cluster put on their
// shared NATS (docs/proxy-cluster.md, "Trust"): every message on the
// cluster's subjects and every value in its buckets is encrypted and
// authenticated with keys derived from the deployment's secret, bound to
// its subject or key, and refused when old or seen before. A NATS client
// without the secret can neither read nor forge anything of the cluster,
// even with valid NATS credentials, even on a NATS server it controls.
//
// Keys. A Keyring holds one or more secrets (the first seals, any opens:
// a rotation lists the new and the old). From each, HKDF-SHA256 derives a
// key per use, each under its own label: messages, values, the keyed hash
// of user names in subjects and keys, node-to-node HTTP proofs, pairing
// code hashes and the embedded NATS server's password.
//
// Sealed form (version 1), for messages and values alike:
//
//	0x01 | key id (4) | nonce (24) | XChaCha20-Poly1305(inner) (+16)
//
// The nonce is a random prefix of the keyring's (16 bytes, drawn once) and
// a counter (8): unique for every seal of every node.
//
// inner is the writer's clock (8 bytes, Unix nanoseconds) then, for a
// message, the sender's boot id (8) and sequence number (8), then the
// plaintext. The associated data is "m\x00"+subject for a message and
// "v\x00"+key for a value, so nothing opens under another name.
//
// Replays. A message older or newer than Window by the reader's clock is
// refused, and so is a (boot id, sequence) seen before: each reader keeps,
// per sender boot, the highest sequence and a bitmap of the 1,024 below
// it. A value's writer clock must be within Window of the time the NATS
// server stored it (JetStream's own timestamp): an old value written back
// under its key is refused.
package clusterseal

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// MinSecretBytes is the shortest secret a Keyring takes.
const MinSecretBytes = 32

// DefaultWindow is Keyring.Window's default: how far a sealed message's or
// value's time may be from the reader's (nodes' clocks are assumed to
// agree within seconds).
const DefaultWindow = time.Minute

const (
	version   = 1
	keyIDLen  = 4
	nonceLen  = chacha20poly1305.NonceSizeX
	tagLen    = chacha20poly1305.Overhead
	headerLen = 1 + keyIDLen + nonceLen
	timeLen   = 8
	msgIDLen  = 16 // boot id and sequence
	// Overhead is what sealing adds to a value's bytes.
	Overhead = headerLen + tagLen + timeLen
	// MessageOverhead is what sealing adds to a message's bytes.
	MessageOverhead = Overhead + msgIDLen
	// replayBits is how far below a sender's highest sequence a message may
	// still arrive (NATS keeps one publisher's order, so this only absorbs
	// goroutines racing to publish).
	replayBits = 1024
)

// Why Open refused something: the reason label of the rejection counters.
var (
	ErrMalformed  = errors.New("not a sealed cluster message or value")
	ErrUnknownKey = errors.New("sealed with a key this node does not hold")
	ErrForged     = errors.New("does not open: tampered, moved to another subject or key, or sealed with another secret")
	ErrStale      = errors.New("sealed too long ago (or in the future) to be accepted")
	ErrReplayed   = errors.New("seen before: a replay")
)

// Reason is the short label of one of the errors above ("" for others).
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrUnknownKey):
		return "unknown_key"
	case errors.Is(err, ErrForged):
		return "forged"
	case errors.Is(err, ErrStale):
		return "stale"
	case errors.Is(err, ErrReplayed):
		return "replayed"
	}
	return ""
}

// epoch is the keys derived from one secret.
type epoch struct {
	id       [keyIDLen]byte
	msg, val cipher.AEAD
	user     []byte // HMAC key of user names
	forward  []byte // HMAC key of node-to-node HTTP proofs
	pairing  []byte // HMAC key of pairing codes
	natsUser string
	natsPass string
}

const salt = "browserbridge cluster v1"

func derive(secret []byte, label string, n int) []byte {
	k, err := hkdf.Key(sha256.New, secret, []byte(salt), label, n)
	if err != nil {
		panic("clusterseal: HKDF: " + err.Error()) // only for n beyond 255*32
	}
	return k
}

func newEpoch(secret []byte) (*epoch, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("a cluster secret is %d bytes; at least %d are needed", len(secret), MinSecretBytes)
	}
	e := &epoch{
		user:    derive(secret, "user key", 32),
		forward: derive(secret, "node http proof", 32),
		pairing: derive(secret, "pairing codes", 32),
	}
	copy(e.id[:], derive(secret, "key id", keyIDLen))
	var err error
	if e.msg, err = chacha20poly1305.NewX(derive(secret, "messages", 32)); err != nil {
		return nil, err
	}
	if e.val, err = chacha20poly1305.NewX(derive(secret, "values", 32)); err != nil {
		return nil, err
	}
	e.natsUser = "browserbridge-" + hex.EncodeToString(e.id[:])
	e.natsPass = base64.RawURLEncoding.EncodeToString(derive(secret, "nats password", 24))
	return e, nil
}

// Keyring seals and opens the cluster's messages and values. Its methods
// are safe for concurrent use; Reload swaps its secrets while it is used.
type Keyring struct {
	epochs atomic.Pointer[[]*epoch] // [0] seals; all open

	// Window bounds the age of what Open accepts (DefaultWindow if 0).
	// Set it before use.
	Window time.Duration
	// Now is the clock (time.Now if nil). Set it before use.
	Now func() time.Time

	boot [8]byte
	seq  atomic.Uint64
	// Nonces are this keyring's random prefix and a counter: unique
	// without asking the system for random bytes on every message.
	noncePrefix [nonceLen - 8]byte
	nonces      atomic.Uint64

	replayMu sync.Mutex
	senders  map[[8]byte]*senderWindow

	onReject atomic.Pointer[func(what, reason string)]
}

// senderWindow is what a reader remembers of one sender boot's sequences.
type senderWindow struct {
	top  uint64
	bits [replayBits / 64]uint64 // bit i: top-i seen
	last time.Time
}

// New returns a keyring of secrets, each at least MinSecretBytes long; the
// first seals.
func New(secrets [][]byte) (*Keyring, error) {
	k := &Keyring{senders: map[[8]byte]*senderWindow{}}
	if _, err := rand.Read(k.boot[:]); err != nil {
		return nil, err
	}
	if _, err := rand.Read(k.noncePrefix[:]); err != nil {
		return nil, err
	}
	if err := k.Reload(secrets); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload replaces the secrets (a rotation: the new first, the old after
// it while other nodes may still seal with it).
func (k *Keyring) Reload(secrets [][]byte) error {
	if len(secrets) == 0 {
		return errors.New("no cluster secret")
	}
	eps := make([]*epoch, 0, len(secrets))
	for i, s := range secrets {
		e, err := newEpoch(s)
		if err != nil {
			return fmt.Errorf("secret %d: %w", i+1, err)
		}
		for _, o := range eps {
			if o.id == e.id {
				return fmt.Errorf("secret %d is the same as an earlier one", i+1)
			}
		}
		eps = append(eps, e)
	}
	k.epochs.Store(&eps)
	return nil
}

// KeyIDs names the secrets by their key ids (hex), the sealing one first:
// what a log line may say of them.
func (k *Keyring) KeyIDs() []string {
	eps := *k.epochs.Load()
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = hex.EncodeToString(e.id[:])
	}
	return out
}

// OnReject sets the function told of everything Open refuses: what was
// being opened (a label of the caller's) and the reason (Reason).
func (k *Keyring) OnReject(f func(what, reason string)) { k.onReject.Store(&f) }

func (k *Keyring) reject(what string, err error) error {
	if f := k.onReject.Load(); f != nil {
		(*f)(what, Reason(err))
	}
	return err
}

func (k *Keyring) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *Keyring) window() time.Duration {
	if k.Window > 0 {
		return k.Window
	}
	return DefaultWindow
}

func (k *Keyring) find(id []byte) *epoch {
	for _, e := range *k.epochs.Load() {
		if string(e.id[:]) == string(id) {
			return e
		}
	}
	return nil
}

// seal seals inner, which the caller built at buf[headerLen:] (buf has
// room for the tag), in place, and returns the sealed form.
func (k *Keyring) seal(buf []byte, e *epoch, aead cipher.AEAD, ad []byte) []byte {
	buf[0] = version
	copy(buf[1:], e.id[:])
	nonce := buf[1+keyIDLen : headerLen]
	copy(nonce, k.noncePrefix[:])
	binary.BigEndian.PutUint64(nonce[len(k.noncePrefix):], k.nonces.Add(1))
	return aead.Seal(buf[:headerLen], nonce, buf[headerLen:], ad)
}

func (k *Keyring) open(what string, sealed, ad []byte, pick func(*epoch) cipher.AEAD) ([]byte, error) {
	if len(sealed) < headerLen+tagLen+timeLen || sealed[0] != version {
		return nil, k.reject(what, ErrMalformed)
	}
	e := k.find(sealed[1 : 1+keyIDLen])
	if e == nil {
		return nil, k.reject(what, ErrUnknownKey)
	}
	inner, err := pick(e).Open(nil, sealed[1+keyIDLen:headerLen], sealed[headerLen:], ad)
	if err != nil {
		return nil, k.reject(what, ErrForged)
	}
	return inner, nil
}

func adFor(kind byte, name string) []byte {
	ad := make([]byte, 0, 2+len(name))
	ad = append(ad, kind, 0)
	return append(ad, name...)
}

func (k *Keyring) fresh(t int64, ref time.Time) bool {
	d := ref.Sub(time.Unix(0, t))
	w := k.window()
	return d <= w && d >= -w
}

// SealMessage seals a message for subject: head then body, as one
// plaintext (a caller's few bytes of its own before the message, without
// a copy to join them).
func (k *Keyring) SealMessage(subject string, head, body []byte) []byte {
	e := (*k.epochs.Load())[0]
	n := len(head) + len(body)
	buf := make([]byte, headerLen+timeLen+msgIDLen, MessageOverhead+n)
	inner := buf[headerLen:]
	binary.BigEndian.PutUint64(inner, uint64(k.now().UnixNano()))
	copy(inner[timeLen:], k.boot[:])
	binary.BigEndian.PutUint64(inner[timeLen+8:], k.seq.Add(1))
	buf = append(append(buf, head...), body...)
	return k.seal(buf, e, e.msg, adFor('m', subject))
}

// OpenMessage opens a message that arrived on subject; what labels it for
// the rejection counters. A message is accepted once.
func (k *Keyring) OpenMessage(what, subject string, sealed []byte) ([]byte, error) {
	inner, err := k.open(what, sealed, adFor('m', subject), func(e *epoch) cipher.AEAD { return e.msg })
	if err != nil {
		return nil, err
	}
	if len(inner) < timeLen+msgIDLen {
		return nil, k.reject(what, ErrMalformed)
	}
	now := k.now()
	if !k.fresh(int64(binary.BigEndian.Uint64(inner)), now) {
		return nil, k.reject(what, ErrStale)
	}
	var boot [8]byte
	copy(boot[:], inner[timeLen:])
	if !k.firstSight(boot, binary.BigEndian.Uint64(inner[timeLen+8:]), now) {
		return nil, k.reject(what, ErrReplayed)
	}
	return inner[timeLen+msgIDLen:], nil
}

// firstSight records (boot, seq) and reports whether it is new. A sequence
// more than replayBits below the sender's highest is taken for seen: it
// cannot be told from a replay.
func (k *Keyring) firstSight(boot [8]byte, seq uint64, now time.Time) bool {
	k.replayMu.Lock()
	defer k.replayMu.Unlock()
	w := k.senders[boot]
	if w == nil {
		// A sender silent for twice the window cannot be replayed
		// (its messages are all stale): forget it.
		for b, o := range k.senders {
			if now.Sub(o.last) > 2*k.window() {
				delete(k.senders, b)
			}
		}
		w = &senderWindow{}
		k.senders[boot] = w
	}
	w.last = now
	switch {
	case seq > w.top:
		shift := seq - w.top
		w.top = seq
		shiftLeft(&w.bits, shift)
		w.bits[0] |= 1
		return true
	case w.top-seq >= replayBits:
		return false
	default:
		i := w.top - seq
		word, bit := i/64, uint64(1)<<(i%64)
		if w.bits[word]&bit != 0 {
			return false
		}
		w.bits[word] |= bit
		return true
	}
}

// shiftLeft moves the bitmap n places towards older sequences.
func shiftLeft(bits *[replayBits / 64]uint64, n uint64) {
	if n >= replayBits {
		*bits = [replayBits / 64]uint64{}
		return
	}
	words, rest := int(n/64), n%64
	for i := len(bits) - 1; i >= 0; i-- {
		var v uint64
		if j := i - words; j >= 0 {
			v = bits[j] << rest
			if rest > 0 && j-1 >= 0 {
				v |= bits[j-1] >> (64 - rest)
			}
		}
		bits[i] = v
	}
}

// SealValue seals a bucket value stored under key (the bucket's name and
// the key, as the caller names them: "BUCKET/KEY").
func (k *Keyring) SealValue(key string, plain []byte) []byte {
	e := (*k.epochs.Load())[0]
	buf := make([]byte, headerLen+timeLen, Overhead+len(plain))
	binary.BigEndian.PutUint64(buf[headerLen:], uint64(k.now().UnixNano()))
	buf = append(buf, plain...)
	return k.seal(buf, e, e.val, adFor('v', key))
}

// OpenValue opens a value read from under key, which the NATS server
// stored at stored (JetStream's timestamp of the entry): a value written
// more than Window before or after that is an old one written back.
func (k *Keyring) OpenValue(what, key string, sealed []byte, stored time.Time) ([]byte, error) {
	inner, err := k.open(what, sealed, adFor('v', key), func(e *epoch) cipher.AEAD { return e.val })
	if err != nil {
		return nil, err
	}
	if !k.fresh(int64(binary.BigEndian.Uint64(inner)), stored) {
		return nil, k.reject(what, ErrReplayed)
	}
	return inner[timeLen:], nil
}

// UserKey is the user's part of subjects and bucket keys: a keyed hash
// (HMAC-SHA256, 96 bits in hex) under the sealing secret, so that neither
// the name nor a hash anyone can compute appears on the bus.
func (k *Keyring) UserKey(user string) string {
	return userKey((*k.epochs.Load())[0], user)
}

// NameKey is UserKey for any other name that must not show on the bus
// (an extension's id, a hash of its user and name that would confirm a
// guess of both).
func (k *Keyring) NameKey(name string) string { return k.UserKey(name) }

// IsUserKey reports whether uk is user's key under any of the secrets (a
// node still sealing with the old one during a rotation uses its key).
func (k *Keyring) IsUserKey(uk, user string) bool {
	for _, e := range *k.epochs.Load() {
		if hmac.Equal([]byte(uk), []byte(userKey(e, user))) {
			return true
		}
	}
	return false
}

// UserKeys returns the user's key under every secret, the sealing one's
// first.
func (k *Keyring) UserKeys(user string) []string {
	eps := *k.epochs.Load()
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, userKey(e, user))
	}
	return out
}

func userKey(e *epoch, user string) string {
	m := hmac.New(sha256.New, e.user)
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// PairingKeys returns the HMAC keys of pairing codes, the sealing
// secret's first: codes are stored under the first and looked up under
// each.
func (k *Keyring) PairingKeys() [][]byte {
	eps := *k.epochs.Load()
	out := make([][]byte, len(eps))
	for i, e := range eps {
		out[i] = e.pairing
	}
	return out
}

// NATSUser returns the embedded NATS server's user and password under the
// sealing secret: what a node signs in with.
func (k *Keyring) NATSUser() (user, password string) {
	e := (*k.epochs.Load())[0]
	return e.natsUser, e.natsPass
}

// CheckNATSUser reports whether user and password are those of one of the
// secrets.
func (k *Keyring) CheckNATSUser(user, password string) bool {
	ok := false
	for _, e := range *k.epochs.Load() {
		u := subtle.ConstantTimeCompare([]byte(user), []byte(e.natsUser))
		p := subtle.ConstantTimeCompare([]byte(password), []byte(e.natsPass))
		if u&p == 1 {
			ok = true
		}
	}
	return ok
}

// Node-to-node HTTP proofs: a node that passes a Streamable HTTP request
// to the node holding its session signs it, and the receiver accepts a
// request marked forwarded only with a proof that verifies within Window.
// The proof covers the sending node, the method, the request target, the
// time and the body's SHA-256:
//
//	v1.UNIXMILLIS.KEYID.BASE64URL(HMAC-SHA256)

// ForwardProof returns the proof for a request node passes on.
func (k *Keyring) ForwardProof(node, method, target string, body []byte) string {
	e := (*k.epochs.Load())[0]
	ms := k.now().UnixMilli()
	return "v1." + strconv.FormatInt(ms, 10) + "." + hex.EncodeToString(e.id[:]) + "." +
		base64.RawURLEncoding.EncodeToString(forwardMAC(e, node, method, target, ms, body))
}

// CheckForwardProof verifies a proof of a request said to come from node.
func (k *Keyring) CheckForwardProof(proof, node, method, target string, body []byte) error {
	parts := strings.Split(proof, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return k.reject("http_forward", ErrMalformed)
	}
	ms, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := hex.DecodeString(parts[2])
	mac, err3 := base64.RawURLEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return k.reject("http_forward", ErrMalformed)
	}
	e := k.find(id)
	if e == nil {
		return k.reject("http_forward", ErrUnknownKey)
	}
	if !hmac.Equal(mac, forwardMAC(e, node, method, target, ms, body)) {
		return k.reject("http_forward", ErrForged)
	}
	if !k.fresh(ms*int64(time.Millisecond), k.now()) {
		return k.reject("http_forward", ErrStale)
	}
	return nil
}

func forwardMAC(e *epoch, node, method, target string, ms int64, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, e.forward)
	for _, s := range []string{node, method, target, strconv.FormatInt(ms, 10)} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	m.Write(sum[:])
	return m.Sum(nil)
}
