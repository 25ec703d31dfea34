// Package token mints and verifies the proxy's access tokens: compact JWTs
// (RFC 7519) signed with HS256 (a shared secret) or EdDSA (an Ed25519 key),
// carrying the user (sub), what the token is for (kind: "extension" or
// "mcp"), when it was issued (iat) and when it expires (exp).
//
// Verification is strict: the header's alg must be exactly the key's
// algorithm ("none" and every other value are refused before any signature
// work), the signature is compared in constant time, and exp, kind and sub
// are required. Keys are safe for concurrent use.
package token

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Kind says which side of the proxy a token admits.
type Kind string

// Kinds of token.
const (
	KindExtension Kind = "extension"
	KindMCP       Kind = "mcp"
	// KindOperator admits the operator's own requests to a running proxy
	// (`browserbridge-proxy invite`): minted for a minute by whoever holds
	// the secret, never handed to a client, so ParseKind does not name it.
	KindOperator Kind = "operator"
)

// ParseKind returns the Kind named s.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindExtension, KindMCP:
		return k, nil
	}
	return "", fmt.Errorf("token kind %q: want %q or %q", s, KindExtension, KindMCP)
}

// Algorithms.
const (
	AlgHS256 = "HS256"
	AlgEdDSA = "EdDSA"
)

// MinSecretBytes is the shortest HS256 secret accepted.
const MinSecretBytes = 32

// Sentinel errors of Verify; the returned errors wrap them.
var (
	ErrMalformed  = errors.New("malformed token")
	ErrAlgorithm  = errors.New("token algorithm not accepted")
	ErrSignature  = errors.New("token signature is invalid")
	ErrExpired    = errors.New("token expired")
	ErrNotYet     = errors.New("token issued in the future")
	ErrKind       = errors.New("token is for the wrong kind of client")
	ErrClaims     = errors.New("token claims are incomplete")
	ErrVerifyOnly = errors.New("this key can verify tokens but not sign them")
)

// Claims are a token's payload.
type Claims struct {
	Subject  string `json:"sub"`
	Kind     Kind   `json:"kind"`
	IssuedAt int64  `json:"iat"`
	Expires  int64  `json:"exp"`
	// URL is the proxy's WebSocket URL, for MCP clients (spec 001: the
	// connection URL is embedded in the token). Optional.
	URL string `json:"url,omitempty"`
	// ID names this token among the user's, so that it can be revoked
	// alone (a bridge's credential from enrolment). Optional.
	ID string `json:"jti,omitempty"`
}

// Keys signs and verifies tokens with one algorithm.
type Keys struct {
	alg    string
	secret []byte             // HS256
	priv   ed25519.PrivateKey // EdDSA, nil when verify-only
	pub    ed25519.PublicKey  // EdDSA
	// Leeway is the clock skew tolerated for exp and iat. Zero means none.
	Leeway time.Duration
	// older are the keys a rotation keeps verifying (the file's others).
	older []*Keys
}

// NewHS256 returns keys for HS256 with the secret, which must be at least
// MinSecretBytes long.
func NewHS256(secret []byte) (*Keys, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("HS256 secret is %d bytes; at least %d are needed", len(secret), MinSecretBytes)
	}
	return &Keys{alg: AlgHS256, secret: bytes.Clone(secret)}, nil
}

// NewEdDSA returns keys for EdDSA. priv may be nil for verify-only keys;
// pub may be nil when priv is given.
func NewEdDSA(priv ed25519.PrivateKey, pub ed25519.PublicKey) (*Keys, error) {
	if priv != nil {
		if len(priv) != ed25519.PrivateKeySize {
			return nil, errors.New("ed25519 private key has the wrong size")
		}
		pub = priv.Public().(ed25519.PublicKey)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("ed25519 public key missing or of the wrong size")
	}
	return &Keys{alg: AlgEdDSA, priv: priv, pub: pub}, nil
}

