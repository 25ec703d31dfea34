// Package authserver is the OAuth 2.1 authorization server of the public
// gateway (`browserbridge gateway --public-url`) and of the cloud proxy:
// the MCP authorization spec's profile (2025-03-26, 2025-06-18, 2025-11-25)
// as claude.ai's connectors and the SDK clients use it.
//
// What it serves, under the issuer (the public URL):
//
//	GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
//	POST /oauth/register                           RFC 7591 registration
//	GET  /oauth/authorize                          sign-in page (authorization code + PKCE S256)
//	POST /oauth/signin                             form: request, csrf, password (or code)
//	GET  /oauth/oidc/callback                      return from the upstream OIDC provider
//	POST /oauth/consent                            form: request, csrf, decision=approve|deny
//	POST /oauth/token                              authorization_code, refresh_token
//	POST /oauth/revoke                             RFC 7009
//
// and, for each protected resource (an MCP endpoint URL), its RFC 9728
// metadata (ResourceMetadataHandler) and a bearer check (Protect) whose 401
// names that metadata.
//
// Tokens are opaque random strings; the store keeps only their SHA-256.
// An access token is bound to one resource (RFC 8707): a token for one
// server is refused by every other. Refresh tokens rotate on use; a refresh
// token used twice revokes its whole family (every token of that sign-in),
// unless its own client presents it again within a few seconds of its
// rotation (grace.go), which gets the same new pair.
//
// State lives in a KV (kv.go): an embedded one for one node (memory, or a
// bbolt file that survives restarts); its shape (buckets, create-only puts,
// compare-and-swap updates, per-entry expiry) is JetStream KV's, so a
// cluster moves it to NATS (package jetstreamkv) without touching the
// flows. That store is a package of its own so that the bridge and the
// gateway, which never use NATS, do not link nats.go.
package authserver
