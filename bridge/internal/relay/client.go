// Package relay connects the bridge to a cloud proxy (spec 001,
// bridge/relaywire). Client plays the extension's role for each connected
// browser: one WebSocket per browser to the proxy's /extension, answering the
// proxy's authenticate and forwarding every mapped request ("conn-<c>:<n>")
// to the browser through the host link with the id unchanged, and the reply
// back unchanged. It does the same for each stdio server of the bridge's
// gateway, registered as a server extension (servers.go), and asks the
// proxy for pairing codes (pair.go). Remote is the other side, the MCP
// role, used by `browserbridge connect`.
package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// States of one browser's relay connection (protocol.RelayInfo.State).
const (
	StateConnecting     = "connecting"
	StateAuthenticating = "authenticating"
	StateConnected      = "connected"
	StateAuthFailed     = "auth_failed"
	StateDisconnected   = "disconnected"
	// StateNameTaken: a server extension whose server name another
	// bridge of the user holds at the proxy (it was refused, or taken
	// over); the error is the proxy's sentence. It retries only at
	// MaxBackoff.
	StateNameTaken = "name_taken"
)

// DefaultMaxBackoff is Options.MaxBackoff unless set: the longest wait
// between two connection attempts.
const DefaultMaxBackoff = 30 * time.Second

// Browsers is what the client needs of the host link.
type Browsers interface {
	Browsers() []*hostlink.Browser
}

// Options configure a Client.
type Options struct {
	// URL is the proxy's base URL (ws:// or wss://, with or without a
	// trailing slash) or its extensions' endpoint (…/extension), as
	// relaywire.EndpointURL reads it; check it with that before New (the
	// config's Validate does). Token is its access token of kind
	// extension. Both required.
	URL, Token string
	// Name, if set, is announced instead of "<browser> <version> (<profile>)".
	Name string
	// Links lists the connected browsers. Required.
	Links Browsers
	// Logger; nil discards.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the reconnect delay, which doubles
	// from MinBackoff after each failure, with jitter. Defaults 250 ms and
	// DefaultMaxBackoff. A refused token or server name waits MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// PingPeriod is how often the client pings the proxy; a connection
	// silent for twice as long is dropped. Default 25 s.
	PingPeriod time.Duration
	// Dialer; nil means websocket.DefaultDialer with a 10 s handshake.
	Dialer *websocket.Dialer
	// Servers, if set, is the bridge's stdio gateway: each of its servers
	// registers with the proxy as a server extension of the user, on a
	// WebSocket of its own, and is reached in this process. nil: browsers
	// only.
	Servers ServerSource
	// Aggregate, if set, is the name of the gateway's route that offers
	// every server's tools in one list ("all"): while the gateway has a
	// server, it is offered as one more server extension, so the proxy's
	// /servers/all/mcp reaches them all in one connector.
	Aggregate string
	// Host names this bridge in its servers' announced names ("everything
	// (Host)"). Default: Name, else the machine's host name.
	Host string
	// ServersPoll is how often the client compares the gateway's servers
	// with its connections (servers added or removed by a reload);
	// ServersChanged looks at once. Default 2 s.
	ServersPoll time.Duration
	// ReplaceServers asks the proxy to take each server name over from
	// another bridge of the user that holds it (AuthenticateResult.Replace;
	// docs/relay.md, "One holder per server name"). A server whose name
	// another bridge then takes over in turn stops asking, so that two
	// bridges set to replace do not take a name from each other at every
	// retry: it gets the name back when the other leaves, or when this
	// bridge restarts.
	ReplaceServers bool
}

// Client keeps one proxy connection per connected browser. Create it with
// New, run it with Run, and call BrowsersChanged when the host link's
// browsers change.
type Client struct {
	opts   Options
	log    *slog.Logger
	kick   chan struct{}
	mu     sync.Mutex
	agents map[string]*agent // by browser id
	// servers are the server extensions, by gateway server name.
	servers map[string]*agent
	// skipped are server names not offered (relaywire's rules), logged once.
	skipped map[string]bool
	// stopping: the bridge is stopping (Stopping); calls its closing
	// browser links cut short are answered naming the restart.
	stopping atomic.Bool
}

