package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/ipc"
)

var bins testbrowser.Binaries

func TestMain(m *testing.M) {
	testbrowser.RunEchoIfAsked()
	os.Exit(testutil.RunWithBinaries(m, "bb-bin", &bins))
}

// env is one test's world: a short socket path (sun_path is 108 bytes),
// a home for config and logs, and the variables the host reads.
type env struct {
	t      testing.TB
	dir    string
	socket string
	vars   []string
}

func newEnv(t testing.TB) *env {
	dir, err := os.MkdirTemp("", "bb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{t: t, dir: dir, socket: filepath.Join(dir, "run", "bridge.sock")}
	e.vars = []string{
		"BROWSERBRIDGE_SOCKET=" + e.socket,
		"BROWSERBRIDGE_HOME=" + filepath.Join(dir, "home"),
		// No bridge binary: a host must not start a real bridge behind the
		// back of a test that runs its own. TestHostStartsBridge opts in.
		"BROWSERBRIDGE_BIN=" + filepath.Join(dir, "no-bridge-here"),
	}
	return e
}

func (e *env) config() *config.Config {
	return &config.Config{Listen: "127.0.0.1:0", Socket: e.socket, Log: config.Log{File: "-"}}
}

// startBridge runs a bridge in this process; stop it with the returned func.
func (e *env) startBridge() (*Bridge, func()) {
	e.t.Helper()
	// A bridge the test just SIGKILLed may hold the lock a moment longer
	// than its socket: the kernel releases file locks asynchronously.
	var (
		b   *Bridge
		err error
	)
	testutil.WaitFor(e.t, "the lock of a killed bridge to be released", func() bool {
		b, err = Start(e.config(), testutil.Logger(e.t, "bridge"))
		return !errors.Is(err, ipc.ErrAlreadyServing)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once bool
	stop := func() {
		if once {
			return
		}
		once = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("bridge Run: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return b, stop
}

// startBrowser launches the real host with the test as its browser and
// waits until it is attached.
func (e *env) startBrowser(h testbrowser.Handler) *testbrowser.Browser {
	e.t.Helper()
	br, err := testbrowser.Start(testbrowser.Options{HostBin: bins.Host, Env: e.vars, Handler: h, Stderr: testutil.LogWriter(e.t, "host")})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = br.Stop(5 * time.Second)
		if err := br.Err(); err != nil {
			e.t.Errorf("host broke the protocol: %v", err)
		}
	})
	return br
}
