//go:build !windows

package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// TestHostReportsBridgeFailure: the host starts the real bridge, which
// cannot start: first an invalid config, then a port another program
// holds. Each time the extension gets host.state "bridge_failed" with the
// cause and the fix (the file, the key; the port), and no "starting_bridge"
// once the host knows a start failed. Once the config is fixed, the host's
// next start succeeds and it says "connected".
func TestHostReportsBridgeFailure(t *testing.T) {
	e := newEnv(t)
	configFile := filepath.Join(e.dir, "home", "config", "config.json")
	if err := os.MkdirAll(filepath.Dir(configFile), 0o700); err != nil {
		t.Fatal(err)
	}
	writeConfig := func(s string) {
		t.Helper()
		if err := os.WriteFile(configFile, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(`{"listen": "127.0.0.1:0", "lisen": "typo"}`)
	e.vars = append(e.vars, "BROWSERBRIDGE_BIN="+bins.Bridge)
	t.Cleanup(func() { killBridge(t, e.socket) })

	br := e.startBrowser(nil)
	// Each failure takes one start; the host starts a bridge at most every
	// 10 s, so the second needs that long.
	ctx := testutil.Context(t, 90*time.Second)

	st := waitFailure(ctx, t, br, protocol.FailureConfig)
	f := st.Failure
	if f.ConfigFile != configFile || !strings.Contains(f.Error, `"lisen"`) || !strings.Contains(f.Fix, configFile) {
		t.Errorf("config failure = %+v; want the file %s, an error naming the key \"lisen\", a fix naming the file", f, configFile)
	}
	if !strings.Contains(st.Error, f.Error) {
		t.Errorf("host.state error %q does not carry the failure for extensions that know no failure field", st.Error)
	}
	if st.RetryInMs <= 0 || st.RetryInMs > 10_000 {
		t.Errorf("retryInMs = %d, want the time until the next start (at most 10 s)", st.RetryInMs)
	}

	// A port another program holds.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	writeConfig(`{"listen": "` + addr + `"}`)
	st = waitFailure(ctx, t, br, protocol.FailureListen)
	f = st.Failure
	if f.Listen != addr || !strings.Contains(f.Error, "port "+port) || !strings.Contains(f.Fix, `"listen"`) || !strings.Contains(f.Fix, configFile) {
		t.Errorf("port failure = %+v; want the address %s, its port named, a fix naming \"listen\" in %s", f, addr, configFile)
	}

	// Fixed: the next start succeeds.
	writeConfig(`{"listen": "127.0.0.1:0"}`)
	for {
		select {
		case st := <-br.States:
			switch st.State {
			case protocol.StateConnected:
				return
			case protocol.StateStartingBridge:
				t.Fatalf("after a failed start the host said %q; it should keep the failure until a bridge answers", st.State)
			}
		case <-ctx.Done():
			t.Fatal("no host.state connected after the config was fixed")
		}
	}
}

// waitFailure waits for a host.state "bridge_failed" of the given kind,
// failing on "starting_bridge" once a failure has been told, and on
// "connected".
func waitFailure(ctx context.Context, t *testing.T, br *testbrowser.Browser, kind string) protocol.HostStateParams {
	t.Helper()
	var seen []string
	told := false
	for {
		select {
		case st := <-br.States:
			seen = append(seen, st.State)
			switch st.State {
			case protocol.StateBridgeFailed:
				told = true
				if st.Failure == nil {
					t.Fatalf("bridge_failed without a failure: %+v", st)
				}
				if st.Failure.Kind == kind {
					return st
				}
			case protocol.StateStartingBridge:
				if told {
					t.Fatalf("host said starting_bridge after it told a failure (states %v)", seen)
				}
			case protocol.StateConnected:
				t.Fatalf("the host connected to a bridge that should not start (states %v)", seen)
			}
		case <-ctx.Done():
			t.Fatalf("no bridge_failed of kind %q (states so far %v)", kind, seen)
		}
	}
}

// TestHostKeepsAStoppedBridgeStopped: with `browserbridge stop`'s marker
// beside the socket, the host starts no bridge and tells the extension
// "stopped" (not a failure, not "starting"); once the marker is gone, it
// starts one and connects.
func TestHostKeepsAStoppedBridgeStopped(t *testing.T) {
	e := newEnv(t)
	configFile := filepath.Join(e.dir, "home", "config", "config.json")
	if err := os.MkdirAll(filepath.Dir(configFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configFile, []byte(`{"listen": "127.0.0.1:0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := paths.StopMarker(e.socket)
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, []byte("stopped\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars = append(e.vars, "BROWSERBRIDGE_BIN="+bins.Bridge)
	t.Cleanup(func() { killBridge(t, e.socket) })

	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 90*time.Second)
	var seen []string
	for stopped := false; !stopped; {
		select {
		case st := <-br.States:
			seen = append(seen, st.State)
			switch st.State {
			case protocol.StateStopped:
				stopped = true
			case protocol.StateStartingBridge, protocol.StateBridgeFailed, protocol.StateConnected:
				t.Fatalf("with the stop marker the host said %q (states %v); it must not start a bridge", st.State, seen)
			}
		case <-ctx.Done():
			t.Fatalf("no host.state stopped (states %v)", seen)
		}
	}
	// The host keeps polling: still no bridge while the marker stays.
	if _, err := os.Stat(e.socket); err == nil {
		t.Fatalf("a bridge socket appeared while the marker was there")
	}

	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case st := <-br.States:
			seen = append(seen, st.State)
			if st.State == protocol.StateConnected {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no host.state connected after the marker was removed (states %v)", seen)
		}
	}
}
