package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// ErrNoRelay is PairingCode's error on a bridge without a relay.
var ErrNoRelay = errors.New(`no cloud relay is configured: set "relay.url" and "relay.token" in the bridge's config (or start it with --relay-url and --relay-token), restart it, then check ` + "`browserbridge status`")

// PairResult is a pairing code and where it is for: bridge.pair's result.
type PairResult struct {
	relaywire.PairingCodeResult
	// Proxy is the relay's proxy URL, as configured.
	Proxy string `json:"proxy"`
	// SignInURL is where a remote client starts: the proxy's MCP endpoint,
	// as the proxy said (MCPURL), else derived from Proxy.
	SignInURL string `json:"sign_in_url"`
}

// PairingCode asks the proxy, over one of the relay's connections it has
// authenticated, for a one-time sign-in code bound to this bridge's user
// (docs/relay.md, "Pairing"). Without such a connection it says why, in a
// sentence naming what to check. A nil Client has no relay (ErrNoRelay).
func (c *Client) PairingCode(ctx context.Context) (PairResult, error) {
	var res PairResult
	if c == nil {
		return res, ErrNoRelay
	}
	s, why := c.authedSession()
	if s == nil {
		return res, fmt.Errorf("the bridge is not connected to the proxy at %s: %s; check `browserbridge status`", c.opts.URL, why)
	}
	raw, err := s.call(ctx, relaywire.MethodPairingCode, relaywire.PairingCodeParams{})
	var rerr *relaywire.Error
	switch {
	case errors.As(err, &rerr):
		return res, fmt.Errorf("the proxy at %s gave no pairing code: %s", c.opts.URL, rerr.Message)
	case err != nil:
		return res, fmt.Errorf("the proxy at %s gave no pairing code: %w", c.opts.URL, err)
	}
	if err := json.Unmarshal(raw, &res.PairingCodeResult); err != nil || res.Code == "" {
		return res, fmt.Errorf("the proxy at %s answered pairing_code with %s, not a code", c.opts.URL, raw)
	}
	res.Proxy, res.SignInURL = c.opts.URL, res.MCPURL
	if res.SignInURL == "" {
		res.SignInURL = httpMCPURL(c.opts.URL)
	}
	return res, nil
}

// httpMCPURL guesses the proxy's public MCP endpoint from its WebSocket
// URL: the same host, https for wss, at /mcp.
func httpMCPURL(proxyURL string) string {
	u, err := relaywire.EndpointURL(proxyURL, relaywire.PathMCP)
	if err != nil {
		return ""
	}
	if rest, ok := strings.CutPrefix(u, "wss://"); ok {
		return "https://" + rest
	}
	return "http://" + strings.TrimPrefix(u, "ws://")
}

// authedSession returns a connection the proxy authenticated (a browser's
// first, in a stable order), or nil and why there is none.
func (c *Client) authedSession() (*session, string) {
	c.mu.Lock()
	var agents []*agent
	for _, a := range c.agents {
		agents = append(agents, a)
	}
	var servers []*agent
	for _, a := range c.servers {
		servers = append(servers, a)
	}
	c.mu.Unlock()
	sort.Slice(agents, func(i, j int) bool { return agents[i].browserID < agents[j].browserID })
	sort.Slice(servers, func(i, j int) bool { return servers[i].server < servers[j].server })
	agents = append(agents, servers...)
	if len(agents) == 0 {
		return nil, "no browser is attached and no gateway server is configured, so the relay has no connection open (it opens one for each)"
	}
	for _, a := range agents {
		if s := a.session(); s != nil && s.authed.Load() {
			return s, ""
		}
	}
	info := agents[0].info()
	why := fmt.Sprintf("its connection for %q is %s", info.Name, info.State)
	if info.Error != "" {
		why += " (" + info.Error + ")"
	}
	return nil, why
}
