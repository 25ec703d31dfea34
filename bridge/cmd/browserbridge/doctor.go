package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/service"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
	"github.com/browserbridge/browserbridge/installer"
)

// checkResult is one line of doctor's report.
type checkResult struct {
	level  checkLevel
	name   string
	detail string
	fix    string
}

type checkLevel int

const (
	checkOK checkLevel = iota
	checkWarn
	checkFail
)

func (l checkLevel) mark() string {
	return [...]string{"ok  ", "warn", "FAIL"}[l]
}

// runDoctor checks each hop from the MCP client to the browser, in the
// order a request travels back: the browser's registration of the host, the
// host binary, the service, the socket, the extension, the MCP port.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("doctor", stderr)
	cfgPath := fs.String("config", "", "config file")
	socket := fs.String("socket", "", "bridge socket")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath, "", *socket)
	if err != nil {
		return err
	}
	var results []checkResult
	add := func(r checkResult) { results = append(results, r) }

	// 1. Native host registration, per browser.
	statuses := installer.Check(extension.ID())
	if len(statuses) == 0 {
		add(checkResult{checkFail, "browsers", "no supported browser was found and nothing is registered",
			"install Chrome, Chromium, Edge, Brave or Vivaldi, or register for one explicitly: browserbridge install --browser chromium"})
	}
	for _, s := range statuses {
		name := "manifest " + s.Browser
		if s.Browser == "" {
			name = "manifest"
		}
		if s.OK() {
			add(checkResult{checkOK, name, s.ManifestPath + " -> " + s.HostPath, ""})
		} else {
			add(checkResult{checkFail, name, s.Problem, s.Fix})
		}
	}

	// 2. The host binary next to this one.
	if hp, err := hostPath(); err != nil {
		add(checkResult{checkFail, "host binary", err.Error(), "reinstall with ./scripts/install.sh"})
	} else if fi, err := os.Stat(hp); err != nil || fi.Mode()&0o111 == 0 && !isWindows() {
		add(checkResult{checkFail, "host binary", fmt.Sprintf("%s is missing or not executable", hp), "reinstall with ./scripts/install.sh"})
	} else {
		add(checkResult{checkOK, "host binary", hp, ""})
	}

	// 3. The bridge answering on its socket.
	st, statusErr := queryStatus(ctx, cfg.Socket)
	stopped, onPurpose := stoppedAt(cfg.Socket)
	switch {
	case statusErr != nil && onPurpose:
		add(checkResult{checkFail, "bridge", fmt.Sprintf("stopped on purpose with `%s` at %s; the browsers' hosts do not start it meanwhile", stopHint(), stopped.Format("15:04 MST, Jan 2")),
			"`" + startHint() + "` starts it again"})
	case statusErr != nil:
		add(checkResult{checkFail, "bridge", fmt.Sprintf("no bridge answers at %s (%v)", cfg.Socket, statusErr),
			"start it with `" + startHint() + "` (it says why if it cannot), or run `" + cliName() + " serve` in a terminal"})
	default:
		add(checkResult{checkOK, "bridge", fmt.Sprintf("version %s, pid %d, socket %s", st.Version, st.PID, st.Socket), ""})
	}

	// 4. The service that keeps the bridge running (one stopped on
	// purpose is not the service's failure: the bridge's line says so).
	add(serviceCheck(statusErr == nil, onPurpose))

	// 5. A browser connected through its host.
	switch {
	case statusErr != nil:
		// The bridge's own line is the problem; this one follows from it.
		add(checkResult{checkWarn, "extension", "cannot tell while the bridge is not running", ""})
	case len(st.Browsers) == 0:
		add(checkResult{checkFail, "extension", fmt.Sprintf("no browser is connected (%d hosts attached)", st.Hosts),
			"open the browser with the Browser Bridge extension loaded (chrome://extensions, Developer mode, Load unpacked: the extension folder); its popup shows the host's state"})
	default:
		for _, b := range st.Browsers {
			add(checkResult{checkOK, "extension", fmt.Sprintf("%s %s, extension %s (host pid %d)", b.Name, b.Version, b.ExtensionVersion, b.HostPID), ""})
		}
	}

	// 5b. The cloud relay, when configured.
	if st != nil {
		for _, r := range relayChecks(cfg.Relay.URL, st) {
			add(r)
		}
	}

	// 6. The MCP port.
	if st != nil && st.Listen != "" {
		add(portCheck(ctx, st.Listen, true))
	} else {
		add(portCheck(ctx, cfg.Listen, false))
	}

	failed := 0
	for _, r := range results {
		fmt.Fprintf(stdout, "%s  %-18s %s\n", r.level.mark(), r.name, r.detail)
		if r.fix != "" {
			fmt.Fprintf(stdout, "      %-18s fix: %s\n", "", r.fix)
		}
		if r.level == checkFail {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "\n%d problem(s) found.\n", failed)
		return errSilent
	}
	fmt.Fprintln(stdout, "\nEverything checks out.")
	return nil
}

