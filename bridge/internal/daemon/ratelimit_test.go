package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/paths"
)

// TestSDKClientsOutrunningTheLimitAreSlowed is the finding as it was seen:
// Go SDK sessions calling echo as fast as they can. The loopback limit is
// set far below what they make (100 requests/s for both together, where
// one alone makes over a thousand), so every call past the burst has to
// wait for its turn: none may fail, and the legacy SSE session, which the
// SDK closes at the first 429 of POST /message, must survive.
func TestSDKClientsOutrunningTheLimitAreSlowed(t *testing.T) {
	e := newEnv(t)
	t.Setenv(paths.EnvHome, filepath.Join(e.dir, "home")) // keep the echo tool out of the user's tool cache
	cfg := e.config()
	rate := 100.0
	cfg.LoopbackRateLimit = &rate // a burst of 200; rate_wait stays at its default, 1 s
	b, err := Start(cfg, testutil.Logger(t, "bridge"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.startEcho("bare", "instance-ratelimit")
	waitRegistered(t, b, "instance-ratelimit")
	hasEcho := func(tool *mcp.Tool) bool { return tool.Name == "echo" }
	testutil.WaitFor(t, "the bridge to offer the echo extension's tool", func() bool { return slices.ContainsFunc(b.mcp.ToolList(), hasEcho) })
	base := "http://" + b.Addr()

	const calls = 300 // per session: 600 calls against a burst of 200 at 100/s
	transports := map[string]mcp.Transport{
		"streamable": &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1},
		"sse":        &mcp.SSEClientTransport{Endpoint: base + "/sse"},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(transports))
	for name, tr := range transports {
		wg.Go(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer ccancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "ratelimit-" + name, Version: "1"}, nil).Connect(cctx, tr, nil)
			if err != nil {
				errs <- fmt.Errorf("%s: connect: %w", name, err)
				return
			}
			defer cs.Close()
			for i := range calls {
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": i}})
				if err != nil {
					errs <- fmt.Errorf("%s: call %d of %d: %w", name, i+1, calls, err)
					return
				}
				if res.IsError {
					errs <- fmt.Errorf("%s: call %d of %d: tool error %+v", name, i+1, calls, res.Content)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
