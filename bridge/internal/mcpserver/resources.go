package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sourcegraph/jsonrpc2"
)

// screenshotURITemplate names the full-resolution screenshots the
// extension keeps and links to from tool results.
const screenshotURITemplate = "browserbridge://screenshots/{id}"

// readBrowserResource forwards resources/read for a browser-held resource
// to the browser the session uses.
func (s *Server) readBrowserResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	b, err := s.waitBrowser(ctx, s.browserFor(req.Session, req.Extra))
	if err != nil {
		return nil, &jsonrpc.Error{Code: -32002, Message: err.Error()}
	}
	raw, err := b.Call(ctx, "", "resources/read", map[string]string{"uri": req.Params.URI})
	var rpcErr *jsonrpc2.Error
	switch {
	case errors.As(err, &rpcErr):
		return nil, &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message}
	case err != nil:
		return nil, fmt.Errorf("reading %s from the browser: %w", req.Params.URI, err)
	}
	var res mcp.ReadResourceResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the browser's answer to resources/read: %w", err)
	}
	return &res, nil
}
