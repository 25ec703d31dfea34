package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/testbrowser"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
	"github.com/browserbridge/browserbridge/manifests"
)

var bins testbrowser.Binaries

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithBinaries(m, "bb-cli", &bins))
}

// world is a throwaway user: HOME, config, socket, and a PATH without the
// machine's browsers, so detection sees only what a test creates.
type world struct {
	t      *testing.T
	home   string
	socket string
	env    []string
}

func newWorld(t *testing.T) *world {
	dir, err := os.MkdirTemp("", "bbw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &world{t: t, home: filepath.Join(dir, "home"), socket: filepath.Join(dir, "run", "bridge.sock")}
	os.MkdirAll(filepath.Join(w.home, "bb", "config"), 0o700)
	os.WriteFile(filepath.Join(w.home, "bb", "config", "config.json"), []byte(`{"listen":"127.0.0.1:0"}`), 0o600)
	w.env = []string{
		"HOME=" + w.home, "XDG_CONFIG_HOME=", "CHROME_CONFIG_HOME=", "XDG_RUNTIME_DIR=",
		"PATH=" + filepath.Dir(bins.Bridge) + ":/usr/bin:/bin",
		"BROWSERBRIDGE_HOME=" + filepath.Join(w.home, "bb"),
		"BROWSERBRIDGE_SOCKET=" + w.socket,
		"BROWSERBRIDGE_BIN=" + filepath.Join(dir, "no-bridge-here"),
	}
	return w
}

// cli runs the built browserbridge and returns its output and exit code.
func (w *world) cli(args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(bins.Bridge, args...)
	cmd.Env = append(os.Environ(), w.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return out.String(), code
}

// serve starts `browserbridge serve` and waits until it answers status.
func (w *world) serve() *exec.Cmd {
	w.t.Helper()
	cmd := exec.Command(bins.Bridge, "serve")
	cmd.Env = append(os.Environ(), w.env...)
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testutil.WaitFor(w.t, "browserbridge serve to answer", func() bool {
		_, code := w.cli("status")
		return code == 0
	})
	return cmd
}

func (w *world) chromiumProfile() string {
	dir := filepath.Join(w.home, ".config", "chromium")
	os.MkdirAll(filepath.Join(dir, "Default"), 0o700) // "Chromium is installed"
	return dir
}

func TestInstallUninstallUserDataDir(t *testing.T) {
	w := newWorld(t)
	profile := filepath.Join(w.home, "profile")
	out, code := w.cli("install", "--browser", "chromium", "--user-data-dir", profile, "--no-service")
	if code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	path := filepath.Join(profile, "NativeMessagingHosts", manifests.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("manifest not written: %v\n%s", err, out)
	}
	var m manifests.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Name != protocol.HostName || m.Path != bins.Host || len(m.AllowedOrigins) != 1 || m.AllowedOrigins[0] != extension.Origin() {
		t.Fatalf("manifest = %+v", m)
	}
	out, code = w.cli("uninstall", "--keep-service")
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("manifest still there after uninstall: %v", err)
	}
}

func TestDoctorReportsMissingManifestAndDeadBridge(t *testing.T) {
	w := newWorld(t)
	w.chromiumProfile()
	out, code := w.cli("doctor")
	if code != 1 {
		t.Fatalf("doctor exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"FAIL  manifest chromium",                  // the detected browser has no host registered
		"browserbridge install --browser chromium", // and the fix says how
		"FAIL  bridge",                             // nothing answers on the socket
		"no bridge answers at " + w.socket,
		"start it with `browserbridge start`",
		"warn  extension", // follows from the bridge: not a problem of its own
		"ok    host binary",
		"MCP port", // free, since no bridge holds it
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

func TestDoctorHealthyChain(t *testing.T) {
	w := newWorld(t)
	w.chromiumProfile()
	if out, code := w.cli("install", "--browser", "chromium", "--no-service"); code != 0 {
		t.Fatalf("install: %s", out)
	}
	w.serve()
	br, err := testbrowser.Start(testbrowser.Options{HostBin: bins.Host, Env: w.env})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Stop(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := br.WaitState(ctx, protocol.StateConnected); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Hello(ctx, "instance-doctor-1"); err != nil {
		t.Fatal(err)
	}
	out, _ := w.cli("doctor")
	// No service manager here: a running bridge without one is fine (issue
	// 31, item 8), and "Everything checks out" says so.
	for _, want := range []string{"ok    manifest chromium", "ok    bridge", "ok    service", "ok    extension", "TestBrowser 1.0, extension 0.0.1", "ok    MCP endpoint"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	out, code := w.cli("status")
	if code != 0 || !strings.Contains(out, "Browsers connected: 1") || !strings.Contains(out, "TestBrowser 1.0") || !strings.Contains(out, "/mcp") {
		t.Fatalf("status (exit %d):\n%s", code, out)
	}
	out, _ = w.cli("status", "--json")
	var st protocol.StatusResult
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Browsers) != 1 || st.Socket != w.socket {
		t.Fatalf("status --json = %s (%v)", out, err)
	}
}

func TestServeRefusesSecondBridge(t *testing.T) {
	w := newWorld(t)
	w.serve()
	out, code := w.cli("serve")
	if code != 1 || !strings.Contains(out, "another bridge is already serving") {
		t.Fatalf("second serve: exit %d\n%s", code, out)
	}
}

func TestCommandLineErrors(t *testing.T) {
	w := newWorld(t)
	bad := filepath.Join(w.home, "bad.json")
	os.WriteFile(bad, []byte(`{"listen": 3456}`), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Usage: browserbridge"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", []string{"status", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"version", "extra"}, 2, `unexpected argument "extra"`},
		{"bad config key", []string{"serve", "--config", bad}, 1, `key "listen" must be a string`},
		{"bad listen flag", []string{"serve", "--listen", "nowhere"}, 2, `key "listen"`},
		{"unknown browser", []string{"install", "--browser", "netscape", "--no-service"}, 1, "netscape"},
		{"status with no bridge", []string{"status"}, 1, "The bridge is not running"},
		{"service without action", []string{"service"}, 2, "usage: browserbridge service"},
		{"version", []string{"version"}, 0, extension.ID()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := w.cli(tc.args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("browserbridge %v: exit %d, want %d with %q\n%s", tc.args, code, tc.code, tc.want, out)
			}
		})
	}
}
