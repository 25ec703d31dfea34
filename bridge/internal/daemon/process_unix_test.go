//go:build !windows

package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/nativemsg/rpcstream"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// TestHostStartsBridge: no bridge is running; the host starts the real
// binary detached, attaches to it, and the bridge outlives the host. Then
// the bridge is killed outright and a new one started: the host reattaches.
func TestHostStartsBridge(t *testing.T) {
	e := newEnv(t)
	home := filepath.Join(e.dir, "home")
	os.MkdirAll(filepath.Join(home, "config"), 0o700)
	// The spawned bridge reads the per-user config: keep it off port 3456.
	os.WriteFile(filepath.Join(home, "config", "config.json"), []byte(`{"listen":"127.0.0.1:0"}`), 0o600)
	e.vars = append(e.vars, "BROWSERBRIDGE_BIN="+bins.Bridge)
	t.Cleanup(func() { killBridge(t, e.socket) })

	br := e.startBrowser(nil)
	ctx := testutil.Context(t, 20*time.Second)
	if _, err := br.WaitState(ctx, protocol.StateStartingBridge); err != nil {
		t.Fatal(err)
	}
	if _, err := br.WaitState(ctx, protocol.StateConnected); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Hello(ctx, "instance-spawn-1"); err != nil {
		t.Fatal(err)
	}
	st := status(t, e.socket)
	if len(st.Browsers) != 1 || st.Browsers[0].HostPID != br.Cmd.Process.Pid {
		t.Fatalf("spawned bridge's status = %+v", st)
	}
	if st.PID == os.Getpid() || st.PID == br.Cmd.Process.Pid {
		t.Fatalf("bridge pid %d is not a process of its own", st.PID)
	}

	// SIGKILL: no goodbye on the socket. A new bridge takes over the socket.
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := br.WaitState(ctx, protocol.StateDisconnected); err != nil {
		t.Fatal(err)
	}
	b2, _ := e.startBridge()
	if _, err := br.WaitState(ctx, protocol.StateConnected); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Hello(ctx, "instance-spawn-1"); err != nil {
		t.Fatal(err)
	}
	if res, err := waitRegistered(t, b2, "instance-spawn-1").Call(ctx, "", "x", 1); err != nil || string(res) != "1" {
		t.Fatalf("call through the new bridge = %s, %v", res, err)
	}
}

func status(t *testing.T, socket string) *protocol.StatusResult {
	t.Helper()
	c, err := ipc.Dial(testutil.Context(t, 5*time.Second), socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := jsonrpc2.NewConn(context.Background(), rpcstream.New(c, nativemsg.MaxLink), jsonrpc2.HandlerWithError(
		func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) { return nil, nil }))
	defer conn.Close()
	var st protocol.StatusResult
	if err := conn.Call(testutil.Context(t, 5*time.Second), protocol.BridgeStatus, nil, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// killBridge ends a bridge process serving socket, if one is left.
func killBridge(t *testing.T, socket string) {
	out, _ := exec.Command("pgrep", "-f", "serve --socket "+socket).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		fmt.Sscan(f, &pid)
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
