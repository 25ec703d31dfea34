// Package protocol names the messages of Browser Bridge's local links and
// defines their payloads. docs/protocol.md is the prose version of this file;
// keep the two in step.
//
// Three parties speak JSON-RPC 2.0 in native-messaging frames: the
// extension, the native host (which pumps frames between the browser's stdio
// and the bridge's socket and adds a few messages of its own) and the bridge.
package protocol

import (
	"fmt"
	"regexp"
)

// Version is the link protocol's version, exchanged in host.attach. It
// changes only when an old host could no longer talk to a new bridge.
const Version = 1

// HostName is the native-messaging host's registered name.
const HostName = "com.browserbridge.host"

// Methods on the links.
const (
	// HostAttach (request, host -> bridge) is the first message on every
	// connection a host opens: who it is and for which extension.
	HostAttach = "host.attach"
	// HostState (notification, host -> extension) tells the extension
	// whether the host can reach the bridge.
	HostState = "host.state"
	// HostLog (notification, host -> bridge) carries one log record of the
	// host into the bridge's log.
	HostLog = "host.log"
	// Hello (request, extension -> bridge) registers a browser after every
	// host.state "connected".
	Hello = "hello"
	// BridgeStatus (request, any local client -> bridge) reports the
	// bridge's state; `browserbridge status` uses it.
	BridgeStatus = "bridge.status"
	// BridgePair (request, any local client -> bridge) asks the cloud
	// proxy, over the bridge's relay, for a one-time sign-in code bound to
	// the relay's user: {} → relaywire.PairingCodeResult. `browserbridge
	// pair` uses it (docs/relay.md, "Pairing").
	BridgePair = "bridge.pair"
	// Ping (request, either way) is answered with an empty result.
	Ping = "ping"
	// SessionEnded (notification, bridge -> extension) says an MCP session
	// is over: {session: "local-<id>", client}.
	SessionEnded = "session.ended"
	// SessionClose (request, extension -> bridge) ends an MCP session, for
	// the popup's disconnect button: {session: "local-<id>"}.
	SessionClose = "session.close"
	// RemoteList (request, bridge -> extension) returns the enabled remote
	// MCP servers: {servers: [{name, title, url, state, message, tools}]}.
	RemoteList = "remote.list"
	// RemoteCall (request, bridge -> extension) calls a remote server's
	// tool with the browser's token: {server, name, arguments, _meta?} →
	// the CallToolResult.
	RemoteCall = "remote.call"
	// RemoteChanged (notification, extension -> bridge): the remote
	// servers, their states or tools changed; the bridge lists them again.
	RemoteChanged = "remote.changed"
	// AuditDecision (notification, extension -> bridge) is one entry of the
	// extension's audit trail: a tool call, whose, on which site, what the
	// person's policy decided (allowed, approved, denied, blocked, paused),
	// its outcome and duration, typed text redacted. The bridge logs it.
	AuditDecision = "audit.decision"
	// RelayStatus (request, extension -> bridge): {} -> RelayStatusResult,
	// the cloud relay as it concerns this browser, for the popup.
	RelayStatus = "relay.status"
)

// AuditEntry is the params of AuditDecision (the fields the bridge logs;
// the extension's entry may carry more, such as the redacted arguments).
type AuditEntry struct {
	At       int64  `json:"at"` // Unix milliseconds
	Client   string `json:"client"`
	Remote   bool   `json:"remote,omitempty"`
	Session  string `json:"session"`
	Tool     string `json:"tool"`
	Site     string `json:"site,omitempty"`
	Decision string `json:"decision,omitempty"`
	Why      string `json:"why,omitempty"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error,omitempty"`
	Ms       int64  `json:"ms"`
}

// Request-id prefixes. Every id on the link is unique among the requests in
// flight in its direction; the prefix says who made the request, so a
// reply can never be mistaken for one to someone else.
const (
	IDPrefixBridge = "bridge:" // the bridge's own requests to the extension
	IDPrefixLocal  = "local-"  // local MCP sessions: "local-<session>:<n>"
	IDPrefixRelay  = "conn-"   // relay clients: "conn-<connection>:<original id>"
	IDPrefixProxy  = "proxy:"  // the cloud proxy's control requests
	IDPrefixExt    = "ext:"    // the extension's requests to the bridge
	IDPrefixHost   = "host:"   // the host's requests to the bridge
)

