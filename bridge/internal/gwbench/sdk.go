package gwbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkSession is a session of the official Go SDK's client, over stdio (the
// server's pipes) or Streamable HTTP: the client a Go program would use,
// with its own framing, id numbering and JSON handling, so that a gateway
// and the direct connection are compared under the same client costs.
//
// The SDK numbers and routes ids itself, so misrouting is seen only as a
// reply whose text is not the one asked for.
type sdkSession struct {
	cs   *mcp.ClientSession
	mux  *mux // only its misrouted counter
	seq  atomic.Int64
	once sync.Once
}

var _ session = (*sdkSession)(nil)

// sdkClient is the client every SDK session is made by.
var sdkClient = mcp.NewClient(&mcp.Implementation{Name: "gwbench", Version: "1"}, nil)

// openSDKStdio connects the SDK client to a server's stdin (in) and stdout
// (out); it owns both from then on.
func openSDKStdio(ctx context.Context, in io.WriteCloser, out io.ReadCloser) (*sdkSession, error) {
	return openSDK(ctx, &mcp.IOTransport{Reader: out, Writer: in, MaxLineLength: maxEventSize}, nil)
}

// openSDKStreamable connects the SDK client to a Streamable HTTP endpoint,
// in the protocol version given ("" is the SDK's choice: the newest, whose
// stateless era it falls back from to sessions when the server has no
// server/discover). The standalone GET stream of a session stays on, as a
// real client keeps it.
func openSDKStreamable(ctx context.Context, client *http.Client, url, version string) (*sdkSession, error) {
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	return openSDK(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client}, opts)
}

func openSDK(ctx context.Context, t mcp.Transport, opts *mcp.ClientSessionOptions) (*sdkSession, error) {
	cs, err := sdkClient.Connect(ctx, t, opts)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return &sdkSession{cs: cs, mux: newMux()}, nil
}

func (s *sdkSession) call(ctx context.Context, worker int) error {
	msg := echoMessage(worker, s.seq.Add(1))
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	if err != nil {
		return err
	}
	var text string
	if len(res.Content) > 0 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			text = t.Text
		}
	}
	if res.IsError {
		return fmt.Errorf("tool error: %s", text)
	}
	if text != "Echo: "+msg {
		s.mux.misrouted.Add(1)
		return errMisrouted
	}
	return nil
}

func (s *sdkSession) replies() *mux { return s.mux }

func (s *sdkSession) close() { s.once.Do(func() { s.cs.Close() }) }