// Load reads keys from a file: a PEM "PRIVATE KEY" (PKCS #8 Ed25519) or
// "PUBLIC KEY" (PKIX Ed25519, verify only) selects EdDSA; anything else is
// an HS256 secret, the file's bytes without trailing white space.
//
// During a rotation the file holds several keys, the new one first: PEM
// blocks one after the other, or HS256 secrets separated by a blank line.
// The first signs; any verifies (and a cluster's nodes open what any
// seals: Secrets).
func Load(path string) (*Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the token key: %w", err)
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("token key %s: %w", path, err)
	}
	return k, nil
}

// blankLine separates the HS256 secrets of a rotation.
var blankLine = regexp.MustCompile(`\r?\n[ \t]*\r?\n`)

// Parse is Load for a key file's contents.
func Parse(data []byte) (*Keys, error) {
	var all []*Keys
	if block, _ := pem.Decode(data); block != nil {
		for rest := data; len(bytes.TrimSpace(rest)) > 0; {
			block, next := pem.Decode(rest)
			if block == nil {
				return nil, fmt.Errorf("key %d: text after the PEM blocks that is not a PEM block", len(all)+1)
			}
			k, err := parsePEM(block)
			if err != nil {
				return nil, fmt.Errorf("key %d: %w", len(all)+1, err)
			}
			all, rest = append(all, k), next
		}
	} else {
		for _, part := range blankLine.Split(string(bytes.TrimSpace(data)), -1) {
			k, err := NewHS256([]byte(strings.TrimSpace(part)))
			if err != nil {
				if len(all) > 0 || strings.Contains(string(data), "\n\n") {
					err = fmt.Errorf("secret %d: %w", len(all)+1, err)
				}
				return nil, err
			}
			all = append(all, k)
		}
	}
	all[0].older = all[1:]
	return all[0], nil
}

func parsePEM(block *pem.Block) (*Keys, error) {
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing the private key: %w", err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("private key is %T; only Ed25519 is supported", k)
		}
		return NewEdDSA(priv, nil)
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing the public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key is %T; only Ed25519 is supported", k)
		}
		return NewEdDSA(nil, pub)
	default:
		return nil, fmt.Errorf("PEM block %q: want PRIVATE KEY or PUBLIC KEY (Ed25519)", block.Type)
	}
}

// ErrNoSecret: a verify-only key (an Ed25519 PUBLIC KEY) has no secret to
// derive a cluster's keys from.
var ErrNoSecret = errors.New("a PUBLIC KEY holds no secret: a cluster's nodes seal their traffic with keys derived from the secret, so give each node the PRIVATE KEY or an HS256 secret")

// Secrets returns the secret of each key, the signing one's first: an
// HS256 secret, an Ed25519 private key's seed. A proxy cluster derives the
// keys that seal its traffic from them (clusterseal).
func (k *Keys) Secrets() ([][]byte, error) {
	var out [][]byte
	for _, key := range append([]*Keys{k}, k.older...) {
		switch {
		case key.alg == AlgHS256:
			out = append(out, bytes.Clone(key.secret))
		case key.priv != nil:
			out = append(out, bytes.Clone(key.priv.Seed()))
		default:
			return nil, ErrNoSecret
		}
	}
	return out, nil
}

// Alg returns the algorithm, AlgHS256 or AlgEdDSA.
func (k *Keys) Alg() string { return k.alg }

var b64 = base64.RawURLEncoding

// Mint signs c.
func (k *Keys) Mint(c Claims) (string, error) {
	if k.alg == AlgEdDSA && k.priv == nil {
		return "", ErrVerifyOnly
	}
	if c.Subject == "" {
		return "", fmt.Errorf("%w: sub is empty", ErrClaims)
	}
	if _, err := ParseKind(string(c.Kind)); err != nil && c.Kind != KindOperator {
		return "", err
	}
	header, _ := json.Marshal(struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}{k.alg, "JWT"})
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encoding claims: %w", err)
	}
	signing := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	return signing + "." + b64.EncodeToString(k.sign([]byte(signing))), nil
}

