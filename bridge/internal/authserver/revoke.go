package authserver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
)

// handleRevoke is RFC 7009 token revocation. The client authenticates as
// at the token endpoint; a token that is unknown, already dead or
// another client's is answered 200 like any other (§2.2), so the answer
// tells nobody anything about tokens that are not theirs.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	form, oerr := readForm(w, r)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	client, oerr := s.authenticateClient(r, form)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	token := form.Get("token")
	if token == "" {
		writeOAuthError(w, oauthErr(errInvalidRequest, "token is missing: send the access or refresh token to revoke."))
		return
	}
	if err := s.revoke(r.Context(), client, token, form); err != nil {
		s.log.Error("authserver: revoking a token", "client_id", client.ID, "err", err)
		// RFC 7009 §2.2.1: the client may try again later.
		w.Header().Set("Retry-After", "5")
		writeOAuthError(w, &oauthError{status: http.StatusServiceUnavailable, code: errTemporarilyUnavailable,
			description: "The token could not be revoked just now; try again in a moment."})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// revoke ends token if it is client's: a refresh token's whole family, or
// one access token. The hint only orders the look-ups (§2.1: a wrong or
// unknown hint is not an error).
func (s *Server) revoke(ctx context.Context, client *Client, token string, form url.Values) error {
	key := hashSecret(token)
	tries := []func(context.Context, *Client, string) (bool, error){s.revokeAccess, s.revokeRefresh}
	if form.Get("token_type_hint") == "refresh_token" {
		tries[0], tries[1] = tries[1], tries[0]
	}
	for _, try := range tries {
		if found, err := try(ctx, client, key); found || err != nil {
			return err
		}
	}
	return nil
}

// revokeAccess deletes the access token whose hash is key, if client's.
func (s *Server) revokeAccess(ctx context.Context, client *Client, key string) (bool, error) {
	var a accessEntry
	if _, err := s.getJSON(ctx, bucketAccess, key, &a); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if a.ClientID != client.ID {
		return true, nil
	}
	s.log.Info("authserver: access token revoked", "client_id", client.ID, "family", a.FamilyID)
	return true, s.kv.Delete(ctx, bucketAccess, key)
}

// revokeRefresh revokes the family of the refresh token whose hash is
// key, if client's.
func (s *Server) revokeRefresh(ctx context.Context, client *Client, key string) (bool, error) {
	var famID string
	if _, err := s.getJSON(ctx, bucketRefresh, key, &famID); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	var fam Family
	if _, err := s.getJSON(ctx, bucketFamilies, famID, &fam); err != nil {
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		return true, err
	}
	if fam.ClientID != client.ID || fam.Revoked {
		return true, nil
	}
	s.log.Info("authserver: refresh token revoked with its family", "client_id", client.ID, "family", famID)
	return true, s.revokeFamily(ctx, famID)
}
