package proxy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// The browser endpoint ({public}/mcp): the tools of the user's browser,
// learned with tools/list through the relay, plus list_browsers and
// select_browser as the bridge offers them (mcpserver/tools.go), answered
// here. Every other request is forwarded to the session's browser.

// Names of the endpoint's own tools; a browser tool with one of them is
// left out.
const (
	toolListBrowsers  = "list_browsers"
	toolSelectBrowser = "select_browser"
)

// ownTools are the endpoint's own tools, as tools/list gives them.
var ownTools = []json.RawMessage{
	// The bridge's wording (mcpserver/tools.go), said once.
	json.RawMessage(`{"name":"list_browsers",` +
		`"description":"Connected browsers; the default (last connected) and this session's.",` +
		`"inputSchema":{"type":"object","properties":{},"additionalProperties":false},"annotations":{"readOnlyHint":true}}`),
	json.RawMessage(`{"name":"select_browser",` +
		`"description":"Sends this session's tool calls to browser, an id from list_browsers (stateless clients use /browsers/<id>/mcp).",` +
		`"inputSchema":{"type":"object","properties":{"browser":{"type":"string"}},"required":["browser"],"additionalProperties":false},` +
		`"annotations":{"idempotentHint":true}}`),
}

const browserInstructions = "Browser Bridge drives your own browser, with its logins, through a cloud proxy. " +
	"Each MCP session gets its own tab group. Use list_browsers and select_browser when several of your browsers are connected."

func serverInfo() map[string]string {
	return map[string]string{"name": "browserbridge-proxy", "title": "Browser Bridge (cloud proxy)", "version": buildinfo.String()}
}

var browserCapabilities = json.RawMessage(`{"tools":{"listChanged":true}}`)

// browserInitResult is the browser endpoint's initialize result.
func browserInitResult(version string) json.RawMessage {
	return relaywire.MarshalParams(map[string]any{
		"protocolVersion": version,
		"capabilities":    browserCapabilities,
		"serverInfo":      serverInfo(),
		"instructions":    browserInstructions,
	})
}

// browserDiscoverResult answers server/discover (2026-07-28).
func browserDiscoverResult() json.RawMessage {
	return relaywire.MarshalParams(map[string]any{
		"resultType":        "complete",
		"supportedVersions": mcphttp.StreamableVersions,
		"capabilities":      browserCapabilities,
		"instructions":      browserInstructions,
		"_meta":             map[string]any{"io.modelcontextprotocol/serverInfo": serverInfo()},
	})
}

// browserRequest serves a request on the browser endpoint.
func (ss *httpSession) browserRequest(m *relaywire.Message, sink mcphttp.Sink) {
	switch m.Method {
	case "tools/list":
		ss.toolsList(m, sink)
		return
	case "subscriptions/listen":
		if ss.stateless {
			ss.subscribe(m, sink)
			return
		}
	case "tools/call":
		// The name only: the arguments of a call to forward may be
		// megabytes, and are not copied.
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(m.Params, &p)
		switch p.Name {
		case toolListBrowsers:
			sink.Send(relaywire.AppendResult(nil, m.ID, ss.listBrowsers()), true)
			return
		case toolSelectBrowser:
			var a struct {
				Arguments json.RawMessage `json:"arguments"`
			}
			_ = json.Unmarshal(m.Params, &a)
			sink.Send(relaywire.AppendResult(nil, m.ID, ss.selectBrowser(a.Arguments)), true)
			return
		}
	}
	ss.forward(m, sink)
}

// toolsList answers tools/list: the browser's tools (forwarded, with the
// own tools put first on the first page), or the own tools alone when no
// browser can be reached.
func (ss *httpSession) toolsList(m *relaywire.Message, sink mcphttp.Sink) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	_ = json.Unmarshal(m.Params, &p)
	first := p.Cursor == nil
	if err := ss.connect(); err != nil {
		sink.Send(relaywire.AppendResult(nil, m.ID, mergeTools(nil, first)), true)
		return
	}
	sink = finalizing(sink, func(reply []byte) []byte {
		var r relaywire.Message
		if _, perr := r.Decode(reply); perr != nil || r.Result == nil {
			// The browser could not list its tools (it left, it failed):
			// the own tools still let the client see what is going on.
			ss.h.s.log.Debug("the browser's tools/list failed", "user", ss.mc.user.id, "error", string(r.Error))
			return relaywire.AppendResult(nil, r.ID, mergeTools(nil, first))
		}
		return relaywire.AppendResult(nil, r.ID, mergeTools(r.Result, first))
	})
	ss.forward(m, sink)
}

// finalizing returns sink with its response rewritten by f: a POST's
// sink rewrites it on the POST's goroutine (PostSink.Finalize), not on
// the extension's reader that delivers it.
func finalizing(sink mcphttp.Sink, f func([]byte) []byte) mcphttp.Sink {
	if ps, ok := sink.(*mcphttp.PostSink); ok {
		ps.Finalize = f
		return ps
	}
	return finalSink{sink, f}
}

type finalSink struct {
	mcphttp.Sink
	f func([]byte) []byte
}

func (s finalSink) Send(msg []byte, final bool) {
	if final {
		msg = s.f(msg)
	}
	s.Sink.Send(msg, final)
}