// Stopping tells the relay its bridge is stopping, before the browsers'
// links close: a relayed call they cut short is answered with a sentence
// naming the restart (not as a browser that went away), and the proxy
// connections stay until Run's context ends, so those answers reach the
// callers.
func (c *Client) Stopping() { c.stopping.Store(true) }

// WaitCalls waits until no relayed call is in flight, or ctx ends: a
// stopping bridge lets the calls its closed links cut short be answered
// before it ends Run. It polls, briefly, and only at shutdown.
func (c *Client) WaitCalls(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for c.callsInFlight() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// callsInFlight counts the calls being forwarded to this bridge's browsers
// and servers.
func (c *Client) callsInFlight() int {
	c.mu.Lock()
	agents := make([]*agent, 0, len(c.agents)+len(c.servers))
	for _, a := range c.agents {
		agents = append(agents, a)
	}
	for _, a := range c.servers {
		agents = append(agents, a)
	}
	c.mu.Unlock()
	n := 0
	for _, a := range agents {
		a.mu.Lock()
		n += a.inflight
		a.mu.Unlock()
	}
	return n
}

// New returns a Client; Run starts it.
func New(opts Options) *Client {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 250 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.PingPeriod <= 0 {
		opts.PingPeriod = defaultPingPeriod
	}
	if opts.Dialer == nil {
		opts.Dialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment}
	}
	if opts.ServersPoll <= 0 {
		opts.ServersPoll = 2 * time.Second
	}
	if opts.Host == "" {
		opts.Host = opts.Name
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	opts.URL = strings.TrimRight(opts.URL, "/")
	return &Client{opts: opts, log: opts.Logger.With("component", "relay"), kick: make(chan struct{}, 1),
		agents: make(map[string]*agent), servers: make(map[string]*agent)}
}

// ServersChanged makes the client look at the gateway's servers again
// (after a reload); it never blocks.
func (c *Client) ServersChanged() { c.BrowsersChanged() }

// BrowsersChanged makes the client look at the browsers again. It never
// blocks; call it from hostlink.Options.OnChange.
func (c *Client) BrowsersChanged() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run keeps the connections until ctx ends, then closes them all.
func (c *Client) Run(ctx context.Context) {
	var wg sync.WaitGroup
	var poll <-chan time.Time
	if c.opts.Servers != nil {
		t := time.NewTicker(c.opts.ServersPoll)
		defer t.Stop()
		poll = t.C
	}
	for {
		if !c.stopping.Load() {
			// Stopping, the browsers leave as their links close; their
			// proxy connections stay to carry the answers of the calls
			// that cut short, until ctx ends.
			c.reconcile(ctx, &wg)
			c.reconcileServers(ctx, &wg)
		}
		select {
		case <-c.kick:
		case <-poll:
		case <-ctx.Done():
			c.mu.Lock()
			for id, a := range c.agents {
				a.cancel()
				delete(c.agents, id)
			}
			for name, a := range c.servers {
				a.cancel()
				delete(c.servers, name)
			}
			c.mu.Unlock()
			wg.Wait()
			return
		}
	}
}

// reconcileServers starts a server extension for each server the gateway
// has and stops those of servers it no longer has.
func (c *Client) reconcileServers(ctx context.Context, wg *sync.WaitGroup) {
	if c.opts.Servers == nil {
		return
	}
	present := make(map[string]bool)
	for _, name := range c.opts.Servers.Names() {
		present[name] = true
	}
	if len(present) > 0 && c.opts.Aggregate != "" {
		present[c.opts.Aggregate] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, a := range c.servers {
		if !present[name] {
			c.log.Info("server left the gateway; closing its relay connection", "server", name)
			a.cancel()
			delete(c.servers, name)
		}
	}
	for name := range present {
		if _, ok := c.servers[name]; ok {
			continue
		}
		if err := serverNameError(name); err != nil {
			if !c.skipped[name] {
				if c.skipped == nil {
					c.skipped = make(map[string]bool)
				}
				c.skipped[name] = true
				c.log.Warn("a gateway server is not offered through the relay", "server", name, "error", err)
			}
			continue
		}
		actx, cancel := context.WithCancel(ctx)
		a := &agent{c: c, cancel: cancel, server: name, name: serverAgentName(name, c.opts.Host), state: StateConnecting, since: time.Now()}
		c.servers[name] = a
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run(actx)
		}()
	}
}

// reconcile starts an agent for each new browser, points an agent at the
// browser's current link, and stops the agents of browsers that left.
func (c *Client) reconcile(ctx context.Context, wg *sync.WaitGroup) {
	present := make(map[string]*hostlink.Browser)
	for _, b := range c.opts.Links.Browsers() {
		present[b.ID()] = b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, a := range c.agents {
		if _, ok := present[id]; !ok {
			c.log.Info("browser left; closing its relay connection", "browser", id)
			a.cancel()
			delete(c.agents, id)
		}
	}
	for id, b := range present {
		if a, ok := c.agents[id]; ok {
			a.setBrowser(b)
			continue
		}
		actx, cancel := context.WithCancel(ctx)
		a := &agent{c: c, cancel: cancel, browserID: id, browser: b, state: StateConnecting, since: time.Now()}
		a.name = c.nameFor(b)
		c.agents[id] = a
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run(actx)
		}()
	}
}

// nameFor picks the name announced for b: relay.name or "<browser>
// <version> (<profile>)", made unique among this bridge's browsers (the
// proxy derives a stable extension id from user and name). c.mu is held.
func (c *Client) nameFor(b *hostlink.Browser) string {
	name := c.opts.Name
	if name == "" {
		info := b.Info()
		name = strings.TrimSpace(info.Name + " " + info.Version)
		if info.Profile != "" {
			name += " (" + info.Profile + ")"
		}
		if name == "" {
			name = "Browser"
		}
	}
	// The proxy derives the extension id from the user and this name, so the
	// name must depend on this browser alone, never on which others are
	// attached or in what order: a tag from its instance id keeps two alike
	// browsers apart and each one's id the same across restarts.
	sum := sha256.Sum256([]byte(b.ID()))
	return name + " #" + hex.EncodeToString(sum[:3])
}

// ServerStatus reports each server extension's relay connection, ordered
// by server name (Server set, BrowserID empty).
func (c *Client) ServerStatus() []protocol.RelayInfo {
	c.mu.Lock()
	list := make([]protocol.RelayInfo, 0, len(c.servers))
	for _, a := range c.servers {
		list = append(list, a.info())
	}
	c.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Server < list[j].Server })
	return list
}

