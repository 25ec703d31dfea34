package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// What differs between protocol versions in the answers the server gives,
// as each version's specification says:
//
//   - Bad tool arguments are a protocol error (-32602) up to 2025-06-18
//     and a tool error from 2025-11-25 (mcphttp.ArgumentErrorAsResult).
//   - ttlMs and cacheScope, the caching hints of the list results, came
//     with the stateless era (2026-07-28, mcphttp.IsStateless); the
//     schemas of the versions before have neither.

// requestVersion is the protocol version a request is answered in: the
// MCP-Protocol-Version header a Streamable HTTP client sends after
// initialize (or the stateless era's), else the version the session
// negotiated (legacy SSE sends no header).
func requestVersion(req mcp.Request) string {
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		if v := extra.Header.Get(mcphttp.HeaderProtocolVersion); v != "" {
			return v
		}
	}
	if vr, ok := req.(interface{ ProtocolVersion() string }); ok {
		if v := vr.ProtocolVersion(); v != "" {
			return mcphttp.Negotiate(v, mcphttp.Versions)
		}
	}
	return mcphttp.VersionDefault // what the specification says to assume without a header
}

// refusal is what the client gets for a browser's protocol-level refusal
// of a call (an unknown tool, bad arguments) at protocol version version.
func refusal(err *jsonrpc2.Error, version string) (*mcp.CallToolResult, error) {
	var data json.RawMessage
	if err.Data != nil {
		data = *err.Data
	}
	if mcphttp.ArgumentErrorAsResult(version, int(err.Code), data) {
		return toolError(mcphttp.ArgumentErrorText(err.Message)), nil
	}
	return nil, &jsonrpc.Error{Code: err.Code, Message: err.Message}
}

// withoutCacheFields is a list result as the versions before 2026-07-28
// have it: the same fields but ttlMs and cacheScope, which the SDK writes
// in every version.
type withoutCacheFields struct{ mcp.Result }

func (r withoutCacheFields) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.Result)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	delete(fields, "ttlMs")
	delete(fields, "cacheScope")
	return json.Marshal(fields)
}

// eraMiddleware drops the caching hints from the results of requests
// answered in a version that does not define them.
func eraMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err
		}
		if _, ok := res.(mcp.CacheableResult); ok && !mcphttp.IsStateless(requestVersion(req)) {
			return withoutCacheFields{res}, nil
		}
		return res, nil
	}
}