func serviceCheck(bridgeUp, stoppedOnPurpose bool) checkResult {
	self, err := selfPath()
	if err != nil {
		return checkResult{checkWarn, "service", err.Error(), ""}
	}
	state, err := service.Status(self)
	switch {
	case service.Available() != nil:
		// Not a problem: the bridge runs without one (the browser's host
		// starts it on demand). Whether it runs is the bridge's line.
		lvl, fix := checkOK, ""
		if !bridgeUp && !stoppedOnPurpose {
			lvl, fix = checkWarn, "`"+startHint()+"` starts it now; `"+stopHint()+"` and `"+restartHint()+"` work here too"
		}
		return checkResult{lvl, "service", fmt.Sprintf("none (%v): nothing starts the bridge at login; the browser's host starts it when the browser opens", service.Available()), fix}
	case err != nil:
		return checkResult{checkWarn, "service", err.Error(), ""}
	case state == service.StateRunning:
		return checkResult{checkOK, "service", "running", ""}
	case state == service.StateNotInstalled:
		return checkResult{checkWarn, "service", "not installed: the bridge will not start at login",
			cliName() + " service install && " + startHint()}
	case stoppedOnPurpose:
		return checkResult{checkWarn, "service", "installed, " + state.String() + " with the bridge (`" + stopHint() + "`)", ""}
	default:
		return checkResult{checkFail, "service", "installed but " + state.String(), startHint() + " (it says why if it cannot)"}
	}
}

func portCheck(ctx context.Context, listen string, bridgeServing bool) checkResult {
	if bridgeServing {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			return checkResult{checkOK, "MCP endpoint", "http://" + listen + "/mcp and /sse", ""}
		}
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("GET /health answered %s", resp.Status)
		}
		return checkResult{checkFail, "MCP endpoint", fmt.Sprintf("%s does not answer as the bridge: %v", listen, err),
			"another program may hold the port: set \"listen\" in the config to a free one and restart the bridge"}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return checkResult{checkFail, "MCP port", fmt.Sprintf("%s is taken by another program (%v)", listen, err),
			"stop that program, or set \"listen\" in the config to a free port"}
	}
	ln.Close()
	return checkResult{checkOK, "MCP port", listen + " is free for the bridge", ""}
}

// relayChecks reports each browser's connection to the cloud proxy.
func relayChecks(configured string, st *protocol.StatusResult) []checkResult {
	var out []checkResult
	if len(st.Relay) == 0 {
		if configured != "" && len(st.Browsers) > 0 {
			out = append(out, checkResult{checkWarn, "relay", "relay.url is set in the config but the running bridge has no relay",
				"restart the bridge so it reads the config: " + restartHint()})
		}
		return out
	}
	for _, r := range st.Relay {
		name := "relay " + r.BrowserID
		if len(name) > 18 {
			name = name[:18]
		}
		switch r.State {
		case "connected":
			out = append(out, checkResult{checkOK, name, fmt.Sprintf("%s as %q, extension %s", r.URL, r.Name, r.ExtensionID), ""})
		case "auth_failed":
			out = append(out, checkResult{checkFail, name, fmt.Sprintf("%s refused the token: %s", r.URL, r.Error),
				"mint a new token of kind extension (browserbridge-proxy token --kind extension) and set relay.token or --relay-token"})
		default:
			detail := fmt.Sprintf("%s: %s", r.URL, r.State)
			if r.Error != "" {
				detail += ": " + r.Error
			}
			out = append(out, checkResult{checkWarn, name, detail,
				"the bridge keeps retrying; check that the proxy is running and relay.url is right"})
		}
	}
	return out
}

func isWindows() bool { return os.PathSeparator == '\\' }