// Status reports each browser's relay connection, ordered by browser id.
func (c *Client) Status() []protocol.RelayInfo {
	c.mu.Lock()
	list := make([]protocol.RelayInfo, 0, len(c.agents))
	for _, a := range c.agents {
		list = append(list, a.info())
	}
	c.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].BrowserID < list[j].BrowserID })
	return list
}

// agent is one browser's relay: it connects, serves, and reconnects.
type agent struct {
	c         *Client
	cancel    context.CancelFunc
	browserID string
	server    string // a server extension's gateway server; "" for a browser's
	name      string

	mu       sync.Mutex
	browser  *hostlink.Browser
	sess     *session // the proxy connection, while there is one
	state    string
	since    time.Time
	lastErr  string
	extID    string
	userID   string
	peers    int
	attempt  int
	inflight int
	// replaced: another bridge took this server's name over; it no
	// longer asks to replace (Options.ReplaceServers).
	replaced bool
	// noted is the proxy's last server_name_taken sentence, logged once.
	noted string
}

// setBrowser points the agent at the browser's current link. A new link
// (the browser came back through another host, perhaps with another
// extension version) may bring other tools: the MCP clients connected
// through the proxy are told to list them again.
func (a *agent) setBrowser(b *hostlink.Browser) {
	a.mu.Lock()
	changed := a.browser != b
	a.browser = b
	sess := a.sess
	a.mu.Unlock()
	if changed && sess != nil && sess.authed.Load() {
		sess.trySend(relaywire.AppendNotification(nil, relaywire.MethodToolsListChanged, nil))
	}
}

