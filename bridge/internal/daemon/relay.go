package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// pairTimeout bounds bridge.pair: one round trip to the proxy, well within
// the time the socket gives a local client that does not attach.
const pairTimeout = 8 * time.Second

// newRelay is the cloud relay client of cfg, nil without relay.url: each
// browser of links, and each stdio server of gw, registers with the proxy
// (docs/relay.md).
func newRelay(cfg *config.Config, log *slog.Logger, links *hostlink.Server, gw *gateway.Gateway) *relay.Client {
	if cfg.Relay.URL == "" {
		return nil
	}
	opts := relay.Options{URL: cfg.Relay.URL, Token: cfg.Relay.Token, Name: cfg.Relay.Name, Links: links, Logger: log}
	if gw != nil && cfg.Relay.OffersServers() {
		opts.Servers = gw
		opts.Aggregate = gateway.AggregateRoute
		opts.ReplaceServers = cfg.Relay.ReplaceServers
	}
	return relay.New(opts)
}

// controlMethods are the requests any local client of the user may make on
// the bridge's socket, beside bridge.status.
func (b *Bridge) controlMethods() map[string]func(context.Context, *jsonrpc2.Request) (any, error) {
	return map[string]func(context.Context, *jsonrpc2.Request) (any, error){
		protocol.BridgePair: b.handlePair,
	}
}

// handlePair answers bridge.pair: a one-time sign-in code from the proxy,
// bound to the relay's user, or a sentence saying what to configure or
// check.
func (b *Bridge) handlePair(ctx context.Context, _ *jsonrpc2.Request) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, pairTimeout)
	defer cancel()
	res, err := b.relay.PairingCode(ctx)
	if err != nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()}
	}
	b.log.Info("pairing code issued by the proxy", "user", res.UserID, "expires", res.ExpiresAt)
	return res, nil
}

// relayStatus answers the extension's relay.status: the relay as it
// concerns that browser, for its popup.
func (b *Bridge) relayStatus(br *hostlink.Browser) protocol.RelayStatusResult {
	res := protocol.RelayStatusResult{Servers: []protocol.RelayInfo{}}
	if b.relay == nil {
		return res
	}
	res.Configured, res.URL = true, b.cfg.Relay.URL
	for _, info := range b.relay.Status() {
		if info.BrowserID == br.ID() {
			res.Browser = &info
		}
	}
	res.Servers = append(res.Servers, b.relay.ServerStatus()...)
	return res
}
