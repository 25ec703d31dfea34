package token

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	hs, _ := NewHS256([]byte(strings.Repeat("s", 32)))
	other, _ := NewHS256([]byte(strings.Repeat("t", 32)))
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ed, _ := NewEdDSA(priv, nil)
	edPub, _ := NewEdDSA(nil, priv.Public().(ed25519.PublicKey))
	mint := func(k *Keys, c Claims) string {
		s, err := k.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := Claims{Subject: "alice", Kind: KindMCP, IssuedAt: now.Unix(), Expires: now.Add(time.Hour).Unix()}
	b64 := base64.RawURLEncoding.EncodeToString
	tok := mint(hs, good)
	parts := strings.Split(tok, ".")
	for _, tc := range []struct {
		name string
		keys *Keys
		tok  string
		kind Kind
		want error
	}{
		{"HS256 ok", hs, tok, KindMCP, nil},
		{"EdDSA ok", ed, mint(ed, good), KindMCP, nil},
		{"EdDSA verify-only key", edPub, mint(ed, good), KindMCP, nil},
		{"expired", hs, mint(hs, Claims{Subject: "alice", Kind: KindMCP, Expires: now.Unix()}), KindMCP, ErrExpired},
		{"wrong signature", hs, mint(other, good), KindMCP, ErrSignature},
		{"tampered payload", hs, parts[0] + "." + b64([]byte(`{"sub":"bob","kind":"mcp","exp":9999999999}`)) + "." + parts[2], KindMCP, ErrSignature},
		{"wrong kind", hs, tok, KindExtension, ErrKind},
		{"alg none", hs, b64([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".", KindMCP, ErrAlgorithm},
		{"alg HS256 token for EdDSA keys", ed, tok, KindMCP, ErrAlgorithm},
		{"alg EdDSA token for HS256 keys", hs, mint(ed, good), KindMCP, ErrAlgorithm},
		{"alg HS512", hs, b64([]byte(`{"alg":"HS512"}`)) + "." + parts[1] + "." + parts[2], KindMCP, ErrAlgorithm},
		{"two parts", hs, parts[0] + "." + parts[1], KindMCP, ErrMalformed},
		{"no exp", hs, mint(hs, Claims{Subject: "alice", Kind: KindMCP}), KindMCP, ErrClaims},
		{"issued in the future", hs, mint(hs, Claims{Subject: "alice", Kind: KindMCP, IssuedAt: now.Add(time.Hour).Unix(), Expires: now.Add(2 * time.Hour).Unix()}), KindMCP, ErrNotYet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.keys.Verify(tc.tok, tc.kind, now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err == nil && (c.Subject != "alice" || c.Kind != KindMCP) {
				t.Fatalf("claims %+v", c)
			}
		})
	}
	if _, err := edPub.Mint(good); !errors.Is(err, ErrVerifyOnly) {
		t.Fatalf("minting with a public key: %v", err)
	}
	if _, err := NewHS256([]byte("short")); err == nil {
		t.Fatal("short secret accepted")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o600)
		return p
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDer, _ := x509.MarshalPKIXPublicKey(pub)
	for _, tc := range []struct {
		name, path, alg string
		ok              bool
	}{
		{"secret with newline", write("s", []byte(strings.Repeat("k", 40)+"\n")), AlgHS256, true},
		{"short secret", write("short", []byte("abc\n")), "", false},
		{"ed25519 private", write("priv.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), AlgEdDSA, true},
		{"ed25519 public", write("pub.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDer})), AlgEdDSA, true},
		{"other PEM", write("cert.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})), "", false},
		{"missing", filepath.Join(dir, "nope"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Load(tc.path)
			if (err == nil) != tc.ok || err == nil && k.Alg() != tc.alg {
				t.Fatalf("Load: %v %v", k, err)
			}
		})
	}
}

// TestRotation: a file with the new key first and the old after it signs
// with the new and verifies both; Secrets lists both for the cluster.
func TestRotation(t *testing.T) {
	oldS, newS := strings.Repeat("o", 40), strings.Repeat("n", 40)
	now := time.Now()
	mint := func(secret string) string {
		k, err := NewHS256([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := k.MintFor("alice", KindMCP, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	both, err := Parse([]byte(newS + "\n\n" + oldS + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{mint(oldS), mint(newS)} {
		if _, err := both.Verify(tok, KindMCP, now); err != nil {
			t.Fatalf("a token of either secret during the rotation: %v", err)
		}
	}
	signed, err := both.MintFor("alice", KindMCP, time.Hour, now)
	if err != nil || signed != mint(newS) {
		t.Fatalf("the rotation signs with the first secret: %v", err)
	}
	newOnly, _ := Parse([]byte(newS))
	if _, err := newOnly.Verify(mint(oldS), KindMCP, now); !errors.Is(err, ErrSignature) {
		t.Fatalf("the old secret once dropped: %v", err)
	}
	secrets, err := both.Secrets()
	if err != nil || len(secrets) != 2 || string(secrets[0]) != newS || string(secrets[1]) != oldS {
		t.Fatalf("Secrets: %q %v", secrets, err)
	}
	// A secret that wraps over lines (base64 at 64 columns) stays one.
	wrapped, err := Parse([]byte(strings.Repeat("w", 64) + "\n" + strings.Repeat("x", 24) + "\n"))
	if err != nil || len(wrapped.older) != 0 {
		t.Fatalf("a wrapped secret: %v, %d older", err, len(wrapped.older))
	}
	if _, err := Parse([]byte(newS + "\n\nshort\n")); err == nil || !strings.Contains(err.Error(), "secret 2") {
		t.Fatalf("a short second secret: %v", err)
	}
	// Two Ed25519 keys; a PUBLIC KEY has no secret for a cluster.
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	_, p1, _ := ed25519.GenerateKey(rand.Reader)
	pub2, p2, _ := ed25519.GenerateKey(rand.Reader)
	d1, _ := x509.MarshalPKCS8PrivateKey(p1)
	d2, _ := x509.MarshalPKCS8PrivateKey(p2)
	dp, _ := x509.MarshalPKIXPublicKey(pub2)
	ed, err := Parse([]byte(pemOf("PRIVATE KEY", d1) + pemOf("PRIVATE KEY", d2)))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ed.Secrets(); err != nil || len(s) != 2 || string(s[0]) != string(p1.Seed()) {
		t.Fatalf("Ed25519 secrets: %v", err)
	}
	verifyOnly, err := Parse([]byte(pemOf("PUBLIC KEY", dp)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifyOnly.Secrets(); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("a PUBLIC KEY's secrets: %v", err)
	}
	if _, err := Parse([]byte(pemOf("PRIVATE KEY", d1) + "junk")); err == nil {
		t.Fatal("text after the PEM blocks accepted")
	}
}