// mergeTools returns a tools/list result: the browser's (result, nil for
// none) without tools named like the own ones, with the own tools first
// on the first page. Other fields of the result (nextCursor) stay.
func mergeTools(result json.RawMessage, first bool) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(result, &top) != nil || top == nil {
		top = map[string]json.RawMessage{}
	}
	var tools []json.RawMessage
	_ = json.Unmarshal(top["tools"], &tools)
	out := make([]json.RawMessage, 0, len(tools)+len(ownTools))
	if first {
		out = append(out, ownTools...)
	}
	for _, t := range tools {
		var head struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &head) != nil || head.Name == toolListBrowsers || head.Name == toolSelectBrowser {
			continue
		}
		out = append(out, t)
	}
	top["tools"] = relaywire.MarshalParams(out)
	return relaywire.MarshalParams(top)
}

// listBrowsers is list_browsers: the user's browsers connected now.
func (ss *httpSession) listBrowsers() json.RawMessage {
	browsers := ss.h.s.browsersOf(ss.mc.user)
	used := ss.mc.connectedTo()
	if used == "" {
		ss.mu.Lock()
		used = ss.browser
		ss.mu.Unlock()
		if used == "" && len(browsers) > 0 {
			used = browsers[0].id
		}
	}
	var lines []string
	for _, e := range browsers {
		line := fmt.Sprintf("- %s: %s", e.id, e.name)
		if e.id == used {
			line += " (used by this session)"
		}
		lines = append(lines, line)
	}
	text := "No browser of yours is connected to this proxy. Open the browser with Browser Bridge on a machine whose bridge relays to this proxy (relay.url)."
	if len(lines) > 0 {
		text = "Your browsers connected to this proxy (the default, most recently connected, first):\n" + strings.Join(lines, "\n")
	}
	// Text only, no structuredContent: Claude Code hands a model that in
	// place of the text (extension/sw/tools.js); the lines carry the ids.
	return relaywire.MarshalParams(map[string]any{
		"content": []map[string]string{{"type": "text", "text": text}},
	})
}

// selectBrowser is select_browser: the session's calls go to that browser
// from now on. Calls in flight on the browser used before are answered
// -32005 (the session left it).
func (ss *httpSession) selectBrowser(args json.RawMessage) json.RawMessage {
	var a struct {
		Browser string `json:"browser"`
	}
	if json.Unmarshal(args, &a) != nil || a.Browser == "" {
		return toolErrorResult(`select_browser needs {"browser": "<id>"}; list_browsers gives the ids`)
	}
	var chosen *extension
	for _, e := range ss.h.s.browsersOf(ss.mc.user) {
		if e.id == a.Browser {
			chosen = e
		}
	}
	if chosen == nil {
		return toolErrorResult(fmt.Sprintf("no browser of yours connected to this proxy has id %q; list_browsers gives the ids", a.Browser))
	}
	if ss.ep.browser != "" && a.Browser != ss.ep.browser {
		return toolErrorResult("this endpoint serves the browser " + ss.ep.browser + " only; connect to " + ss.h.pub.Base + browsersPrefix + a.Browser + "/mcp for that one, or to " + ss.h.pub.Base + "/mcp to choose")
	}
	if ss.stateless {
		return toolErrorResult("this client is stateless (2026-07-28): connect to " + ss.h.pub.Base + browsersPrefix + a.Browser + "/mcp for that browser instead")
	}
	ss.mu.Lock()
	ss.browser, ss.named = chosen.id, chosen.name
	ss.mu.Unlock()
	// Kept in the session's record: after a restart of the proxy, the
	// session's calls go to this browser still, never to the default.
	ss.hs.Remember(relaywire.MarshalParams(sessionNote{Browser: chosen.id, Name: chosen.name}))
	if to := ss.mc.connectedTo(); to != "" && to != chosen.id {
		ss.mc.dropConnection(true)
	}
	if err := ss.connect(); err != nil {
		return toolErrorResult(err.Message)
	}
	// Another browser may offer other tools.
	ss.notify(toolsChangedMsg)
	return relaywire.MarshalParams(map[string]any{
		"content": []map[string]string{{"type": "text", "text": fmt.Sprintf("This session now uses %s (%s).", chosen.name, chosen.id)}},
	})
}

// sessionNote is what a session of the browser endpoint keeps in its
// record (mcphttp.Session.Remember) to carry on alike after a restart.
type sessionNote struct {
	Browser string `json:"browser"` // the browser select_browser chose
	Name    string `json:"name"`    // its name then, for the error when it is not back
}

// restoreNote takes back what the session kept in its record, if it was
// re-opened after a restart (else the note is empty).
func (ss *httpSession) restoreNote() {
	var n sessionNote
	if json.Unmarshal(ss.hs.Note(), &n) != nil || n.Browser == "" {
		return
	}
	ss.browser, ss.named = n.Browser, n.Name
}

func toolErrorResult(msg string) json.RawMessage {
	return relaywire.MarshalParams(map[string]any{
		"isError": true,
		"content": []map[string]string{{"type": "text", "text": msg}},
	})
}

// browsersOf returns the user's browsers connected now, the most recently
// connected first: that one is the default, as the bridge's default is its
// most recently active browser.
func (s *Server) browsersOf(u *user) []*extension {
	list := s.extensionsOf(u.id, relaywire.ExtensionKindBrowser)
	slices.SortStableFunc(list, func(a, b *extension) int { return b.since.Compare(a.since) })
	return list
}