// Host states carried by host.state.
const (
	StateConnecting     = "connecting"      // looking for the bridge
	StateStartingBridge = "starting_bridge" // no bridge answered; the host started one
	StateConnected      = "connected"       // frames flow; send hello now
	StateDisconnected   = "disconnected"    // the bridge went away; the host retries
	StateBridgeFailed   = "bridge_failed"   // the bridge the host started exited; Failure says why
	StateStopped        = "stopped"         // `browserbridge stop` stopped the bridge; the host does not start one
)

// Kinds of BridgeFailure.
const (
	FailureConfig = "config" // the config file is unreadable or invalid
	FailureListen = "listen" // the HTTP address cannot be listened on (a port taken)
	FailureSocket = "socket" // the socket cannot be served (another bridge holds its lock, a bad directory)
	FailureBinary = "binary" // the bridge binary is missing or would not run
	FailureOther  = "other"  // anything else, or the bridge exited without saying why
)

// EnvStartReport names the file in which `browserbridge serve` writes a
// BridgeFailure (JSON) when it cannot start. The host sets it for the
// bridges it starts, to tell the extension why one did not come up.
const EnvStartReport = "BROWSERBRIDGE_START_REPORT"

// BridgeFailure says why a bridge did not start, and how to fix it, in
// sentences for a person (host.state "bridge_failed").
type BridgeFailure struct {
	// Kind is one of the Failure constants; treat an unknown kind as
	// FailureOther.
	Kind string `json:"kind"`
	// Error is what went wrong, e.g. the config's error naming the key.
	Error string `json:"error"`
	// Fix is what to do about it.
	Fix string `json:"fix"`
	// ConfigFile is the config the bridge read, when it matters.
	ConfigFile string `json:"configFile,omitempty"`
	// Listen is the address the bridge could not listen on (FailureListen).
	Listen string `json:"listen,omitempty"`
	// LogFile is the bridge's log, where more may be said.
	LogFile string `json:"logFile,omitempty"`
}

// HostAttachParams announces a host to the bridge.
type HostAttachParams struct {
	Protocol    int    `json:"protocol"`
	HostVersion string `json:"hostVersion"`
	PID         int    `json:"pid"`
	// Origin is the calling extension, as Chrome passed it in argv[1].
	Origin string `json:"origin"`
}

// HostAttachResult is the bridge's answer to host.attach.
type HostAttachResult struct {
	Protocol      int    `json:"protocol"`
	BridgeVersion string `json:"bridgeVersion"`
	PID           int    `json:"pid"`
}

// HostStateParams is the payload of host.state.
type HostStateParams struct {
	State string `json:"state"`
	// Socket is the bridge socket the host uses.
	Socket        string `json:"socket"`
	BridgeVersion string `json:"bridgeVersion,omitempty"`
	// Error says, for a person, why the host is not connected.
	Error string `json:"error,omitempty"`
	// Attempt counts connection attempts since the last success.
	Attempt int `json:"attempt,omitempty"`
	// Failure says why the bridge the host started did not start; with
	// state "bridge_failed" only. Error carries the same in one sentence
	// for extensions that do not know this field.
	Failure *BridgeFailure `json:"failure,omitempty"`
	// RetryInMs is how long until the host tries to start the bridge
	// again; with state "bridge_failed" only.
	RetryInMs int64 `json:"retryInMs,omitempty"`
}

// HostLogParams is one log record of the host.
type HostLogParams struct {
	Time    string `json:"time"`
	Level   string `json:"level"`
	Message string `json:"msg"`
	// Attrs are the record's key/value attributes, as text.
	Attrs map[string]string `json:"attrs,omitempty"`
}

