// Package relaywire is the wire format of the cloud relay (spec 001, "MCP
// Proxy Protocol" 1.0): JSON-RPC 2.0 messages over WebSocket between MCP
// clients, the proxy (browserbridge-proxy) and browser extensions (or a
// bridge playing the extension's role). It names the control methods and
// notifications, defines their params and results, the error codes, the id
// mapping and the limits, so that the proxy and its clients share one
// definition. docs/relay.md is the prose version; keep the two in step.
//
// It is a leaf package: it imports only the standard library, and rpccode
// for the JSON-RPC error codes (which imports nothing).
//
// # Protocol flow
//
// Extension side (passive), WebSocket path /extension:
//
//	proxy → ext   {"id":"proxy:1","method":"authenticate","params":{}}
//	ext → proxy   {"id":"proxy:1","result":{"name":"Chrome 141","accessToken":"<JWT kind=extension>"}}
//	proxy → ext   {"method":"authenticated","params":{"user_id":"…","extension_id":"ext-…"}}
//	              (a bad token: close 1008 with the reason instead)
//	proxy → ext   {"id":"conn-<c>:<original id>","method":"…","params":…}   (forwarded)
//	ext → proxy   {"id":"conn-<c>:<original id>","result":…} or "error"
//	proxy → ext   {"method":"status","params":{"connected":true,"peer_count":N,"timestamp":"…"}}
//
// MCP side (active), WebSocket path /mcp:
//
//	mcp → proxy   mcp_handshake {accessToken: <JWT kind=mcp>}   → {authenticated, user_id, mcp_client_id}
//	mcp → proxy   list_extensions {}                            → {extensions: [{id, name, connected}]}
//	mcp → proxy   connect {extension_id}                        → {connection_id, extension_id, extension_name}
//	mcp → proxy   any other method                              → forwarded, the reply comes back with the original id
//	mcp → proxy   disconnect {}                                 → {disconnected: true}
//	proxy → mcp   status {connected, peer_count, timestamp}     (after connect and disconnect)
//	proxy → mcp   disconnected {connection_id, reason}          (the extension left, or the proxy is stopping)
//
// Notifications the proxy routes (our additions; spec 001 gives extensions
// none, see docs/relay.md):
//
//	mcp → proxy → ext   notifications/cancelled {requestId: <the client's id>}
//	                    → {requestId: "conn-<c>:<id>"} if that request is in flight, else dropped
//	ext → proxy → mcp   notifications/progress {progressToken, progress, …} with top-level
//	                    "requestId": "conn-<c>:<id>" → to the client of that request, while it
//	                    is in flight, with requestId removed and params unchanged
//	ext → proxy → mcp   notifications/tools/list_changed → to every client connected to it
//
// Server extensions (one stdio server of a bridge's gateway each), requests
// from extensions to clients (sampling, elicitation, roots) and pairing
// codes are further additions: see serverext.go and pairing.go.
//
// # Ids
//
// The proxy forwards a request with id X from an MCP client whose connection
// is conn-C as id "conn-C:" + the raw JSON text of X, so the number 1 becomes
// "conn-C:1" (as in the spec), the string "1" becomes "conn-C:\"1\"", and
// both come back byte for byte (see MapID, UnmapID). Ids of clients must be
// strings or numbers of at most MaxIDBytes bytes (CheckClientID; a forwarded
// id may be up to MaxWireIDBytes); string ids starting with
// the reserved prefixes "proxy:" and "ext:" are refused.
package relaywire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Version is the version of spec 001 this package implements.
const Version = "1.0"

// WebSocket paths on the proxy.
const (
	PathExtension = "/extension"
	PathMCP       = "/mcp"
	PathHealth    = "/health"
	PathMetrics   = "/metrics"
)

