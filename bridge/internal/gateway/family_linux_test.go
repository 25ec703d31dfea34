//go:build linux

package gateway

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// sessionOf returns the session id of process pid, from /proc/pid/stat.
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	sid, err := strconv.Atoi(f[3]) // field 6
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// A server's grandchild that left its session (setsid, as daemons do) is
// out of reach of the process group; it is still stopped with its server,
// and reaped: no process is left behind.
func TestSetsidGrandchildStopsWithItsServer(t *testing.T) {
	tests := []struct {
		name       string
		perSession bool
		stop       func(t *testing.T, tg *testGateway, sid string)
	}{
		{"server removed by a reload", false, func(t *testing.T, tg *testGateway, _ string) {
			if _, err := tg.gw.Reload(map[string]stdio.ServerConfig{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"per-session child of a DELETEd session", true, func(t *testing.T, tg *testGateway, sid string) {
			if r := tg.raw("DELETE", "/servers/daemon/mcp", "", map[string]string{"Mcp-Session-Id": sid}); r.status != 204 {
				t.Fatalf("DELETE: %d %s", r.status, r.body)
			}
		}},
		{"gateway shut down", false, func(t *testing.T, tg *testGateway, _ string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tg.gw.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testChild(t, "setsid")
			pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
			cfg.Env["GATEWAY_TEST_PIDFILE"] = pidFile
			cfg.PerSession = tc.perSession
			tg := newTestGateway(t, map[string]stdio.ServerConfig{"daemon": cfg}, Options{})
			sid := tg.raw("POST", "/servers/daemon/mcp", initBody, nil).header.Get("Mcp-Session-Id")
			server := tg.childPID("/servers/daemon/mcp", sid)
			var grandchild int
			testutil.WaitFor(t, "read the grandchild's pid", func() bool {
				data, err := os.ReadFile(pidFile)
				grandchild, _ = strconv.Atoi(string(data))
				return err == nil && grandchild > 0
			})
			t.Cleanup(func() {
				if !processGone(grandchild) { // the test failed: leave nothing behind
					_ = syscall.Kill(grandchild, syscall.SIGKILL)
				}
			})
			if processGone(grandchild) || sessionOf(t, grandchild) == sessionOf(t, server) {
				t.Fatalf("the grandchild %d is not running in a session of its own", grandchild)
			}
			tc.stop(t, tg, sid)
			testutil.WaitFor(t, "stopped the server", func() bool { return processGone(server) })
			testutil.WaitFor(t, "stopped and reaped the setsid grandchild", func() bool { return processGone(grandchild) })
		})
	}
}