// countInflight counts forwarded calls, for the status.
func (a *agent) countInflight(n int) {
	a.mu.Lock()
	a.inflight += n
	a.mu.Unlock()
}

func (a *agent) session() *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sess
}

func (a *agent) currentBrowser() *hostlink.Browser {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.browser
}

func (a *agent) setState(state, errMsg string) {
	a.mu.Lock()
	if a.state != state {
		a.since = time.Now()
	}
	a.state = state
	if errMsg != "" || state == StateConnected {
		a.lastErr = errMsg
	}
	a.mu.Unlock()
}

func (a *agent) info() protocol.RelayInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return protocol.RelayInfo{
		BrowserID: a.browserID, Server: a.server, URL: a.c.opts.URL, Name: a.name, State: a.state,
		ExtensionID: a.extID, UserID: a.userID, Peers: a.peers, InFlight: a.inflight,
		Since: a.since.UTC().Format(time.RFC3339), Error: a.lastErr, Attempt: a.attempt,
	}
}

func (a *agent) run(ctx context.Context) {
	log := a.c.log.With("browser", a.browserID)
	if a.server != "" {
		log = a.c.log.With("server", a.server)
	}
	for ctx.Err() == nil {
		authed, authFailed, err := a.serve(ctx, log)
		if ctx.Err() != nil {
			return
		}
		a.mu.Lock()
		if authed {
			a.attempt = 0
		}
		a.attempt++
		attempt := a.attempt
		a.extID, a.peers = "", 0
		a.mu.Unlock()
		msg := err.Error()
		state := StateDisconnected
		if authFailed {
			state = StateAuthFailed
		}
		var taken *nameTakenError
		isTaken := errors.As(err, &taken)
		if isTaken {
			state = StateNameTaken
		}
		a.setState(state, msg)
		delay := Backoff(a.c.opts.MinBackoff, a.c.opts.MaxBackoff, attempt)
		if authFailed || isTaken {
			// A bad token stays bad, and a bridge holding the name
			// keeps it while it is connected: do not hammer the proxy.
			delay = a.c.opts.MaxBackoff
		}
		if isTaken {
			a.mu.Lock()
			first := a.noted != msg
			a.noted = msg
			if taken.p.Replaced {
				a.replaced = true
			}
			a.mu.Unlock()
			if first {
				log.Warn("a server is not offered through the relay: another bridge of this user holds its name at the proxy",
					"reason", msg, "holder", taken.p.Holder.Name, "retry_every", delay.Round(time.Second))
			} else {
				log.Debug("the proxy still refuses the server's name", "holder", taken.p.Holder.Name, "attempt", attempt)
			}
		} else {
			log.Warn("relay connection ended; reconnecting", "error", msg, "retry_in", delay.Round(time.Millisecond), "attempt", attempt)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Backoff is the delay before attempt n (1-based): min doubled n-1 times,
// capped at max, with jitter taking off up to half.
func Backoff(min, max time.Duration, n int) time.Duration {
	d := min
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

// errAuth marks a refusal of our token.
var errAuth = errors.New("authentication failed")

// serve runs one connection until it ends. It reports whether the proxy
// accepted the token, whether it refused it, and why the connection ended.
func (a *agent) serve(ctx context.Context, log *slog.Logger) (authed, authFailed bool, err error) {
	a.setState(StateConnecting, "")
	dialURL, err := relaywire.EndpointURL(a.c.opts.URL, relaywire.PathExtension)
	if err != nil {
		return false, false, fmt.Errorf("relay URL: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	ws, resp, err := a.c.opts.Dialer.DialContext(dctx, dialURL, nil)
	cancel()
	if err != nil {
		return false, false, dialError(dialURL, resp, err)
	}
	a.setState(StateAuthenticating, "")
	s := newSession(ctx, a, ws, log)
	a.mu.Lock()
	a.sess = s
	a.mu.Unlock()
	err = s.run()
	a.mu.Lock()
	a.sess = nil
	a.mu.Unlock()
	authed = s.authed.Load()
	return authed, errors.Is(err, errAuth), err
}

// HandleBrowserMessage takes what a browser sends the bridge that concerns
// the relay, and reports whether it consumed it:
//
//   - notifications/progress whose progressToken is the id of a call relayed
//     from the proxy ("conn-<c>:<id>", which the relay put in that call's
//     _meta): sent on to the proxy, for the caller alone, with the caller's
//     own token. Consumed.
//   - notifications/tools/list_changed: passed on to the proxy, which tells
//     every MCP client connected to this browser through it. Not consumed:
//     the local MCP server wants it too.
//
// The bridge calls it from hostlink.Options.Handle before its MCP server's
// handler. It never blocks (a notification that finds the proxy connection's
// queue full is dropped). A nil Client consumes nothing.
func (c *Client) HandleBrowserMessage(b *hostlink.Browser, req *jsonrpc2.Request) bool {
	if c == nil || b == nil || req == nil || !req.Notif {
		return false
	}
	switch req.Method {
	case relaywire.MethodProgress, relaywire.MethodToolsListChanged:
	default:
		return false
	}
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	c.mu.Lock()
	a := c.agents[b.ID()]
	c.mu.Unlock()
	var s *session
	if a != nil {
		s = a.session()
	}
	if req.Method == relaywire.MethodToolsListChanged {
		if s != nil && s.authed.Load() {
			s.trySend(relaywire.AppendNotification(nil, relaywire.MethodToolsListChanged, nil))
		}
		return false
	}
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	id, ok := relaywire.IDString(p.Token)
	if !ok || !strings.HasPrefix(id, relaywire.PrefixConnection) {
		return false // a local call's progress
	}
	if s != nil {
		s.progressFromBrowser(id, params)
	}
	return true // the relay's token: nobody else knows it
}

// stoppingSentence answers a relayed call that the bridge's own stop (for
// a restart, most often) cut short; the bridge's local clients get the
// same news from mcpserver.
const stoppingSentence = "Browser Bridge on the browser's computer is restarting (or was stopped) while this call was running, " +
	"so its answer was lost and the action may or may not have happened. The session carries on once the bridge is back: " +
	"check the page (read it again) before repeating the action."

// jsonrpcError converts what Browser.Call returned into the error to send
// back through the proxy.
func jsonrpcError(method string, err error, stopping bool) *relaywire.Error {
	var rpcErr *jsonrpc2.Error
	switch {
	case stopping && errors.Is(err, hostlink.ErrBrowserGone):
		return relaywire.Errorf(relaywire.CodeExtensionGone, "%s", stoppingSentence)
	case errors.As(err, &rpcErr):
		e := &relaywire.Error{Code: int(rpcErr.Code), Message: rpcErr.Message}
		if rpcErr.Data != nil {
			e.Data = json.RawMessage(*rpcErr.Data)
		}
		return e
	case errors.Is(err, hostlink.ErrBrowserGone):
		return relaywire.Errorf(relaywire.CodeExtensionGone, "the browser disconnected from the bridge before answering %s; it may or may not have acted", method)
	case errors.Is(err, hostlink.ErrDuplicateID):
		return relaywire.Errorf(relaywire.CodeDuplicateID, "%v", err)
	}
	return relaywire.Errorf(relaywire.CodeInternalError, "the bridge could not call the browser: %v", err)
}