// HelloParams identifies a browser profile's extension.
type HelloParams struct {
	// InstanceID is a random id the extension keeps in chrome.storage.local:
	// one per browser profile, stable across restarts.
	InstanceID string `json:"instanceId"`
	Browser    struct {
		Name      string `json:"name"`
		Version   string `json:"version"`
		UserAgent string `json:"userAgent,omitempty"`
	} `json:"browser"`
	Extension struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"extension"`
	// Profile is a label for the profile, if the extension knows one.
	Profile string `json:"profile,omitempty"`
}

var instanceIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)

// Validate checks the fields the bridge relies on.
func (h *HelloParams) Validate() error {
	if !instanceIDPattern.MatchString(h.InstanceID) {
		return fmt.Errorf("instanceId must be 8-64 letters, digits, '-' or '_', got %q", h.InstanceID)
	}
	if h.Browser.Name == "" {
		return fmt.Errorf("browser.name is required")
	}
	return nil
}

// HelloResult is the bridge's answer to hello.
type HelloResult struct {
	BrowserID     string `json:"browserId"`
	BridgeVersion string `json:"bridgeVersion"`
	// MCPURL is where MCP clients reach this bridge, if it serves HTTP.
	MCPURL string `json:"mcpUrl,omitempty"`
	// BridgeInstance is a random id (128 bits, hex) made once per bridge
	// process: a different value than at the last hello means a new bridge
	// process, whatever its version.
	BridgeInstance string `json:"bridgeInstance"`
	// Sessions are the MCP sessions the bridge has now; always present,
	// possibly empty. The extension releases the tab groups of sessions not
	// listed and never adopts them again: session ids are never reused.
	Sessions []SessionRef `json:"sessions"`
}

// SessionRef names one MCP session of the bridge, as tools/call's
// _meta["browserbridge/session"] and session.ended do.
type SessionRef struct {
	// ID is "local-<id>", the prefix of the session's request ids.
	ID string `json:"id"`
	// Client is the client's clientInfo.name.
	Client string `json:"client"`
}

// BrowserInfo describes a connected browser in status reports.
type BrowserInfo struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Version          string `json:"version"`
	Profile          string `json:"profile,omitempty"`
	ExtensionID      string `json:"extensionId"`
	ExtensionVersion string `json:"extensionVersion"`
	HostPID          int    `json:"hostPid,omitempty"`
	ConnectedAt      string `json:"connectedAt"`
	LastActive       string `json:"lastActive"`
}

// StatusResult answers bridge.status.
type StatusResult struct {
	Version  string        `json:"version"`
	PID      int           `json:"pid"`
	Started  string        `json:"started"`
	Socket   string        `json:"socket"`
	Listen   string        `json:"listen,omitempty"`
	MCPURLs  []string      `json:"mcpUrls,omitempty"`
	LogFile  string        `json:"logFile,omitempty"`
	Hosts    int           `json:"hosts"`
	Browsers []BrowserInfo `json:"browsers"`
	// Relay is the state of the cloud relay client, one entry per browser;
	// absent when no relay is configured.
	Relay []RelayInfo `json:"relay,omitempty"`
	// RelayServers are the relay's connections for the gateway's stdio
	// servers, one per server (RelayInfo.Server set, BrowserID empty).
	RelayServers []RelayInfo `json:"relayServers,omitempty"`
}

// RelayStatusResult answers RelayStatus: whether the bridge has a relay,
// the proxy it goes to, this browser's connection there (absent while it
// has none yet) and the gateway servers the bridge offers through it.
type RelayStatusResult struct {
	Configured bool        `json:"configured"`
	URL        string      `json:"url,omitempty"`
	Browser    *RelayInfo  `json:"browser,omitempty"`
	Servers    []RelayInfo `json:"servers"`
}

// RelayInfo is one browser's connection to the cloud proxy (spec 001),
// where the bridge plays the extension's role on the browser's behalf.
type RelayInfo struct {
	BrowserID string `json:"browserId"`
	// Server is the gateway server a server extension offers; "" for a
	// browser's connection.
	Server string `json:"server,omitempty"`
	URL    string `json:"url"`
	// Name is the name announced to the proxy in authenticate.
	Name string `json:"name"`
	// State is connecting, authenticating, connected, auth_failed,
	// name_taken (a server whose name another bridge of the user holds at
	// the proxy; Error is the proxy's sentence) or disconnected (waiting
	// to retry).
	State string `json:"state"`
	// ExtensionID and UserID are what the proxy assigned in authenticated.
	ExtensionID string `json:"extensionId,omitempty"`
	UserID      string `json:"userId,omitempty"`
	// Peers is the number of MCP connections to this browser (proxy status).
	Peers int `json:"peers"`
	// InFlight is the number of forwarded calls awaiting the browser.
	InFlight int `json:"inFlight"`
	// Since is when State last changed (RFC 3339).
	Since string `json:"since"`
	// Error says why the last connection failed or ended.
	Error string `json:"error,omitempty"`
	// Attempt counts failed connection attempts since the last success.
	Attempt int `json:"attempt,omitempty"`
}