// Control methods and notifications.
const (
	// MethodAuthenticate (request, proxy → extension, id "proxy:N"): the
	// extension answers with AuthenticateResult.
	MethodAuthenticate = "authenticate"
	// MethodAuthenticated (notification, proxy → extension): AuthenticatedParams.
	MethodAuthenticated = "authenticated"
	// MethodHandshake (request, MCP → proxy): HandshakeParams → HandshakeResult.
	MethodHandshake = "mcp_handshake"
	// MethodListExtensions (request, MCP → proxy): {} → ListExtensionsResult.
	MethodListExtensions = "list_extensions"
	// MethodConnect (request, MCP → proxy): ConnectParams → ConnectResult.
	MethodConnect = "connect"
	// MethodDisconnect (request, MCP → proxy): {} → DisconnectResult. Safe to
	// call when not connected.
	MethodDisconnect = "disconnect"
	// MethodStatus (notification, proxy → extension or MCP): StatusParams.
	MethodStatus = "status"
	// MethodDisconnected (notification, proxy → MCP): DisconnectedParams.
	MethodDisconnected = "disconnected"
)

// MCP notifications the proxy routes between clients and extensions.
const (
	// MethodProgress (notification, extension → proxy → MCP client) reports
	// the progress of one forwarded request. The extension sets the
	// top-level Message.RequestID to the request's mapped id and leaves
	// params as MCP defines them (progressToken is the client's own token);
	// the proxy delivers it, RequestID removed and params unchanged, to the
	// client that made the request, and only while it is in flight.
	MethodProgress = "notifications/progress"
	// MethodCancelled (notification, MCP client → proxy → extension):
	// CancelledParams. The client names its own id; the proxy rewrites it to
	// the mapped id and forwards it only if that request of this client is
	// in flight.
	MethodCancelled = "notifications/cancelled"
	// MethodToolsListChanged (notification, extension → proxy → MCP
	// clients): the extension's tools changed. The proxy sends it to every
	// MCP client connected to that extension.
	MethodToolsListChanged = "notifications/tools/list_changed"
	// MethodResourcesListChanged and MethodPromptsListChanged travel like
	// MethodToolsListChanged.
	MethodResourcesListChanged = "notifications/resources/list_changed"
	MethodPromptsListChanged   = "notifications/prompts/list_changed"
)

// Id prefixes.
const (
	// PrefixProxy marks the proxy's own requests ("proxy:1"). Reserved.
	PrefixProxy = "proxy:"
	// PrefixExt marks requests an extension initiates ("ext:1"). Reserved.
	PrefixExt = "ext:"
	// PrefixConnection begins connection ids ("conn-<uuid>") and therefore
	// every mapped id ("conn-<uuid>:<original>").
	PrefixConnection = "conn-"
	// PrefixExtension begins extension ids ("ext-<uuid>").
	PrefixExtension = "ext-"
	// PrefixMCPClient begins MCP client ids ("mcp-<uuid>").
	PrefixMCPClient = "mcp-"
)

// Limits.
const (
	// MaxMessageSize is the default largest message, in bytes, either side
	// may send to the proxy. A larger one is answered with CodeInvalidRequest
	// and skipped without being buffered.
	MaxMessageSize = 16 << 20
	// MaxIDBytes is the largest id (its raw JSON text) a client may use:
	// the proxy refuses a longer one (CheckClientID).
	MaxIDBytes = 256
	// MaxWireIDBytes is the largest id any message may carry (CheckID). A
	// forwarded id is longer than the client's: the connection id, a colon,
	// and the client's id text escaped into a JSON string, where one byte
	// can take six ("<" is written \u003c); 8×MaxIDBytes holds that.
	MaxWireIDBytes = 8 * MaxIDBytes
	// MaxCloseReason is the largest WebSocket close reason (RFC 6455: 125
	// bytes of control frame payload minus the 2-byte code).
	MaxCloseReason = 123
)

