package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// bridgeStart is a bridge process the host started, watched until it
// answers or exits. A bridge that cannot start writes why into the report
// file named by protocol.EnvStartReport; its stdio is the null device, as
// it outlives the host (a pipe would kill it once the host is gone).
type bridgeStart struct {
	report string        // the report file; removed by failure or forget
	done   chan struct{} // closed when the process has exited
	err    error         // how it exited; read after done
}

// startBridge starts `browserbridge serve` detached from this process, so it
// outlives the browser; its output goes to its own log, never to stdout.
func (h *host) startBridge() (*bridgeStart, error) {
	bin := os.Getenv(envBridgeBin)
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this executable: %w", err)
		}
		name := "browserbridge"
		if runtime.GOOS == "windows" {
			name += ".exe"
		}
		bin = filepath.Join(filepath.Dir(self), name)
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("bridge binary %s: %w", bin, err)
	}
	f, err := os.CreateTemp("", "browserbridge-start-*.json")
	if err != nil {
		return nil, fmt.Errorf("creating the bridge's start report: %w", err)
	}
	f.Close()
	s := &bridgeStart{report: f.Name(), done: make(chan struct{})}
	h.log.Info("no bridge answered; starting one", "bin", bin)
	cmd := exec.Command(bin, "serve", "--socket", h.socket)
	cmd.Env = append(os.Environ(), protocol.EnvStartReport+"="+s.report)
	detach(cmd)
	if err := cmd.Start(); err != nil {
		os.Remove(s.report)
		return nil, err
	}
	go func() {
		s.err = cmd.Wait() // reaps it, whenever it exits
		close(s.done)
	}()
	return s, nil
}

// failure says why the exited bridge did not start: its report, or its
// exit status when it wrote none. It removes the report.
func (s *bridgeStart) failure() *protocol.BridgeFailure {
	defer os.Remove(s.report)
	var f protocol.BridgeFailure
	if b, err := os.ReadFile(s.report); err == nil && len(b) > 0 && json.Unmarshal(b, &f) == nil && f.Error != "" {
		if f.Kind == "" {
			f.Kind = protocol.FailureOther
		}
		return &f
	}
	f = protocol.BridgeFailure{Kind: protocol.FailureOther, Error: "the bridge exited before it answered", Fix: "Run `browserbridge serve` in a terminal to see why, or `browserbridge doctor`."}
	if s.err != nil {
		f.Error = fmt.Sprintf("the bridge exited before it answered (%v)", s.err)
	}
	if log, err := paths.BridgeLog(); err == nil {
		f.LogFile = log
	}
	return &f
}

// forget stops caring how the bridge fares: it answered, or the host is
// leaving. The process is still reaped when it exits.
func (s *bridgeStart) forget() { os.Remove(s.report) }
