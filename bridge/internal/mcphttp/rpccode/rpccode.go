// Package rpccode holds the JSON-RPC 2.0 error codes, and the ones MCP
// servers use from the implementation-defined range -32000…-32099, for
// every JSON-RPC speaker of the bridge: the MCP endpoints (mcpserver, the
// gateway, through mcphttp) and the relay's wire package (relaywire). It
// imports nothing, so that relaywire stays a standard-library leaf.
package rpccode

// The JSON-RPC 2.0 codes.
const (
	ParseError     = -32700 // not JSON
	InvalidRequest = -32600 // not a JSON-RPC 2.0 request, or refused by the transport's rules
	MethodNotFound = -32601
	InvalidParams  = -32602
	InternalError  = -32603
)

// The codes MCP servers answer with from the server range.
const (
	// Unavailable: the server cannot serve the request now (stopping, a
	// limit reached, a backend down); Retry-After says when to try again
	// when the HTTP status is 429 or 503.
	Unavailable = -32000
	// SessionNotFound answers a request of an unknown or ended session
	// (HTTP 404), as the MCP SDKs do: the client initializes a new one.
	SessionNotFound = -32001
)