// Default rates, in messages per second, with bursts of twice as many.
const (
	// DefaultConnRate limits each connection (MCP client or extension).
	DefaultConnRate = 1000
	// DefaultUserRate limits each user, over all of its MCP clients.
	DefaultUserRate = 5000
	// DefaultStrikes refused messages within one second close the
	// connection: the client is abusive, not unlucky.
	DefaultStrikes = 50
)

// Error codes. The JSON-RPC 2.0 codes (rpccode's, which every MCP endpoint
// of the bridge uses), then the proxy's own in the server range
// -32000…-32099.
const (
	CodeParseError     = rpccode.ParseError     // not JSON
	CodeInvalidRequest = rpccode.InvalidRequest // not a JSON-RPC 2.0 message, bad or reserved id, too large
	CodeMethodNotFound = rpccode.MethodNotFound // a method nobody here serves
	CodeInvalidParams  = rpccode.InvalidParams  // params of a control method are wrong
	CodeInternalError  = rpccode.InternalError  // the proxy failed, or an extension's reply was malformed

	// CodeServerError: authentication failed, extension not found (spec 001).
	CodeServerError = -32000
	// CodeAlreadyConnected: connect while connected (spec 001).
	CodeAlreadyConnected = -32001
	// CodeNotConnected: a forwarded method before connect.
	CodeNotConnected = -32002
	// CodeNotAuthenticated: anything but mcp_handshake before it succeeded.
	CodeNotAuthenticated = -32003
	// CodeRateLimited: the connection's or the user's rate was exceeded.
	CodeRateLimited = -32004
	// CodeExtensionGone: the extension left (or the client disconnected)
	// before it answered the request.
	CodeExtensionGone = -32005
	// CodeDuplicateID: a request reused the id of one still in flight.
	CodeDuplicateID = -32006
	// CodeShuttingDown: the proxy is stopping.
	CodeShuttingDown = -32007
	// CodeNoRoute: an extension's request to a client names no call of
	// this extension in flight (requestId) and no connection to it
	// (connectionId), so nobody could answer it.
	CodeNoRoute = -32008
)

// Messages of errors defined by spec 001, word for word.
const (
	MsgExtensionNotFound = "Extension not found or not accessible"
	MsgAlreadyConnected  = "MCP client already connected to an extension"
	MsgAuthFailed        = "Authentication failed"
	ReasonExtensionGone  = "Extension closed"
	ReasonShuttingDown   = "Proxy shutting down"
)

// TimestampLayout formats StatusParams.Timestamp as in spec 001's example
// ("2025-10-20T21:43:53.163+0200").
const TimestampLayout = "2006-01-02T15:04:05.000-0700"

// AuthenticateResult is an extension's answer to authenticate. Kind and
// Server are our additions (docs/relay.md, "Server extensions"): an
// extension that leaves them out is a browser, as before.
type AuthenticateResult struct {
	Name        string `json:"name"`
	AccessToken string `json:"accessToken"`
	// Kind is ExtensionKindBrowser (the default when empty) or
	// ExtensionKindServer: one stdio MCP server of a bridge's gateway.
	Kind string `json:"kind,omitempty"`
	// Server is the gateway's name for the server (CheckServerName);
	// required with ExtensionKindServer, refused with any other kind.
	Server string `json:"server,omitempty"`
	// Replace, with ExtensionKindServer only, asks to take the server name
	// over from another bridge of the user that holds it: the holder's
	// registration is ended (it is told with server_name_taken). Without
	// it, a name another bridge holds is refused (docs/relay.md, "One
	// holder per server name").
	Replace bool `json:"replace,omitempty"`
}

// AuthenticatedParams are the params of the authenticated notification.
type AuthenticatedParams struct {
	UserID      string `json:"user_id"`
	ExtensionID string `json:"extension_id"`
}

// HandshakeParams are the params of mcp_handshake.
type HandshakeParams struct {
	AccessToken string `json:"accessToken"`
}

