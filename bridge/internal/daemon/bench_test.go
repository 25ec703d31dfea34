package daemon

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/hostlink"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// BenchmarkLink compares the bridge talking to an extension through the
// real host process (chain: socket -> host -> stdio pipes -> extension and
// back) with the same extension code attached straight to the bridge's
// socket (bare). Both ends and every frame are the same; the difference is
// what the host adds. Reported: median and p99 round trip, and MB/s for
// 512 KiB echoes with 4 calls in flight.
func BenchmarkLink(b *testing.B) {
	for _, mode := range []string{"bare", "chain"} {
		b.Run("roundtrip/"+mode, func(b *testing.B) {
			tab := linkFor(b, mode)
			ctx := context.Background()
			params := map[string]string{"tool": "noop"}
			for range 200 { // warm up connections, buffers and the scheduler
				tab.Call(ctx, "", "echo", params)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if _, err := tab.Call(ctx, "", "echo", params); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
	for _, mode := range []string{"bare", "chain"} {
		b.Run("512KiB/"+mode, func(b *testing.B) {
			tab := linkFor(b, mode)
			payload, _ := json.Marshal(strings.Repeat("x", 512<<10-2))
			raw := json.RawMessage(payload)
			ctx := context.Background()
			b.SetBytes(2 * int64(len(raw))) // there and back
			b.ResetTimer()
			const inFlight = 4
			var wg sync.WaitGroup
			work := make(chan struct{})
			for range inFlight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						if res, err := tab.Call(ctx, "", "echo", raw); err != nil || len(res) != len(raw) {
							b.Errorf("echo: %d bytes, %v", len(res), err)
							return
						}
					}
				}()
			}
			for b.Loop() {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
		})
	}
}

// linkFor returns a registered browser reached the given way (see
// startEcho).
func linkFor(b *testing.B, mode string) *hostlink.Browser {
	e := newEnv(b)
	br, _ := e.startBridge()
	const instance = "instance-bench-1"
	e.startEcho(mode, instance)
	return waitRegistered(b, br, instance)
}

// startEcho starts an extension that says hello as instance, for the rest
// of the test. The extension is an echo process in both modes (see
// testbrowser.EchoMain): "bare" attaches it straight to the bridge's
// socket, "chain" puts the real host between them on pipes, as Chrome
// would.
func (e *env) startEcho(mode, instance string) {
	b := e.t
	self, _ := os.Executable()
	echo := exec.Command(self)
	echo.Env = append(os.Environ(), testbrowser.EnvEchoInstance+"="+instance)
	echo.Stderr = os.Stderr
	var procs []*exec.Cmd
	switch mode {
	case "bare":
		echo.Env = append(echo.Env, testbrowser.EnvEcho+"=socket:"+e.socket)
		procs = append(procs, echo)
	case "chain":
		toExt, fromHost, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		toHost, fromExt, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		host := exec.Command(bins.Host, extension.Origin())
		host.Env = append(os.Environ(), e.vars...)
		host.Stdin, host.Stdout = toHost, fromHost
		echo.Env = append(echo.Env, testbrowser.EnvEcho+"=stdio")
		echo.Stdin, echo.Stdout = toExt, fromExt
		procs = append(procs, host, echo)
		b.Cleanup(func() {
			for _, f := range []*os.File{toExt, fromHost, toHost, fromExt} {
				f.Close()
			}
		})
	}
	for _, p := range procs {
		if err := p.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Process.Kill(); p.Wait() })
	}
}

// waitRegistered waits for browser instance to register with br.
func waitRegistered(tb testing.TB, br *Bridge, instance string) *hostlink.Browser {
	tb.Helper()
	var tab *hostlink.Browser
	testutil.WaitFor(tb, "browser "+instance+" to register", func() bool {
		var ok bool
		tab, ok = br.Links().Browser(instance)
		return ok
	})
	return tab
}

// BenchmarkHostExitOnEOF measures how long the host takes to exit after
// Chrome closes its stdin (target: under 100 ms).
func BenchmarkHostExitOnEOF(b *testing.B) {
	e := newEnv(b)
	e.startBridge()
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		tb, err := testbrowser.Start(testbrowser.Options{HostBin: bins.Host, Env: e.vars})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tb.WaitState(testutil.Context(b, 10*time.Second), protocol.StateConnected); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		tb.CloseStdin()
		<-tb.Exited()
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1e3, "ms/exit")
}