// MintFor is Mint for a user and kind, issued now and valid for ttl.
func (k *Keys) MintFor(user string, kind Kind, ttl time.Duration, now time.Time) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("token lifetime %v must be positive", ttl)
	}
	return k.Mint(Claims{Subject: user, Kind: kind, IssuedAt: now.Unix(), Expires: now.Add(ttl).Unix()})
}

func (k *Keys) sign(signing []byte) []byte {
	if k.alg == AlgHS256 {
		m := hmac.New(sha256.New, k.secret)
		m.Write(signing)
		return m.Sum(nil)
	}
	return ed25519.Sign(k.priv, signing)
}

// Verify checks tok's algorithm, signature, expiry and kind at time now and
// returns its claims. Errors wrap the sentinel errors above and say why in a
// sentence fit for a close reason.
func (k *Keys) Verify(tok string, want Kind, now time.Time) (*Claims, error) {
	pb, err := k.verifySignature(tok)
	for _, o := range k.older {
		if !errors.Is(err, ErrSignature) && !errors.Is(err, ErrAlgorithm) {
			break
		}
		pb, err = o.verifySignature(tok)
	}
	if err != nil {
		return nil, err
	}
	var c Claims
	if err := json.Unmarshal(pb, &c); err != nil {
		return nil, fmt.Errorf("%w: payload is not a claims object", ErrMalformed)
	}
	switch {
	case c.Subject == "":
		return nil, fmt.Errorf("%w: sub is missing", ErrClaims)
	case c.Expires == 0:
		return nil, fmt.Errorf("%w: exp is missing", ErrClaims)
	case !now.Before(time.Unix(c.Expires, 0).Add(k.Leeway)):
		return nil, fmt.Errorf("%w at %s", ErrExpired, time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
	case c.IssuedAt != 0 && now.Add(k.Leeway).Before(time.Unix(c.IssuedAt, 0)):
		return nil, ErrNotYet
	case c.Kind != want:
		return nil, fmt.Errorf("%w: it is for %q, not %q", ErrKind, c.Kind, want)
	}
	return &c, nil
}

// verifySignature checks that tok is a compact JWS with the keys'
// algorithm and a valid signature, and returns its payload, decoded but
// not parsed.
func (k *Keys) verifySignature(tok string) ([]byte, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: want 3 dot-separated parts, got %d", ErrMalformed, len(parts))
	}
	hb, err := b64.DecodeString(parts[0])
	if err != nil {
		return nil, fmt.Errorf("%w: header is not base64url", ErrMalformed)
	}
	var header struct {
		Alg  string   `json:"alg"`
		Typ  string   `json:"typ"`
		Crit []string `json:"crit"`
	}
	if err := json.Unmarshal(hb, &header); err != nil {
		return nil, fmt.Errorf("%w: header is not JSON", ErrMalformed)
	}
	if header.Alg != k.alg {
		return nil, fmt.Errorf("%w: alg %q, want %q", ErrAlgorithm, header.Alg, k.alg)
	}
	if len(header.Crit) > 0 {
		return nil, fmt.Errorf("%w: unsupported critical header %q", ErrMalformed, header.Crit)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("%w: signature is not base64url", ErrMalformed)
	}
	signing := []byte(tok[:len(parts[0])+1+len(parts[1])])
	switch k.alg {
	case AlgHS256:
		if !hmac.Equal(sig, k.sign(signing)) {
			return nil, ErrSignature
		}
	case AlgEdDSA:
		if len(sig) != ed25519.SignatureSize || !ed25519.Verify(k.pub, signing, sig) {
			return nil, ErrSignature
		}
	}
	pb, err := b64.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("%w: payload is not base64url", ErrMalformed)
	}
	return pb, nil
}

// Unverified returns the claims tok carries without checking its signature
// or times: for a holder of the token to read what it is for (its kind,
// its user, its URL) and say so before using it. Never base a decision
// of trust on them; the proxy's Verify does that.
func Unverified(tok string) (*Claims, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: want 3 dot-separated parts, got %d", ErrMalformed, len(parts))
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("%w: payload is not base64url", ErrMalformed)
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("%w: payload is not JSON", ErrMalformed)
	}
	return &c, nil
}
