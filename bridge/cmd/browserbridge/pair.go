package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// pairWait bounds bridge.pair: the bridge's round trip to the proxy.
const pairWait = 10 * time.Second

// runPair prints a one-time code that signs a remote MCP client (claude.ai,
// a phone) in to the cloud proxy as this bridge's user: the running bridge
// asks the proxy for it over its relay link (docs/relay.md, "Pairing"). The
// code is the last line, so that a script can take it with tail -1.
func runPair(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pair", stderr)
	asJSON := fs.Bool("json", false, "print the code and its details as JSON")
	cfgPath := fs.String("config", "", "config file")
	socket := fs.String("socket", "", "bridge socket")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath, "", *socket)
	if err != nil {
		return err
	}
	res, err := queryPair(ctx, cfg.Socket)
	var rpcErr *jsonrpc2.Error
	var down *bridgeDownError
	switch {
	case errors.As(err, &down):
		fmt.Fprintf(stderr, "The bridge is not running (%v).\nStart it with `%s`, then run `%s pair` again.\n", down.err, startHint(), cliName())
		return errSilent
	case errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc2.CodeInvalidRequest:
		// A bridge from before bridge.pair answers as for any unknown method.
		fmt.Fprintf(stderr, "The running bridge is older than this program and cannot ask for pairing codes: restart it with `%s`, then run `%s pair` again.\n", restartHint(), cliName())
		return errSilent
	case errors.As(err, &rpcErr):
		// The bridge's own sentence: no relay, not connected, the proxy's refusal.
		fmt.Fprintf(stderr, "No pairing code: %s.\n", strings.TrimSuffix(rpcErr.Message, "."))
		return errSilent
	case err != nil:
		return fmt.Errorf("asking the bridge at %s for a pairing code: %w", cfg.Socket, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printPair(stdout, res)
	return nil
}

// printPair writes the code for a person: who it signs in as, where to type
// it, and last the code with its expiry.
func printPair(w io.Writer, res relay.PairResult) {
	until := res.ExpiresAt
	if t, err := time.Parse(time.RFC3339, res.ExpiresAt); err == nil {
		until = t.UTC().Format("15:04") + " UTC"
	}
	fmt.Fprintf(w, "Pairing code from the proxy at %s, for user %s.\n", res.Proxy, res.UserID)
	fmt.Fprintf(w, "In the app to connect (claude.ai: Settings → Connectors → Add custom connector), add %s;\n", res.SignInURL)
	fmt.Fprintln(w, "when the proxy's sign-in page opens, type this code in its \"Pairing code\" field.")
	fmt.Fprintf(w, "Code: %s (valid until %s, single use)\n", res.Code, until)
}

// queryPair asks the bridge on socket for bridge.pair.
func queryPair(ctx context.Context, socket string) (relay.PairResult, error) {
	var res relay.PairResult
	err := callBridge(ctx, socket, pairWait, protocol.BridgePair, struct{}{}, &res)
	return res, err
}
