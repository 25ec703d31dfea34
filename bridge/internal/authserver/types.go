package authserver

import "time"

// Subject is who signed in, as the authenticator that checked them says.
type Subject struct {
	// ID is stable and unique across methods: "password:owner",
	// "oidc:<issuer>#<sub>", "pair:<user id>".
	ID string `json:"id"`
	// Display is what pages show ("owner", an email).
	Display string `json:"display,omitempty"`
	// Method is "password", "oidc" or "pairing".
	Method string `json:"method"`
}

// Resource is a protected resource (an MCP endpoint) as the embedding
// program describes it to the authorization server.
type Resource struct {
	// URI is the canonical resource identifier (RFC 8707, RFC 9728
	// "resource"): the MCP endpoint URL, e.g.
	// https://mcp.example.com/servers/memory/mcp or
	// https://memory.mcp.example.com/mcp. Tokens are bound to it.
	URI string
	// Name is shown on the consent page ("the MCP server \"memory\"").
	Name string
}

// Client is a registered OAuth client: by RFC 7591 registration, or a
// Client ID Metadata Document whose URL is the client id.
type Client struct {
	ID string `json:"client_id"`
	// SecretHash is the SHA-256 (hex) of the client secret; "" for a
	// public client (token_endpoint_auth_method "none").
	SecretHash              string    `json:"secret_hash,omitempty"`
	Name                    string    `json:"client_name,omitempty"`
	URI                     string    `json:"client_uri,omitempty"`
	RedirectURIs            []string  `json:"redirect_uris"`
	GrantTypes              []string  `json:"grant_types,omitempty"`
	TokenEndpointAuthMethod string    `json:"token_endpoint_auth_method"`
	Scope                   string    `json:"scope,omitempty"`
	CreatedAt               time.Time `json:"created_at"`
	// LastUsedAt moves on every token issued; a registration unused for
	// Config.ClientIdleTTL expires.
	LastUsedAt time.Time `json:"last_used_at"`
	// SignedIn is set when the client obtains its first token. Until then
	// the registration lives Limits.UnusedClientTTL and makes room for
	// new ones (pending.go).
	SignedIn bool `json:"signed_in,omitempty"`
	// Address is where the registration came from (an IPv4 address, an
	// IPv6 /64), for the per-address bounds.
	Address string `json:"address,omitempty"`
	// MetadataDocument is true for a CIMD client (ID is its URL).
	MetadataDocument bool `json:"metadata_document,omitempty"`
}

// AuthRequest is an authorization request between GET /oauth/authorize
// and the consent decision, kept server side under an unguessable id.
type AuthRequest struct {
	ID                  string `json:"id"`
	ClientID            string `json:"client_id"`
	RedirectURI         string `json:"redirect_uri"`
	State               string `json:"state,omitempty"`
	Scope               string `json:"scope,omitempty"`
	Resource            string `json:"resource"`
	CodeChallenge       string `json:"code_challenge"`
	CodeChallengeMethod string `json:"code_challenge_method"`
	// BrowserHash is the SHA-256 of the random value in the browser's
	// request cookie: forms are accepted only from the browser that
	// started the request (CSRF and login CSRF).
	BrowserHash string `json:"browser_hash"`
	// CSRF is the token every form of this request carries.
	CSRF string `json:"csrf"`
	// Subject is set once the person has signed in.
	Subject   *Subject  `json:"subject,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Address is where the request came from, for the per-address bound.
	Address string `json:"address,omitempty"`
	// UpstreamState, UpstreamVerifier and UpstreamNonce belong to the
	// upstream OIDC round trip, when that is how the person signs in.
	UpstreamState    string `json:"upstream_state,omitempty"`
	UpstreamVerifier string `json:"upstream_verifier,omitempty"`
	UpstreamNonce    string `json:"upstream_nonce,omitempty"`
}

// Code is an issued authorization code (stored under its hash, single use).
type Code struct {
	ClientID      string    `json:"client_id"`
	RedirectURI   string    `json:"redirect_uri"`
	Resource      string    `json:"resource"`
	Scope         string    `json:"scope,omitempty"`
	CodeChallenge string    `json:"code_challenge"`
	Subject       Subject   `json:"subject"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// Family is one sign-in's chain of refresh tokens and their access
// tokens; revoking it ends them all.
type Family struct {
	ID        string    `json:"id"`
	ClientID  string    `json:"client_id"`
	Subject   Subject   `json:"subject"`
	Resource  string    `json:"resource"`
	Scope     string    `json:"scope,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Revoked   bool      `json:"revoked,omitempty"`
	// Current is the hash of the one refresh token of this family that
	// may be used; a use of any other one is a reuse.
	Current string `json:"current"`
	// Rotation is the last refresh, kept for its reuse grace (grace.go);
	// nil when the grace is off.
	Rotation *Rotation `json:"rotation,omitempty"`
}

// Rotation is a family's last refresh: the token it replaced and the pair
// it issued, sealed with a key derived from the replaced token, so that
// only that token's holder can open it and the store holds no usable
// token.
type Rotation struct {
	Previous string    `json:"previous"` // hash of the replaced refresh token
	At       time.Time `json:"at"`
	Sealed   []byte    `json:"sealed"`
}

// Grant is what a valid access token stands for: Verify's answer.
type Grant struct {
	ClientID  string
	Subject   Subject
	Resource  string
	Scopes    []string
	ExpiresAt time.Time
	FamilyID  string
}
