package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ErrInvalidToken is what Verify's refusals of a token match (errors.Is):
// unknown, expired, revoked, or for another resource. Their text is a
// sentence for the person behind the client. Other errors are the store's.
var ErrInvalidToken = errors.New("invalid access token")

type tokenError struct{ msg string }

func (e *tokenError) Error() string        { return e.msg }
func (e *tokenError) Is(target error) bool { return target == ErrInvalidToken }

// Verify checks a bearer access token for resource (a Resource's URI):
// the Grant, or an error matching ErrInvalidToken whose text a person can
// read (expired, revoked, for another resource, unknown).
func (s *Server) Verify(ctx context.Context, token, resource string) (*Grant, error) {
	if token == "" {
		return nil, &tokenError{"No access token was sent."}
	}
	var a accessEntry
	if _, err := s.getJSON(ctx, bucketAccess, hashSecret(token), &a); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, &tokenError{"The access token is unknown or has expired; refresh it or sign in again."}
		}
		return nil, err
	}
	if !s.now().Before(a.ExpiresAt) {
		return nil, &tokenError{"The access token has expired; refresh it or sign in again."}
	}
	var fam Family
	if _, err := s.getJSON(ctx, bucketFamilies, a.FamilyID, &fam); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, &tokenError{"The access token's sign-in has ended; sign in again."}
		}
		return nil, err
	}
	if fam.Revoked {
		return nil, &tokenError{"The access token was revoked; sign in again."}
	}
	if a.Resource != resource {
		// Which other resource is not said: a token is not a way to
		// learn what else this server protects.
		return nil, &tokenError{fmt.Sprintf("This access token was issued for another resource, not %s; sign in to this one.", resource)}
	}
	return &Grant{ClientID: a.ClientID, Subject: a.Subject, Resource: a.Resource, Scopes: strings.Fields(a.Scope),
		ExpiresAt: a.ExpiresAt, FamilyID: a.FamilyID}, nil
}

type grantKey struct{}

// GrantFrom returns the Grant Protect put in ctx, or nil.
func GrantFrom(ctx context.Context) *Grant {
	g, _ := ctx.Value(grantKey{}).(*Grant)
	return g
}

// Protect puts the bearer check for resource in front of next: a request
// without a valid token for resource gets 401 with
// `WWW-Authenticate: Bearer resource_metadata="<metadataURL>", scope="mcp"`
// (and error="invalid_token" when one was sent), and a JSON-RPC error
// body saying why. A token in the URL query is refused (400). The Grant
// is in the request's context (GrantFrom); the Authorization header is
// removed before next sees the request, so the token cannot be passed on
// to anything behind it.
func (s *Server) Protect(resource Resource, metadataURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(status int, errCode, msg string) {
			w.Header().Set("WWW-Authenticate", bearerChallenge(metadataURL, errCode, msg))
			mcphttp.WriteError(w, status, nil, codeRefused, msg)
		}
		if r.URL.Query().Has("access_token") {
			refuse(http.StatusBadRequest, errInvalidRequest,
				"Send the access token in the Authorization header (Bearer); a token in the URL is refused, since URLs end up in logs and browser history.")
			return
		}
		auths := r.Header.Values("Authorization")
		if len(auths) > 1 {
			refuse(http.StatusBadRequest, errInvalidRequest, "Send one Authorization header.")
			return
		}
		var token string
		if len(auths) == 1 {
			scheme, rest, _ := strings.Cut(auths[0], " ")
			if strings.EqualFold(scheme, "Bearer") {
				token = strings.TrimSpace(rest)
			}
		}
		if token == "" {
			refuse(http.StatusUnauthorized, "",
				fmt.Sprintf("This MCP server requires an OAuth access token (Authorization: Bearer <token>); its authorization server is named in %s.", metadataURL))
			return
		}
		g, err := s.Verify(r.Context(), token, resource.URI)
		if err != nil {
			if errors.Is(err, ErrInvalidToken) {
				refuse(http.StatusUnauthorized, "invalid_token", err.Error())
				return
			}
			s.log.Error("authserver: checking an access token", "resource", resource.URI, "err", err)
			w.Header().Set("Retry-After", "5")
			mcphttp.WriteError(w, http.StatusServiceUnavailable, nil, codeRefused,
				"The access token could not be checked just now; try again in a moment.")
			return
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), grantKey{}, g)))
	})
}

// bearerChallenge is an RFC 6750 §3 challenge naming the RFC 9728
// metadata (MCP authorization), with an error when a token was refused.
func bearerChallenge(metadataURL, errCode, desc string) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="`)
	b.WriteString(quotable(metadataURL))
	b.WriteString(`", scope="` + scopeMCP + `"`)
	if errCode != "" {
		b.WriteString(`, error="` + errCode + `", error_description="`)
		b.WriteString(quotable(desc))
		b.WriteString(`"`)
	}
	return b.String()
}

// quotable keeps the characters RFC 6750 §3 allows in a quoted value
// (printable ASCII but '"' and '\').
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
}

// ResourceMetadataHandler serves RFC 9728 protected-resource metadata
// for resource, naming this server as its authorization server. Mount
// it at ResourceMetadataPath of the resource's path.
func (s *Server) ResourceMetadataHandler(resource Resource) http.Handler {
	body, err := json.Marshal(oauthex.ProtectedResourceMetadata{
		Resource:               resource.URI,
		AuthorizationServers:   []string{s.cfg.Issuer},
		ScopesSupported:        []string{scopeMCP},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           resource.Name,
	})
	if err != nil {
		panic("authserver: resource metadata does not encode: " + err.Error()) // strings only
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Public facts; browser-based clients read them cross-origin.
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", metadataCacheControl)
			_, _ = w.Write(body)
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			mcphttp.WriteError(w, http.StatusMethodNotAllowed, nil, codeRefused,
				"This is the resource's OAuth metadata (RFC 9728); read it with GET.")
		}
	})
}
