package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/relay"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// statusWait bounds bridge.status, which the bridge answers at once.
const statusWait = 3 * time.Second

// queryStatus asks the bridge on socket for bridge.status.
func queryStatus(ctx context.Context, socket string) (*protocol.StatusResult, error) {
	var st protocol.StatusResult
	if err := callBridge(ctx, socket, statusWait, protocol.BridgeStatus, nil, &st); err != nil {
		var down *bridgeDownError
		if errors.As(err, &down) {
			return nil, down.err
		}
		return nil, fmt.Errorf("asking the bridge at %s for its status: %w", socket, err)
	}
	return &st, nil
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	cfgPath := fs.String("config", "", "config file")
	socket := fs.String("socket", "", "bridge socket")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath, "", *socket)
	if err != nil {
		return err
	}
	st, err := queryStatus(ctx, cfg.Socket)
	if err != nil {
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(map[string]any{"running": false, "socket": cfg.Socket, "error": err.Error()})
		}
		if at, ok := stoppedAt(cfg.Socket); ok {
			fmt.Fprintf(stderr, "%s\n", stoppedSentence(at))
			return errSilent
		}
		fmt.Fprintf(stderr, "The bridge is not running (%v).\nStart it with `%s`, or run `%s doctor`.\n", err, startHint(), cliName())
		return errSilent
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(stdout, st)
	return nil
}

// stoppedAt reports whether the bridge of socket was stopped on purpose
// (`browserbridge stop` left its marker) and when.
func stoppedAt(socket string) (time.Time, bool) {
	fi, err := os.Stat(paths.StopMarker(socket))
	if err != nil {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// stoppedSentence says the bridge was stopped on purpose, as the popup
// does: not a failure, and how to start it.
func stoppedSentence(at time.Time) string {
	return fmt.Sprintf("The bridge is stopped: stopped with `%s` at %s, on purpose. Run `%s` to start it again; the browser does not start it meanwhile.",
		stopHint(), at.Format("15:04 MST, Jan 2"), startHint())
}

func printStatus(w io.Writer, st *protocol.StatusResult) {
	up := "?"
	if t, err := time.Parse(time.RFC3339, st.Started); err == nil {
		up = time.Since(t).Round(time.Second).String()
	}
	fmt.Fprintf(w, "Browser Bridge %s: running (pid %d, up %s)\n", st.Version, st.PID, up)
	fmt.Fprintf(w, "  service: %s\n", serviceState())
	fmt.Fprintf(w, "  socket:  %s\n", st.Socket)
	for _, u := range st.MCPURLs {
		fmt.Fprintf(w, "  MCP:     %s\n", u)
	}
	if st.LogFile != "" {
		fmt.Fprintf(w, "  log:     %s\n", st.LogFile)
	}
	fmt.Fprintf(w, "Browsers connected: %d (hosts attached: %d)\n", len(st.Browsers), st.Hosts)
	for i, b := range st.Browsers {
		def := ""
		if i == 0 {
			def = " [default]"
		}
		profile := ""
		if b.Profile != "" {
			profile = ", profile " + b.Profile
		}
		fmt.Fprintf(w, "  %s %s%s, extension %s, host pid %d, id %s%s\n", b.Name, b.Version, profile, b.ExtensionVersion, b.HostPID, b.ID, def)
	}
	if len(st.Browsers) == 0 {
		fmt.Fprintln(w, "  none: open your browser with the Browser Bridge extension loaded (see `browserbridge doctor`)")
	}
	printRelay(w, st.Relay)
	printRelayServers(w, st.RelayServers)
}

// printRelayServers shows the gateway's stdio servers the relay offers the
// proxy's user, one connection each.
func printRelayServers(w io.Writer, servers []protocol.RelayInfo) {
	if len(servers) == 0 {
		return
	}
	fmt.Fprintln(w, "Servers offered through the relay:")
	for _, r := range servers {
		if r.State == relay.StateNameTaken {
			// Another bridge of the user holds the name: the proxy's
			// sentence says which, since when, and what to do.
			fmt.Fprintf(w, "  %s as %q: not offered through the relay: %s (the bridge asks again every %s)\n", r.Server, r.Name, r.Error, relay.DefaultMaxBackoff)
			continue
		}
		line := fmt.Sprintf("  %s as %q: %s since %s", r.Server, r.Name, r.State, r.Since)
		if r.ExtensionID != "" {
			line += fmt.Sprintf(", %d MCP peer(s), %d call(s) in flight", r.Peers, r.InFlight)
		}
		if r.Error != "" {
			line += ", last error: " + r.Error
		}
		fmt.Fprintln(w, line)
	}
}

// printRelay shows each browser's connection to the cloud proxy.
func printRelay(w io.Writer, relays []protocol.RelayInfo) {
	if len(relays) == 0 {
		return
	}
	fmt.Fprintf(w, "Relay: %s\n", relays[0].URL)
	for _, r := range relays {
		line := fmt.Sprintf("  browser %s as %q: %s since %s", r.BrowserID, r.Name, r.State, r.Since)
		if r.ExtensionID != "" {
			line += fmt.Sprintf(", extension %s, %d MCP peer(s), %d call(s) in flight", r.ExtensionID, r.Peers, r.InFlight)
		}
		if r.Error != "" {
			line += ", last error: " + r.Error
		}
		fmt.Fprintln(w, line)
	}
}
