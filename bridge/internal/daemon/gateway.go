package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/gateway"
	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/mcpserver"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// browserClient is the browser as the aggregate endpoint sees it: an
// in-process SDK client session on the bridge's own MCP server.
type browserClient struct {
	cs *mcp.ClientSession
	ss *mcp.ServerSession
}

func connectBrowser(s *mcpserver.Server) func(ctx context.Context) (gateway.AggregateClient, error) {
	return func(ctx context.Context) (gateway.AggregateClient, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.MCP().Connect(ctx, st, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting to the browser tools: %w", err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "browserbridge-gateway", Version: buildinfo.String()}, nil)
		cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			ss.Close()
			return nil, fmt.Errorf("connecting to the browser tools: %w", err)
		}
		return &browserClient{cs: cs, ss: ss}, nil
	}
}

func (b *browserClient) ListTools(ctx context.Context) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for t, err := range b.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

func (b *browserClient) CallTool(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var p mcp.CallToolParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("tools/call params: %w", err)
	}
	res, err := b.cs.CallTool(ctx, &p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (b *browserClient) Close() error {
	err := b.cs.Close()
	b.ss.Close()
	return err
}

// remoteSource reaches the remote MCP servers of the most recently active
// browser through its host link.
type remoteSource struct{ links *hostlink.Server }

// remoteCallTimeout bounds a remote tool call; the extension applies the
// remote server's own timeouts inside it.
const remoteCallTimeout = 5 * time.Minute

func (r remoteSource) List(ctx context.Context) ([]gateway.RemoteServer, error) {
	br, ok := r.links.Default()
	if !ok {
		return nil, errors.New("no browser is connected")
	}
	raw, err := br.Call(ctx, "", protocol.RemoteList, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the remote servers of %s: %w", br.Info().Name, err)
	}
	var res struct {
		Servers []gateway.RemoteServer `json:"servers"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the extension's remote.list: %w", err)
	}
	return res.Servers, nil
}

func (r remoteSource) Call(ctx context.Context, server string, params json.RawMessage) (json.RawMessage, error) {
	br, ok := r.links.Default()
	if !ok {
		return nil, errors.New("no browser is connected: remote servers are called by the browser")
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("tools/call params: %w", err)
	}
	p["server"], _ = json.Marshal(server)
	ctx, cancel := context.WithTimeout(ctx, remoteCallTimeout)
	defer cancel()
	raw, err := br.Call(ctx, "", protocol.RemoteCall, p)
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		return nil, errors.New(rpcErr.Message)
	}
	return raw, err
}
