package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// The browser names a remote client's session (its tab group, the popup's
// card) after the client, and keeps its tabs across the extension's
// reconnections when the session has a key (relaywire.MetaClient). The
// proxy knows both for its HTTP sessions: the clientInfo of initialize,
// and the session, whose id it hashes into the key (the id itself is the
// client's credential for the session and stays here).

// clientInfoName is clientInfo.name of initialize params, or of a
// stateless request's _meta.
func clientInfoName(params json.RawMessage) string {
	var p struct {
		ClientInfo struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if p.ClientInfo.Name != "" {
		return p.ClientInfo.Name
	}
	var ci struct {
		Name string `json:"name"`
	}
	if raw, ok := p.Meta["io.modelcontextprotocol/clientInfo"]; ok && json.Unmarshal(raw, &ci) == nil {
		return ci.Name
	}
	return ""
}

// sessionKey is the ClientMeta.Key of the HTTP session with this id.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte("browserbridge/client-key\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// statelessKey is the ClientMeta.Key of a user's stateless (2026-07-28)
// requests from clients of this name: as the bridge does for its own
// stateless requests (one session per client name), one client's calls
// share a tab group. Without it each request, which has a connection of its
// own, made a browser session and a tab group of its own.
func statelessKey(user, name string) string {
	sum := sha256.Sum256([]byte("browserbridge/stateless-client-key\x00" + user + "\x00" + name))
	return hex.EncodeToString(sum[:16])
}

// clientMeta is what the browser gets to know of this session's client
// (relaywire.Message.Client of its forwarded tools/call).
func (ss *httpSession) clientMeta(m *relaywire.Message) relaywire.ClientMeta {
	if ss.stateless || ss.hs.ID == "" {
		name := clientInfoName(m.Params)
		return relaywire.ClientMeta{Name: name, Key: statelessKey(ss.mc.user.id, name)}
	}
	return relaywire.ClientMeta{Name: ss.client, Key: sessionKey(ss.hs.ID)}
}
