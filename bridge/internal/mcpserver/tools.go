package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// The bridge's own tools; a browser tool with one of these names is skipped.
const (
	toolListBrowsers  = "list_browsers"
	toolSelectBrowser = "select_browser"
)

// toolNamePattern is what MCP clients accept as a tool name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

var selectBrowserTool = &mcp.Tool{
	Name: toolSelectBrowser,
	// Said once: the browser argument is the id list_browsers gives.
	Description: "Sends this session's tool calls to browser, an id from list_browsers.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"browser":{"type":"string"}},"required":["browser"],"additionalProperties":false}`),
	Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
}

var listBrowsersTool = &mcp.Tool{
	Name:        toolListBrowsers,
	Description: "Connected browsers; the default (last active) and this session's.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
	Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
}

func (s *Server) addOwnTools() {
	s.addListBrowsersTool()
	s.mcp.AddTool(selectBrowserTool, s.selectBrowser)
}

// addListBrowsersTool (re)registers list_browsers. Registering it again is
// also how a change of browsers is announced: the SDK sends
// notifications/tools/list_changed for every change to the tool set.
func (s *Server) addListBrowsersTool() {
	s.mcp.AddTool(listBrowsersTool, s.listBrowsers)
}

func (s *Server) listBrowsers(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	chosen := s.chosenBrowserID(req)
	var lines []string
	if s.links != nil {
		for i, b := range s.links.Browsers() {
			info := b.Info()
			mark := ""
			if info.ID == chosen || (chosen == "" && i == 0) {
				mark = " (used by this session)"
			}
			lines = append(lines, browserLine(info)+mark)
		}
	}
	text := "No browser is connected. Open the browser with the Browser Bridge extension loaded."
	if len(lines) > 0 {
		text = "Connected browsers (most recently active first):\n" + strings.Join(lines, "\n")
	}
	// Text only: Claude Code hands a model a result's structuredContent in
	// place of its text (extension/sw/tools.js), and the lines carry the ids.
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
}

// browserLine is list_browsers' line for one browser: its id, what it said
// of itself in hello, and when it connected. The profile label is shown
// only when the extension has one (its options page sets it); an empty one
// says nothing, so it is left out rather than printed as "".
func browserLine(info protocol.BrowserInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- %s: %s", info.ID, info.Name)
	if info.Version != "" {
		b.WriteString(" " + info.Version)
	}
	if info.Profile != "" {
		fmt.Fprintf(&b, ", profile %q", info.Profile)
	}
	var about []string
	if info.ExtensionVersion != "" {
		about = append(about, "extension "+info.ExtensionVersion)
	}
	if info.ConnectedAt != "" {
		about = append(about, "connected "+info.ConnectedAt)
	}
	if len(about) > 0 {
		b.WriteString(" (" + strings.Join(about, ", ") + ")")
	}
	return b.String()
}

