package authserver

import (
	"context"
	"errors"
	"net/http"
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
	return "", errors.New("not built yet")
}

// lookupClient (register.go) returns a registered client, or for an
// https client id the Client of its metadata document (cimd.go):
// ErrNotFound when there is none.
func (s *Server) lookupClient(ctx context.Context, clientID string) (*Client, error) {
	return nil, ErrNotFound
}
