package authserver

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Scopes this server knows. Tokens are bound to a resource, not to
// scopes; "mcp" names the one thing a token is for, and
// "offline_access" is advertised so clients that add it only when it is
// (the Go SDK) ask for refresh tokens the standard way. A refresh token
// is issued either way to every client registered for the
// refresh_token grant.
const (
	scopeMCP           = "mcp"
	scopeOfflineAccess = "offline_access"
)

var scopesSupported = []string{scopeMCP, scopeOfflineAccess}

// Endpoint paths under the issuer.
const (
	pathAuthorize = "/oauth/authorize"
	pathToken     = "/oauth/token"
	pathRegister  = "/oauth/register"
	pathRevoke    = "/oauth/revoke"
)

// metadataCacheControl lets clients and proxies keep discovery answers
// for a few minutes: they change only when the server's configuration
// does.
const metadataCacheControl = "public, max-age=300"

// authServerMetadata is RFC 8414 metadata. JWKSURI shadows the SDK
// type's field, whose tag lacks omitempty: this server signs nothing, and
// "jwks_uri": "" would name an empty URL.
type authServerMetadata struct {
	oauthex.AuthServerMeta
	JWKSURI string `json:"jwks_uri,omitempty"`
}

// buildMetadata encodes the server's RFC 8414 document once; only
// configuration goes into it.
func (s *Server) buildMetadata() []byte {
	iss := s.cfg.Issuer
	m := authServerMetadata{AuthServerMeta: oauthex.AuthServerMeta{
		Issuer:                                 iss,
		AuthorizationEndpoint:                  iss + pathAuthorize,
		TokenEndpoint:                          iss + pathToken,
		RegistrationEndpoint:                   iss + pathRegister,
		RevocationEndpoint:                     iss + pathRevoke,
		ScopesSupported:                        scopesSupported,
		ResponseTypesSupported:                 []string{"code"},
		GrantTypesSupported:                    []string{grantAuthorizationCode, grantRefreshToken},
		TokenEndpointAuthMethodsSupported:      []string{authNone, authSecretPost, authSecretBasic},
		RevocationEndpointAuthMethodsSupported: []string{authNone, authSecretPost, authSecretBasic},
		CodeChallengeMethodsSupported:          []string{"S256"},
		// The consent page adds iss to every redirect (RFC 9207); the Go
		// SDK refuses an iss the metadata does not announce.
		AuthorizationResponseIssParameterSupported: true,
		// Announced only once cimd.go has installed its fetcher: a
		// client that uses its URL as client_id must find it honoured.
		ClientIDMetadataDocumentSupported: fetchCIMD != nil,
	}}
	b, err := json.Marshal(m)
	if err != nil {
		panic("authserver: metadata does not encode: " + err.Error()) // strings and bools only
	}
	return b
}

// handleMetadata serves RFC 8414 metadata. It is not served at the OIDC
// discovery path as well: this server issues no ID tokens, so the document
// would lack what OIDC discovery requires (jwks_uri,
// subject_types_supported, id_token_signing_alg_values_supported), and
// MCP clients read the RFC 8414 path first.
func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", metadataCacheControl)
	// Public facts; browser-based clients read them cross-origin.
	h.Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(s.metadata)
}
