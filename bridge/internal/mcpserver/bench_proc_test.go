package mcpserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testproc"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// bridgeProcEnv makes this test binary a bridge process for
// BenchmarkCallsProc (see TestMain).
const bridgeProcEnv = "BB_BENCH_BRIDGE_PROCESS"

// BenchmarkCallsProc is BenchmarkCalls with the bridge (and its fake
// extension, on the native link's socket) in a process of its own, as
// `browserbridge serve` runs, and the clients in this one, as Claude Code
// or any other client runs. The two processes still share the two cores,
// but not a heap: the official SDK client's garbage (some 160 KB per
// call, mostly a 32 KiB decode buffer per JSON value) no longer makes the
// bridge's goroutines stop for the collector. The figures are for the
// client's view of each call, as in BenchmarkCalls.
func BenchmarkCallsProc(b *testing.B) {
	for _, client := range []string{"sdk", "raw"} {
		for _, transport := range []string{"mcp", "sse"} {
			if client == "raw" && transport == "sse" {
				continue
			}
			for _, clients := range []int{1, 10, 100} {
				b.Run(fmt.Sprintf("%s/%s/clients=%d", client, transport, clients), func(b *testing.B) {
					url := startBridgeProcess(b)
					var call func(int) error
					if client == "raw" {
						call = rawClients(b, url, clients)
					} else {
						call = sdkClients(b, url, transport, clients)
					}
					closedLoop(b, clients, call)
				})
			}
		}
	}
	for _, client := range []string{"sdk", "raw"} {
		const clients, rate = 10, 10_000
		b.Run(fmt.Sprintf("%s/mcp/clients=%d/rate=%d", client, clients, rate), func(b *testing.B) {
			url := startBridgeProcess(b)
			var call func(int) error
			if client == "raw" {
				call = rawClients(b, url, clients)
			} else {
				call = sdkClients(b, url, "mcp", clients)
			}
			pacedLoop(b, clients, rate, call)
		})
	}
}

// startBridgeProcess runs this test binary again as a bridge process and
// returns its base URL; the process ends with the benchmark.
func startBridgeProcess(b *testing.B) string {
	cmd, stdin, stdout := testproc.Start(b, bridgeProcEnv)
	b.Cleanup(func() {
		stdin.Close() // the process ends at EOF
		if err := cmd.Wait(); err != nil {
			b.Errorf("bridge process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("bridge process gave no URL: %v", err)
	}
	return strings.TrimSpace(line)
}

// serveBridgeProcess is the bridge process: the bridge on a loopback port
// and a fake extension on its host-link socket. It prints the URL, serves
// until its stdin ends, and returns the exit code.
func serveBridgeProcess() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bridge process:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "mcps-bench")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	b, mux, stop, err := startBridge(filepath.Join(dir, "bridge.sock"), Options{}, HTTPOptions{Sessions: benchSessions()})
	if err != nil {
		return fail(err)
	}
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()

	_, c, err := dialExtension(b.socket, "instance-bench-proc")
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return fail(err)
	}
	// A child process has no testing.TB for testutil.WaitFor: it waits as
	// WaitFor does, and its parent's benchmark fails on the error.
	for deadline := time.Now().Add(testutil.WaitLimit); !offers(b.mcps, "echo"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("the echo tool was not offered within %v", testutil.WaitLimit))
		}
	}
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