func (s *Server) selectBrowser(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Browser string `json:"browser"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Browser == "" {
		return toolError("select_browser needs {\"browser\": \"<id>\"}; list_browsers gives the ids"), nil
	}
	if s.links == nil {
		return toolError("no browser is connected"), nil
	}
	b, ok := s.links.Browser(args.Browser)
	if !ok {
		return toolError(fmt.Sprintf("no connected browser has id %q; list_browsers gives the ids", args.Browser)), nil
	}
	link := s.linkOf(req.Session, req)
	if link.stateless {
		return toolError("this client is stateless (2026-07-28): add ?browser=" + args.Browser + " to the endpoint URL instead"), nil
	}
	link.setBrowser(args.Browser)
	info := b.Info()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("This session now uses %s %s (%s).", info.Name, info.Version, info.ID)}}}, nil
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// refreshTools asks the default browser for its tools and makes the
// server's set match; with no browser the last known set stays, so calls
// can wait for the browser to come back. Either way clients are told the
// list changed, since the browsers behind it did.
func (s *Server) refreshTools(ctx context.Context) {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	defer s.addListBrowsersTool()
	if s.links == nil {
		return
	}
	b, ok := s.links.Default()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := b.Call(ctx, "", "tools/list", struct{}{})
	if err != nil {
		s.log.Warn("asking the browser for its tools", "browser", b.ID(), "error", err)
		return
	}
	tools, err := decodeTools(raw)
	if err != nil {
		s.log.Warn("the browser's tool list", "browser", b.ID(), "error", err)
		return
	}
	s.setTools(tools, b)
}

// decodeTools reads a tools/list result, keeping the tools a client can use.
func decodeTools(raw json.RawMessage) ([]*mcp.Tool, error) {
	var res struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding tools/list: %w", err)
	}
	var tools []*mcp.Tool
	for _, r := range res.Tools {
		var t mcp.Tool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, fmt.Errorf("decoding a tool: %w", err)
		}
		if err := checkTool(&t); err != nil {
			return nil, err
		}
		tools = append(tools, &t)
	}
	return tools, nil
}

// checkTool refuses what the SDK would panic on or clients would reject.
func checkTool(t *mcp.Tool) error {
	if !toolNamePattern.MatchString(t.Name) {
		return fmt.Errorf("tool name %q is not 1-128 letters, digits, '_', '-' or '.'", t.Name)
	}
	if t.Name == toolListBrowsers || t.Name == toolSelectBrowser {
		return fmt.Errorf("tool name %q is reserved by the bridge", t.Name)
	}
	schema, ok := t.InputSchema.(map[string]any)
	if !ok || schema["type"] != "object" {
		return fmt.Errorf("tool %q: inputSchema must be a JSON Schema object with \"type\": \"object\"", t.Name)
	}
	return nil
}

// setTools makes the offered browser tools exactly tools.
func (s *Server) setTools(tools []*mcp.Tool, from *hostlink.Browser) {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	next := make(map[string]*mcp.Tool, len(tools))
	for _, t := range tools {
		next[t.Name] = t
	}
	var gone []string
	for name := range s.tools {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	changed := len(gone) > 0
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	registered := s.sdkTools()
	callable := make(map[string]bool, len(next))
	for name, t := range next {
		if old, ok := s.tools[name]; ok && sameTool(old, t) {
			callable[name] = registered[name]
			continue
		}
		changed = true
		callable[name] = s.addBrowserTool(t)
	}
	s.tools = next
	s.callable.Store(&callable)
	if from != nil {
		s.toolsFrom = from.ID()
	}
	if changed {
		s.stats.ToolsChanges.Add(1)
		s.log.Info("browser tools updated", "tools", len(next), "removed", len(gone))
		s.saveToolsCache()
	}
}

// sdkTools returns the names of the browser tools the SDK server has (the
// ones it did not refuse); the map must not be modified.
func (s *Server) sdkTools() map[string]bool {
	if m := s.callable.Load(); m != nil {
		return *m
	}
	return nil
}

// addBrowserTool registers t with the SDK, reporting whether it took it.
func (s *Server) addBrowserTool(t *mcp.Tool) (ok bool) {
	defer func() {
		if r := recover(); r != nil { // the SDK panics on schemas it cannot use
			s.log.Warn("skipping a browser tool the SDK refused", "tool", t.Name, "error", r)
			ok = false
		}
	}()
	s.mcp.AddTool(t, s.callBrowserTool)
	return true
}

func sameTool(a, b *mcp.Tool) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// ToolList returns the tools offered to clients, the bridge's own included,
// sorted by name (GET /tools).
func (s *Server) ToolList() []*mcp.Tool {
	s.toolsMu.Lock()
	list := make([]*mcp.Tool, 0, len(s.tools)+2)
	for _, t := range s.tools {
		list = append(list, t)
	}
	s.toolsMu.Unlock()
	list = append(list, listBrowsersTool, selectBrowserTool)
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

func (s *Server) saveToolsCache() {
	if s.opts.ToolsCache == "" {
		return
	}
	list := make([]*mcp.Tool, 0, len(s.tools))
	for _, t := range s.tools {
		list = append(list, t)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	b, err := json.Marshal(map[string]any{"tools": list})
	if err == nil {
		err = os.MkdirAll(filepath.Dir(s.opts.ToolsCache), 0o700)
	}
	if err == nil {
		err = atomicfile.WriteFile(s.opts.ToolsCache, b, 0o600)
	}
	if err != nil {
		s.log.Warn("saving the tools cache", "file", s.opts.ToolsCache, "error", err)
	}
}

func (s *Server) loadToolsCache() {
	if s.opts.ToolsCache == "" {
		return
	}
	b, err := os.ReadFile(s.opts.ToolsCache)
	if err != nil {
		return
	}
	tools, err := decodeTools(b)
	if err != nil {
		s.log.Warn("ignoring a bad tools cache", "file", s.opts.ToolsCache, "error", err)
		return
	}
	s.setTools(tools, nil)
}