// HandshakeResult is the result of mcp_handshake.
type HandshakeResult struct {
	Authenticated bool   `json:"authenticated"`
	UserID        string `json:"user_id"`
	MCPClientID   string `json:"mcp_client_id"`
}

// ExtensionInfo is one entry of list_extensions. Kind and Server are as in
// AuthenticateResult (Kind always set by the proxy, Server only for a
// server).
type ExtensionInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	Kind      string `json:"kind,omitempty"`
	Server    string `json:"server,omitempty"`
}

// ListExtensionsResult is the result of list_extensions; Extensions is never
// null.
type ListExtensionsResult struct {
	Extensions []ExtensionInfo `json:"extensions"`
}

// ConnectParams are the params of connect.
type ConnectParams struct {
	ExtensionID string `json:"extension_id"`
}

// ConnectResult is the result of connect.
type ConnectResult struct {
	ConnectionID  string `json:"connection_id"`
	ExtensionID   string `json:"extension_id"`
	ExtensionName string `json:"extension_name"`
}

// DisconnectResult is the result of disconnect.
type DisconnectResult struct {
	Disconnected bool `json:"disconnected"`
}

// StatusParams are the params of the status notification. To an extension:
// Connected is true and PeerCount is the number of MCP connections to it. To
// an MCP client: whether it is connected to an extension, and how many MCP
// connections that extension has (0 when not connected).
type StatusParams struct {
	Connected bool   `json:"connected"`
	PeerCount int    `json:"peer_count"`
	Timestamp string `json:"timestamp"`
}

// CancelledParams are the params of notifications/cancelled (MCP). Between
// an MCP client and the proxy RequestID is the client's own id; between the
// proxy and the extension, the mapped id (a string).
type CancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason,omitempty"`
}

// DisconnectedParams are the params of the disconnected notification.
type DisconnectedParams struct {
	ConnectionID string `json:"connection_id"`
	Reason       string `json:"reason"`
}

// Error is a JSON-RPC error object. It implements error.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Message is any JSON-RPC 2.0 message: a request (ID and Method), a
// notification (Method, no ID) or a reply (ID and Result or Error). Raw
// fields hold the exact JSON text received; an absent field is nil, a JSON
// null is the four bytes "null". Parse and Decode fill it as json.Unmarshal
// would, but the raw fields alias the parsed bytes.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
	// ConnectionID is spec 001's optional routing field on forwarded
	// requests; the proxy checks and strips it.
	ConnectionID string `json:"connectionId,omitempty"`
	// RequestID is our routing field on notifications from an extension
	// about one request (MethodProgress): that request's mapped id. The
	// proxy checks and strips it.
	RequestID json.RawMessage `json:"requestId,omitempty"`
	// Client is our routing field on requests the proxy forwards from its
	// HTTP sessions: the ClientMeta of the client that made them, which
	// the proxy knows (clientInfo of initialize, the session). The proxy
	// drops any an MCP client sends; it costs no copy of the params.
	Client json.RawMessage `json:"client,omitempty"`
}

// Kind says what a Message is.
type Kind int

// Kinds of Message.
const (
	KindRequest Kind = iota + 1
	KindNotification
	KindReply
)

// IsRequest reports whether m has an id and a method.
func (m *Message) IsRequest() bool { return m.ID != nil && m.Method != "" }

// CheckID returns an error unless raw is a JSON string (valid UTF-8) or
// number of at most MaxWireIDBytes bytes: what any message's id may be.
func CheckID(raw json.RawMessage) *Error {
	switch {
	case len(raw) == 0:
		return Errorf(CodeInvalidRequest, "the id is missing")
	case len(raw) > MaxWireIDBytes:
		return Errorf(CodeInvalidRequest, "the id is %d bytes long; the limit is %d", len(raw), MaxWireIDBytes)
	case raw[0] == '"':
		// encoding/json turns invalid UTF-8 into U+FFFD, so such an id
		// would come back changed, and its reply reach nobody.
		if !utf8.Valid(raw) {
			return Errorf(CodeInvalidRequest, "the id is a string that is not valid UTF-8 (JSON text must be, RFC 8259), so it could not come back unchanged")
		}
		return nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		return nil
	}
	return Errorf(CodeInvalidRequest, "the id must be a string or a number, not %s", raw)
}

