package authserver

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"time"
)

// The refresh token's reuse grace (issue 33): rotation makes every refresh
// token single-use, and a second use ends the sign-in (the token may have
// been stolen). But an honest client uses one token twice too: two windows
// or processes of one app holding the same token refresh at once, or a
// client retries a refresh whose answer it lost. Within
// Config.RefreshReuseGrace of a rotation, the same client presenting the
// token that rotation replaced gets the very pair it issued, so both
// holders carry on with one token; later, or from another client, the
// reuse still ends the family (the "reuse interval" or "grace period" of
// the well-known providers).
//
// The store keeps only hashes of tokens, so the pair to send again is kept
// sealed (AES-256-GCM) under a key derived from the replaced token itself:
// whoever can open it holds that token already, and a copy of the store
// alone opens nothing.

// graceSeal is what a Rotation's Sealed holds.
type graceSeal struct {
	Access    string    `json:"access"`
	Refresh   string    `json:"refresh"`
	Scope     string    `json:"scope,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// graceKey derives the sealing key from a refresh token; the store's key
// for the token is its plain SHA-256, so the two never coincide.
func graceKey(token string) []byte {
	sum := sha256.Sum256([]byte("browserbridge refresh grace\x00" + token))
	return sum[:]
}

func graceAEAD(token string) cipher.AEAD {
	block, err := aes.NewCipher(graceKey(token))
	if err != nil {
		panic("authserver: AES-256 with a 32-byte key: " + err.Error())
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("authserver: GCM: " + err.Error())
	}
	return aead
}

// newRotation records a refresh of old (hash oldHash) into resp for the
// grace; nil when the grace is off.
func (s *Server) newRotation(oldHash, old string, resp *tokenResponse) *Rotation {
	if s.cfg.RefreshReuseGrace <= 0 {
		return nil
	}
	now := s.now()
	plain, err := json.Marshal(graceSeal{Access: resp.AccessToken, Refresh: resp.RefreshToken, Scope: resp.Scope,
		ExpiresAt: now.Add(time.Duration(resp.ExpiresIn) * time.Second)})
	if err != nil {
		return nil // strings and a time: cannot fail
	}
	aead := graceAEAD(old)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return &Rotation{Previous: oldHash, At: now, Sealed: aead.Seal(nonce, nonce, plain, []byte(oldHash))}
}

// replayRotation returns the pair fam's last rotation issued, if token is
// the one it replaced, client the family's, and the grace not over; else
// nil.
func (s *Server) replayRotation(fam *Family, client *Client, token string) *tokenResponse {
	r := fam.Rotation
	hash := hashSecret(token)
	if r == nil || r.Previous != hash || fam.ClientID != client.ID || s.cfg.RefreshReuseGrace <= 0 {
		return nil
	}
	now := s.now()
	if now.Before(r.At) || now.Sub(r.At) > s.cfg.RefreshReuseGrace {
		return nil
	}
	aead := graceAEAD(token)
	if len(r.Sealed) < aead.NonceSize() {
		return nil
	}
	plain, err := aead.Open(nil, r.Sealed[:aead.NonceSize()], r.Sealed[aead.NonceSize():], []byte(hash))
	if err != nil {
		return nil
	}
	var g graceSeal
	if json.Unmarshal(plain, &g) != nil || !now.Before(g.ExpiresAt) {
		return nil
	}
	return &tokenResponse{AccessToken: g.Access, TokenType: "Bearer", ExpiresIn: int64(g.ExpiresAt.Sub(now) / time.Second),
		RefreshToken: g.Refresh, Scope: g.Scope}
}
