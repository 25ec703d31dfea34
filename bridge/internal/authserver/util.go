package authserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"
)

// randomToken returns prefix and 32 random bytes, base64url: the form of
// every code, token, request id and CSRF token.
func randomToken(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// hashSecret is the hex SHA-256 the store keeps in place of a secret.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// getJSON reads bucket/key into v: its revision, or ErrNotFound.
func (s *Server) getJSON(ctx context.Context, bucket, key string, v any) (uint64, error) {
	raw, rev, err := s.kv.Get(ctx, bucket, key)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return 0, fmt.Errorf("authserver: %s entry is corrupt: %w", bucket, err)
	}
	return rev, nil
}

// createJSON stores v under bucket/key if the key is free.
func (s *Server) createJSON(ctx context.Context, bucket, key string, v any, ttl time.Duration) (uint64, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	return s.kv.Create(ctx, bucket, key, raw, ttl)
}

// updateJSON replaces bucket/key with v if it is still at revision.
func (s *Server) updateJSON(ctx context.Context, bucket, key string, v any, revision uint64, ttl time.Duration) (uint64, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	return s.kv.Update(ctx, bucket, key, raw, revision, ttl)
}

// isLoopbackHost reports whether host (a URL's Hostname, without port or
// brackets) is this machine: "localhost" or a loopback IP literal.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// echo bounds client-supplied text repeated in an error description.
func echo(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
