package authserver

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Stubs so the package builds while the endpoints are written; each
// owner replaces its stubs in its own file and deletes them from here.

func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) { notBuilt(w) }
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) { notBuilt(w) }
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request)    { notBuilt(w) }
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request)   { notBuilt(w) }

func notBuilt(w http.ResponseWriter) { http.Error(w, "not built yet", http.StatusNotImplemented) }

// issueCode (token.go) turns an approved request, whose Subject is set,
// into a single-use authorization code for req.RedirectURI.
func (s *Server) issueCode(ctx context.Context, req *AuthRequest) (string, error) {
	if req.Subject == nil {
		return "", errors.New("authserver: a code for a request nobody signed in to")
	}
	code := randomToken("bbc_")
	ttl := 2 * time.Minute
	c := Code{ClientID: req.ClientID, RedirectURI: req.RedirectURI, Resource: req.Resource, Scope: req.Scope,
		CodeChallenge: req.CodeChallenge, Subject: *req.Subject, ExpiresAt: s.now().Add(ttl)}
	if _, err := s.createJSON(ctx, bucketCodes, hashSecret(code), c, ttl); err != nil {
		return "", err
	}
	return code, nil
}

// lookupClient (register.go) returns a registered client, or for an
// https client id the Client of its metadata document (cimd.go):
// ErrNotFound when there is none.
func (s *Server) lookupClient(ctx context.Context, clientID string) (*Client, error) {
	var c Client
	if _, err := s.getJSON(ctx, bucketClients, clientID, &c); err != nil {
		return nil, err
	}
	return &c, nil
}
