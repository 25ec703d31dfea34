package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// startStage is the step of `browserbridge serve` that failed: reading the
// config, or everything after (the log, the socket, the port).
type startStage int

const (
	stageConfig startStage = iota
	stageServe
)

// startFailure describes, for the person behind the extension's popup, why
// `browserbridge serve` did not start and what fixes it (the fixes doctor
// names). cfgFile is the config file read (or that would have been);
// listen the HTTP address from it.
func startFailure(stage startStage, err error, cfgFile, listen string) protocol.BridgeFailure {
	msg := strings.TrimPrefix(err.Error(), cfgFile+": ")
	f := protocol.BridgeFailure{Error: msg, ConfigFile: cfgFile}
	if log, lerr := paths.BridgeLog(); lerr == nil {
		f.LogFile = log
	}
	var op *net.OpError
	switch {
	case stage == stageConfig:
		f.Kind = protocol.FailureConfig
		f.Fix = fmt.Sprintf("Correct %s (strict JSON; the error names the key). The host starts the bridge again by itself, or run `%s doctor`.", cfgFile, cliName())
	case errors.Is(err, ipc.ErrAlreadyServing):
		f.Kind = protocol.FailureSocket
		f.Fix = "Another bridge holds the socket's lock but does not answer: end that process (`pgrep -af 'browserbridge serve'` finds it) and the host starts a new one."
	case errors.As(err, &op) && strings.HasPrefix(op.Net, "tcp"):
		f.Kind = protocol.FailureListen
		f.Listen = listen
		if errors.Is(err, syscall.EADDRINUSE) {
			f.Error = fmt.Sprintf("port %s is taken by another program (%s)", portOf(listen), listen)
			f.Fix = fmt.Sprintf("Stop the program that holds port %s, or set \"listen\" in %s to a free port (e.g. %q). The host starts the bridge again by itself.",
				portOf(listen), cfgFile, nextPort(listen))
		} else {
			f.Fix = fmt.Sprintf("Set \"listen\" in %s to an address of this machine with a free port (e.g. \"127.0.0.1:3456\"). The host starts the bridge again by itself.", cfgFile)
		}
	default:
		f.Kind = protocol.FailureOther
		f.Fix = "Run `" + cliName() + " serve` in a terminal to see it fail, or `" + cliName() + " doctor`; the bridge log says more."
		if strings.Contains(err.Error(), "socket") {
			f.Kind = protocol.FailureSocket
			f.Fix = "The socket's directory must be yours and private (0700): remove it, or set BROWSERBRIDGE_SOCKET; then the host starts the bridge again by itself."
		}
	}
	return f
}

func portOf(listen string) string {
	if _, port, err := net.SplitHostPort(listen); err == nil {
		return port
	}
	return listen
}

// nextPort suggests the address with the port after listen's.
func nextPort(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	var n int
	if err != nil || func() bool { _, e := fmt.Sscan(port, &n); return e != nil }() || n <= 0 || n >= 65535 {
		return "127.0.0.1:3457"
	}
	return net.JoinHostPort(host, fmt.Sprint(n+1))
}

// reportStartFailure writes the failure to the file named by
// protocol.EnvStartReport, if set (the host sets it for the bridges it
// starts), for the host to pass on to the extension. Writing is best
// effort: the error is also returned and logged as before.
func reportStartFailure(stage startStage, err error, cfgFile, listen string) {
	file := os.Getenv(protocol.EnvStartReport)
	if file == "" || err == nil {
		return
	}
	if cfgFile == "" {
		cfgFile, _ = paths.ConfigFile()
	}
	b, _ := json.Marshal(startFailure(stage, err, cfgFile, listen))
	_ = atomicfile.WriteFile(file, b, 0o600)
}

// configPath is the config file serve reads: the flag's, else the
// per-user default.
func configPath(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	p, _ := paths.ConfigFile()
	return p
}
