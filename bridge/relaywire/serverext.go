package relaywire

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Server extensions and the extension → client path (docs/relay.md,
// "Server extensions" and "Requests to clients"): our additions to spec
// 001, all optional for an extension that does not use them.
//
//	ext → proxy   authenticate's result gains kind ("browser", the default,
//	              or "server"), server (the gateway's name for it) and
//	              replace (take the name over from the bridge that holds it)
//	proxy → ext   server_name_taken {server, reason, holder, replaced}, then
//	              close 1008 (another bridge of the user holds the name, or
//	              took it over)
//	proxy → ext   connection_closed {connection_id, reason}   (to a server extension,
//	              when an MCP connection to it ends)
//	ext → proxy   {"id":"ext:7","method":"sampling/createMessage","requestId":"conn-<c>:4","params":…}
//	              → to the client of that call in flight, id and params unchanged;
//	              or with "connectionId":"conn-<c>" instead → to that connection's client
//	mcp → proxy   {"id":"ext:7","result":…} → to the extension that asked, on that connection only
//	ext → proxy   notifications/… with "connectionId":"conn-<c>" → that connection's client only
//	ext → proxy   pairing_code {} → {code, expires_at, ttl_seconds, user_id, mcp_url?}
//	              (answered by the proxy itself)

// Kinds of extension (AuthenticateResult.Kind, ExtensionInfo.Kind).
const (
	// ExtensionKindBrowser is a browser, or a bridge's relay for one: what
	// every extension of spec 001 is.
	ExtensionKindBrowser = "browser"
	// ExtensionKindServer is one stdio MCP server of a bridge's gateway,
	// registered by the bridge's relay: it speaks MCP itself (initialize,
	// tools/list, tools/call, …) and gets connection_closed.
	ExtensionKindServer = "server"
)

// Methods of our additions.
const (
	// MethodPairingCode (request, extension → proxy, answered by the proxy):
	// PairingCodeParams → PairingCodeResult. A one-time sign-in code bound
	// to the extension's user, for the proxy's OAuth sign-in page.
	MethodPairingCode = "pairing_code"
	// MethodConnectionClosed (notification, proxy → server extension):
	// ConnectionClosedParams. An MCP connection to the extension ended
	// (the client disconnected, left, or the proxy is stopping): the
	// extension ends that client's session.
	MethodConnectionClosed = "connection_closed"
	// MethodSessionEnded (notification, proxy → browser extension):
	// SessionEndedParams. A remote client's session with a key
	// (ClientMeta.Key) that called this browser ended for good (DELETE,
	// the idle timeout, eviction; not a restart of the proxy, after which
	// it may carry on): the browser ends the session of that key, so its
	// tab group goes as a local session's does.
	MethodSessionEnded = "session_ended"
	// MethodServerNameTaken (notification, proxy → server extension):
	// ServerNameTakenParams, sent just before the proxy closes the
	// connection 1008, because another bridge of the user holds the
	// server name (the registration is refused) or has taken it over
	// (Replace). The close frame's reason holds only MaxCloseReason bytes;
	// this carries the whole sentence.
	MethodServerNameTaken = "server_name_taken"
)

// Limits of our additions.
const (
	// MaxServerName is the longest AuthenticateResult.Server, in bytes.
	MaxServerName = 128
	// MaxAsksPerConnection bounds an extension's requests waiting for one
	// client's answer; one more is refused CodeRateLimited.
	MaxAsksPerConnection = 16
)

// Reasons of connection_closed.
const (
	ReasonClientDisconnected = "Client disconnected"
	ReasonClientGone         = "Client closed"
)

// PairingCodeParams are the params of pairing_code: none yet; send {}.
type PairingCodeParams struct{}

// PairingCodeResult is the proxy's answer to pairing_code.
type PairingCodeResult struct {
	// Code is the sign-in code, FormatPairingCode's form
	// ("ABCD-EFGH-JKMN-PQRS"); the sign-in page's field "code" takes it in any
	// case, with or without dashes.
	Code string `json:"code"`
	// ExpiresAt is when the code stops working, RFC 3339 in UTC.
	ExpiresAt string `json:"expires_at"`
	// TTLSeconds is its lifetime from now, for a clock that differs.
	TTLSeconds int `json:"ttl_seconds"`
	// UserID is the user the code signs in as: the extension's.
	UserID string `json:"user_id"`
	// MCPURL is the proxy's public MCP endpoint, where a remote client
	// starts the sign-in; empty when the proxy was not told its URL.
	MCPURL string `json:"mcp_url,omitempty"`
}

// ConnectionClosedParams are the params of connection_closed.
type ConnectionClosedParams struct {
	ConnectionID string `json:"connection_id"`
	Reason       string `json:"reason"`
}

// SessionEndedParams are the params of session_ended.
type SessionEndedParams struct {
	// Key is the session's ClientMeta.Key.
	Key string `json:"key"`
	// Client is its client's name, as ClientMeta.Name.
	Client string `json:"client,omitempty"`
}

// ServerNameTakenParams are the params of server_name_taken.
type ServerNameTakenParams struct {
	// Server is the server name.
	Server string `json:"server"`
	// Reason is a sentence for the person: who holds the name, since
	// when, and what to do.
	Reason string `json:"reason"`
	// Holder is the registration that holds the name now.
	Holder ServerNameHolder `json:"holder"`
	// Replaced is true when this extension held the name and Holder took
	// it over (Replace); false when its own registration was refused.
	Replaced bool `json:"replaced,omitempty"`
}

// ServerNameHolder names the server extension that holds a server name.
type ServerNameHolder struct {
	// Name is its name as it authenticated ("everything (laptop)": the
	// server's and its bridge's).
	Name        string `json:"name"`
	ExtensionID string `json:"extension_id"`
	// Since is when it registered the name (RFC 3339, UTC).
	Since string `json:"since"`
}

// CloseServerNameTaken starts the reason of the close frame that follows
// server_name_taken.
const CloseServerNameTaken = "server name taken: "

// CheckKind checks the kind and server of an authenticate result and
// returns the kind to record (ExtensionKindBrowser for an empty one).
func CheckKind(kind, server string) (string, error) {
	switch kind {
	case "", ExtensionKindBrowser:
		if server != "" {
			return "", fmt.Errorf("server is given only with kind %q", ExtensionKindServer)
		}
		return ExtensionKindBrowser, nil
	case ExtensionKindServer:
		if err := CheckServerName(server); err != nil {
			return "", err
		}
		return ExtensionKindServer, nil
	}
	return "", fmt.Errorf("kind must be %q or %q, not %q", ExtensionKindBrowser, ExtensionKindServer, truncate(kind, 32))
}

// CheckServerName checks a server extension's name: the gateway's name for
// the server, which a proxy may put in a URL path (/servers/{name}/mcp), so
// 1 to MaxServerName bytes of UTF-8 without slashes, white space or
// control characters.
func CheckServerName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("server is required with kind %q: the gateway's name for the server", ExtensionKindServer)
	case len(name) > MaxServerName:
		return fmt.Errorf("server is %d bytes long; the limit is %d", len(name), MaxServerName)
	case !utf8.ValidString(name):
		return fmt.Errorf("server is not valid UTF-8")
	case name == "." || name == "..":
		return fmt.Errorf("server %q is not a name", name)
	}
	for _, r := range name {
		if r == '/' || r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("server %q holds %q: names go into URL paths", truncate(name, 32), r)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// IsExtID reports whether raw is a string id in the extension's namespace
// ("ext:…"): the ids of an extension's requests, and so of the clients'
// replies to them.
func IsExtID(raw json.RawMessage) bool {
	s, ok := IDString(raw)
	return ok && strings.HasPrefix(s, PrefixExt)
}

// AppendRoutedRequest appends an extension's request to one client: routed
// by requestID (the mapped id of a call in flight, whose client gets it) or,
// when requestID is "", by connectionID (that connection's client). id is
// the extension's own, "ext:…".
func AppendRoutedRequest(dst []byte, id, requestID, connectionID, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = AppendString(dst, id)
	dst = appendRoute(dst, requestID, connectionID)
	return appendMethod(dst, method, params)
}

// AppendConnectionNotification appends an extension's notification for the
// client of one connection (Message.ConnectionID).
func AppendConnectionNotification(dst []byte, connectionID, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	dst = appendRoute(dst, "", connectionID)
	return appendMethod(dst, method, params)
}

func appendRoute(dst []byte, requestID, connectionID string) []byte {
	if requestID != "" {
		dst = append(dst, `,"requestId":`...)
		return AppendString(dst, requestID)
	}
	dst = append(dst, `,"connectionId":`...)
	return AppendString(dst, connectionID)
}

// IsControlMethod reports whether method is one of spec 001's control
// methods and notifications, which only the proxy sends or answers.
func IsControlMethod(method string) bool {
	switch method {
	case MethodAuthenticate, MethodAuthenticated, MethodHandshake, MethodListExtensions, MethodConnect,
		MethodDisconnect, MethodStatus, MethodDisconnected, MethodPairingCode, MethodConnectionClosed, MethodServerNameTaken,
		MethodSessionEnded:
		return true
	}
	return false
}