// CheckClientID checks what CheckID does not of the id of a request a
// client asks the proxy to forward (an id CheckID passed, as Parse checks
// every request's): that it leaves room for the mapping (MapID), at most
// MaxIDBytes bytes.
func CheckClientID(raw json.RawMessage) *Error {
	if len(raw) > MaxIDBytes {
		return Errorf(CodeInvalidRequest, "the id is %d bytes long; the limit is %d", len(raw), MaxIDBytes)
	}
	return nil
}

// IDString returns the value of a string id and true, or "" and false for a
// number.
func IDString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// IsReservedID reports whether raw is a string id with a reserved prefix
// ("proxy:" or "ext:"), which clients may not use.
func IsReservedID(raw json.RawMessage) bool {
	s, ok := IDString(raw)
	return ok && (strings.HasPrefix(s, PrefixProxy) || strings.HasPrefix(s, PrefixExt))
}

// MapID returns the id the proxy forwards for a client's request: the
// connection id, a colon and the original id's raw JSON text.
func MapID(connectionID string, original json.RawMessage) string {
	return connectionID + ":" + string(original)
}

// UnmapID splits a mapped id into the connection id and the original id's
// raw JSON text. It reports false if mapped is not of the form
// "conn-<c>:<original>"; it does not validate the original (the proxy
// compares mapped ids with the ones it sent).
func UnmapID(mapped string) (connectionID string, original json.RawMessage, ok bool) {
	if !strings.HasPrefix(mapped, PrefixConnection) {
		return "", nil, false
	}
	i := strings.IndexByte(mapped, ':')
	if i < 0 || i == len(mapped)-1 {
		return "", nil, false
	}
	return mapped[:i], json.RawMessage(mapped[i+1:]), true
}

// UnmapIDBytes is UnmapID on the bytes of a mapped id, without allocating:
// the results alias mapped.
func UnmapIDBytes(mapped []byte) (connectionID, original []byte, ok bool) {
	if !bytes.HasPrefix(mapped, []byte(PrefixConnection)) {
		return nil, nil, false
	}
	i := bytes.IndexByte(mapped, ':')
	if i < 0 || i == len(mapped)-1 {
		return nil, nil, false
	}
	return mapped[:i], mapped[i+1:], true
}

// Timestamp formats t for StatusParams.
func Timestamp(t time.Time) string { return t.Format(TimestampLayout) }

// MetaClient is the _meta key of a tools/call that names the remote
// client (our addition, docs/relay.md): ClientMeta. `browserbridge connect`
// sets it on its calls; the proxy names the clients of its HTTP sessions in
// Message.Client instead, which takes precedence. The bridge's relay takes
// it out and names the browser's session after the client.
const MetaClient = "browserbridge/client"

// ClientMeta is the value of MetaClient and of Message.Client.
type ClientMeta struct {
	// Name is the client's clientInfo.name, for tab group titles and the
	// popup; "" when it gave none.
	Name string `json:"name,omitempty"`
	// Key, if set, stays the same for every call of one client session,
	// across the extension's reconnections (a bridge restart), so that the
	// browser keeps the session's tabs: at most MaxClientKeyBytes of
	// [0-9a-z]. It is no secret of the session's (the proxy hashes its
	// session id into it).
	Key string `json:"key,omitempty"`
}

// MaxClientKeyBytes bounds ClientMeta.Key.
const MaxClientKeyBytes = 64

// ValidClientKey reports whether key may be a ClientMeta.Key.
func ValidClientKey(key string) bool {
	if key == "" || len(key) > MaxClientKeyBytes {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}
