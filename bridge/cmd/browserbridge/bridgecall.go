package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/nativemsg/rpcstream"
)

// callBridge calls method with params on the bridge at socket, within wait,
// and decodes its result into result. It speaks on the same connection as
// the hosts' link (rpcstream.Conn), as any local process may without
// attaching (docs/protocol.md, "Local clients → bridge"). Its error is a
// *bridgeDownError when nothing answers on the socket, a *jsonrpc2.Error
// when the bridge answers with one.
func callBridge(ctx context.Context, socket string, wait time.Duration, method string, params, result any) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	c, err := ipc.Dial(ctx, socket)
	if err != nil {
		return &bridgeDownError{err}
	}
	// The bridge sends a local client no requests: nothing to handle.
	conn := rpcstream.NewConn(ctx, rpcstream.New(c, nativemsg.MaxLink), func(context.Context, *rpcstream.Conn, *jsonrpc2.Request) {}, nil)
	defer conn.Close()
	raw, err := conn.Call(ctx, "cli:1", method, params)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("the bridge's answer to %s: %w", method, err)
	}
	return nil
}

// bridgeDownError: no bridge answers on the socket.
type bridgeDownError struct{ err error }

func (e *bridgeDownError) Error() string { return e.err.Error() }
